"""MCP tasks (SEP-1686, the 2025-11-25 task extension): a tool the server runs only as a task
is one of relaybot's background jobs. Its call asks for a task (`tools/call` with `task`), keeps
the task's server, id and session with the job (`ToolContext.job.keep`), polls `tasks/get` at
the server's `pollInterval` (bounded), tells its `statusMessage` as progress, and on
`completed`, `failed` or `input_required` asks `tasks/result`: that answer is the call's result
(the server's questions arrive meanwhile, to the user whose job it is, like any elicitation).
A job stopped on purpose sends `tasks/cancel`; one cut off by a shutdown leaves the task to run.

After a restart the job polls the same task again: in the session it was started in, which an
HTTP server keeps while relaybot waits for one of its tasks (the session is not closed with a
task in it, and is joined again by its id); a stdio server's process ended with the daemon, so
its task is reported as lost. The SDK has the task types but parses a `tools/call` answer only
as a CallToolResult, so the task is asked for through the session's dispatcher.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
import mcp.types as types
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

from tools._base import ToolContext
from tools._result import ToolResult
from tools.mcp._content import call_result
from tools.mcp._transport import Session, describe, transport

if TYPE_CHECKING:
    from tools.mcp._server import Server

log = logging.getLogger("tools.mcp")

POLL_FLOOR_S = 0.2  # however often a server asks to be polled
POLL_CEILING_S = 30.0  # however seldom
POLL_DEFAULT_S = 2.0  # a server that suggests no interval
TASK_TTL_MS = 24 * 3600 * 1000  # how long the server is asked to keep a task
RETRIES = 3  # polls in a row that may fail because the connection broke

Ask = Callable[[types.Request[Any, Any], type[Any]], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class TaskRef:
    """One task as a job keeps it: the server's name, the task's id, the session it is in."""

    server: str
    task: str
    session: str

    def text(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def read(cls, text: str | None) -> TaskRef | None:
        try:
            return cls(**json.loads(text)) if text else None
        except (ValueError, TypeError):
            return None


class Lost(Exception):
    """The task cannot be followed any more: the message says why, for the user."""


async def run_task(server: Server, tool: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """Call `tool` as a task and follow it to its result (or a line saying why there is none)."""
    job, name = ctx.job, server.config.name
    ref = TaskRef.read(job.resume if job is not None else None)
    token = server.answers.callers.enter(ctx)
    try:
        if ref is None:
            started = await _start(server, tool, args)
            if isinstance(started, ToolResult):
                return started
            ref = started
            if job is not None:
                await job.keep(ref.text())
            log.info("MCP server %s runs %s as task %s", name, tool, ref.task)
        server.tasks[ref.task] = ref.session
        try:
            result = await _follow(server, ref, tool, ctx)
        except asyncio.CancelledError:
            if job is not None and job.stopped():  # a person stopped it, not a shutdown
                server.tasks.pop(ref.task, None)
                await _cancel(server, ref)
            raise
        server.tasks.pop(ref.task, None)
        return result
    finally:
        server.answers.callers.leave(token)


async def _start(server: Server, tool: str, args: dict[str, Any]) -> TaskRef | ToolResult:
    name, conn = server.config.name, await server.up()
    if conn is None:
        return ToolResult.fail(f"MCP server {name} is restarting; try again in a moment.")
    params = types.CallToolRequestParams(
        name=tool, arguments=args, task=types.TaskMetadata(ttl=TASK_TTL_MS)
    ).model_dump(by_alias=True, mode="json", exclude_none=True)
    try:
        with anyio.fail_after(server.config.call_timeout_s):
            raw = await conn.dispatcher.send_raw_request("tools/call", params, {})
        created = types.CreateTaskResult.model_validate(raw)
    except MCPError as exc:
        return ToolResult.fail(f"MCP server {name} refused the call: {exc.message}", error=exc)
    except Exception as exc:  # a timeout, the connection broke, an answer that is no task
        return ToolResult.fail(
            f"MCP server {name} did not start {tool} as a task: {describe(exc)}", error=exc
        )
    return TaskRef(name, created.task.task_id, conn.key)


async def _follow(server: Server, ref: TaskRef, tool: str, ctx: ToolContext) -> ToolResult:
    """Poll the task to its end; a connection that breaks is tried again a few times."""
    name, failures = server.config.name, 0
    while True:
        try:
            async with _asker(server, ref) as ask:
                result = await _poll(server, ref, tool, ask, ctx)
                server.tasks.pop(ref.task, None)  # before its session is left: it may close
                return result
        except Exception as exc:  # one of a task group's, maybe: the SDK's and the transport's
            problem = _cause(exc)
            if problem is None:
                raise
            if isinstance(problem, Lost):
                server.tasks.pop(ref.task, None)
                return ToolResult.fail(str(problem))
            said = problem.message if isinstance(problem, MCPError) else describe(problem)
            broke = not isinstance(problem, MCPError) or problem.code == types.CONNECTION_CLOSED
            if broke and failures < RETRIES:
                failures += 1
                continue
            server.tasks.pop(ref.task, None)
            return ToolResult.fail(
                f"MCP server {name} no longer answers for task {ref.task} ({said}); its "
                "result is lost.",
                error=exc,
            )


def _cause(exc: BaseException) -> Exception | None:
    """What went wrong, out of the exception groups around it: why the task is lost, else
    what the server said, else a broken connection; None for anything else (a bug: raised)."""
    leaves: list[BaseException] = []
    waiting = [exc]
    while waiting:
        each = waiting.pop()
        if isinstance(each, BaseExceptionGroup):
            waiting += each.exceptions
        else:
            leaves.append(each)
    for kind in (Lost, MCPError, OSError, httpx2.HTTPError, anyio.BrokenResourceError):
        found = next((e for e in leaves if isinstance(e, kind)), None)
        if isinstance(found, Exception):
            return found
    return None


async def _poll(server: Server, ref: TaskRef, tool: str, ask: Ask, ctx: ToolContext) -> ToolResult:
    name = server.config.name
    while True:
        task = await ask(
            types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=ref.task)),
            types.GetTaskResult,
        )
        if task.status_message:
            ctx.progress(task.status_message)
            log.debug("MCP task %s (%s): %s", ref.task, task.status, task.status_message)
        if task.status == "cancelled":
            said = f": {task.status_message}" if task.status_message else ""
            return ToolResult.fail(f"MCP server {name} cancelled task {ref.task} ({tool}){said}.")
        if task.status in ("completed", "failed", "input_required"):
            try:
                result = await ask(
                    types.GetTaskPayloadRequest(
                        params=types.GetTaskPayloadRequestParams(task_id=ref.task)
                    ),
                    types.CallToolResult,
                )
            except MCPError as exc:
                if exc.code == types.CONNECTION_CLOSED:
                    raise
                said = task.status_message or exc.message
                return ToolResult.fail(f"MCP task {ref.task} ({tool}) on {name} failed: {said}")
            log.info("MCP server %s finished task %s (%s)", name, ref.task, task.status)
            return call_result(result, server.offered, server.reader)
        interval = (task.poll_interval or POLL_DEFAULT_S * 1000) / 1000
        await asyncio.sleep(min(max(interval, POLL_FLOOR_S), POLL_CEILING_S))


@contextlib.asynccontextmanager
async def _asker(server: Server, ref: TaskRef) -> AsyncIterator[Ask]:
    """How to ask the server about `ref`: in the session in use when the task is in it; else,
    over streamable HTTP, in the task's own session joined again by its id."""
    name, conn = server.config.name, await server.up()
    if conn is not None and conn.key == ref.session:
        yield conn.session.send_request
        return
    config = server.config
    if config.url is None or config.transport == "sse" or server.init is None:
        raise Lost(
            f"MCP server {name} was restarted since task {ref.task} started (it runs as a "
            "process of relaybot's, which stopped): the task and its result are lost."
        )
    gone = asyncio.Event()
    joined = Session(ref.session, keep=lambda: ref.task in server.tasks)
    auth = await server.sign_in.ready(config.headers) if server.sign_in else None
    async with transport(config, lambda call: gone.set(), auth, session=joined) as (read, write):
        answers = server.answers
        async with ClientSession(
            dispatcher=JSONRPCDispatcher(read, write),
            elicitation_callback=answers.elicit if answers.client.ask is not None else None,
        ) as session:
            session.adopt(server.init)

            async def ask(request: types.Request[Any, Any], kind: type[Any]) -> Any:
                try:
                    return await session.send_request(request, kind)
                except MCPError as exc:
                    if gone.is_set():
                        raise Lost(
                            f"MCP server {name} no longer has the session of task {ref.task} "
                            "(it restarted): the task and its result are lost."
                        ) from exc
                    raise

            yield ask


async def _cancel(server: Server, ref: TaskRef) -> None:
    """`tasks/cancel`, shielded from the cancellation that asked for it; a failure is logged."""
    with anyio.CancelScope(shield=True):
        try:
            with anyio.fail_after(10):
                async with _asker(server, ref) as ask:
                    await ask(
                        types.CancelTaskRequest(
                            params=types.CancelTaskRequestParams(task_id=ref.task)
                        ),
                        types.CancelTaskResult,
                    )
            log.info("MCP server %s: task %s cancelled", server.config.name, ref.task)
        except Exception as exc:
            log.warning(
                "MCP server %s: task %s not cancelled: %s",
                server.config.name,
                ref.task,
                describe(exc),
            )
