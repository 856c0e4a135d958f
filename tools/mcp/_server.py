# Left whole: one server's connection, from supervising it to a call on its session; the session's
# plumbing (_session), notices (_notices), content (_content) and sign-in (_oauth) are apart.
"""One MCP server's supervisor: a long-lived task that connects, lists the tools (and the
resources it offers), keeps the connection alive with pings and reconnects with backoff; calls
from any task use its session, and the server's own requests (roots, sampling, elicitation) are
answered for the user whose calls are in flight (tools/mcp/_client.py).

The SDK's anyio cancel scopes must be entered and left by one task, hence the one task per
server; a call made while the server is away gets an error result, never an exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.metadata
import logging
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import mcp.types as types
from mcp import ClientSession
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.message import SessionMessage

from tools._base import ToolContext
from tools._result import ToolResult
from tools.config import McpServerConfig
from tools.mcp._client import Answers, McpClient
from tools.mcp._content import Offered, call_result, read_result
from tools.mcp._notices import list_changes, progress_text, server_log
from tools.mcp._oauth import SignIn
from tools.mcp._session import either, initialize, list_tools, relay
from tools.mcp._transport import Session, call_key, describe, transport

log = logging.getLogger("tools.mcp")

MAX_RESOURCE_PAGES = 20  # of resources/list read at each connection


@functools.cache
def _client() -> types.Implementation:
    """Who connects, as servers log it: this relaybot and its installed version."""
    try:
        version = importlib.metadata.version("relaybot")
    except importlib.metadata.PackageNotFoundError:
        version = "0+unknown"
    return types.Implementation(name="relaybot", version=version)


@dataclass(slots=True)
class _Connection:
    session: ClientSession
    lost: asyncio.Event  # set when this connection is gone
    expired: asyncio.Event  # the server answered 404 for its session: a new one, at once
    tools_changed: asyncio.Event  # the server said its tool list changed: list it again
    refused: list[str]  # the calls (call_key) answered 404 for the session: not run
    dispatcher: JSONRPCDispatcher  # the session's, for a request the SDK would not parse
    key: str  # which session this is: the HTTP session's id, a process's own (stdio)


class Server:
    """One configured server: a supervisor task and, while connected, its session."""

    def __init__(
        self,
        config: McpServerConfig,
        *,
        backoff_s: Sequence[float],
        connect_timeout_s: float,
        keepalive_s: float,
        client: McpClient | None = None,
        on_tools: Callable[[Server], None] = lambda server: None,
    ) -> None:
        self.config = config
        self.on_tools = on_tools  # called when `specs` changes (a start, a change of list)
        client = client or McpClient()
        self.answers = Answers(config, client)
        # an OAuth server's start does not wait for a person: its tools come when signed in
        self.sign_in = (
            SignIn(config, client.oauth, self._waiting) if config.auth == "oauth" else None
        )
        self._started: asyncio.Future[bool] | None = None
        self.offered = Offered()  # the URIs read_resource may read
        self.reader = ""  # the name of this server's read_resource tool, once registered
        self.has_resources = False
        self.backoff_s = backoff_s
        self.connect_timeout_s = connect_timeout_s
        self.keepalive_s = keepalive_s
        self.specs: list[types.Tool] = []
        self.error: str | None = None  # why it is not connected, after a failed attempt
        self.instructions = ""  # what the server said at its last start about using it
        self._conn: _Connection | None = None
        self._connected_at: float | None = None
        self._task: asyncio.Task[None] | None = None
        self._ever_connected = False
        self._up = asyncio.Event()  # set while connected
        self._renewing = False  # the session expired: a new one is being made at once
        self.tasks_ok = False  # it runs tools/call as MCP tasks (its `tasks` capability)
        self.tasks: dict[str, str] = {}  # its MCP tasks relaybot's jobs wait for: their sessions
        self.init: types.InitializeResult | None = None  # its last handshake's answer

    async def start(self) -> bool:
        """Connect and list the tools; False (logged) if the first attempt fails: the server
        is then tried again with backoff, and its tools offered once it starts."""
        started = self._started = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._supervise(started), name=f"mcp:{self.config.name}")
        return await started

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.lost.is_set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def call(self, tool: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Call `tool` for the user `ctx` names (who the server's own requests are for); the
        server's progress notifications are told to `ctx.progress`, in words."""
        if self._renewing:  # e.g. the stream of server messages saw the 404 first
            await self._wait_up()
        conn = self._conn
        if conn is None or conn.lost.is_set():
            return self._restarting()
        on_progress: ProgressFnT | None = None
        if ctx.progress is not None:
            tell = ctx.progress

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                tell(progress_text(progress, total, message))

        token = self.answers.callers.enter(ctx)
        try:
            result = await self._call(conn, tool, args, on_progress)
            if call_key(tool, args) in conn.refused:  # it never ran: the session was gone
                conn.refused.remove(call_key(tool, args))
                await self._wait_up()
                conn = self._conn
                if conn is None or conn.lost.is_set():
                    return self._restarting()
                result = await self._call(conn, tool, args, on_progress)
            return result
        finally:
            self.answers.callers.leave(token)

    async def _wait_up(self) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.connect_timeout_s):
                await self._up.wait()

    @property
    def session(self) -> _Connection | None:
        """The connection in use, None while the server is away."""
        conn = self._conn
        return None if conn is None or conn.lost.is_set() else conn

    async def up(self) -> _Connection | None:
        """The connection in use, waiting up to `connect_timeout_s` for it; None if away."""
        if self.session is None or self._renewing:
            await self._wait_up()
        return self.session

    def _restarting(self) -> ToolResult:
        return ToolResult.fail(
            f"MCP server {self.config.name} is restarting; try again in a moment."
        )

    async def _call(
        self, conn: _Connection, tool: str, args: dict[str, Any], progress: ProgressFnT | None
    ) -> ToolResult:
        name = self.config.name
        try:
            result = await conn.session.call_tool(
                tool,
                args,
                read_timeout_seconds=self.config.call_timeout_s,
                progress_callback=progress,  # sends a progressToken
            )
        except MCPError as exc:
            return self._failed(tool, conn, exc)
        except Exception as exc:  # the transport broke under the call
            conn.lost.set()
            return ToolResult.fail(f"MCP server {name} failed: {describe(exc)}", error=exc)
        return call_result(result, self.offered, self.reader)

    async def read(self, uri: str) -> ToolResult:
        """`resources/read` of a URI this server offered or linked."""
        name, conn = self.config.name, self._conn
        if uri not in self.offered:
            return ToolResult.fail(
                f"{uri!r} is not a resource server {name} listed or linked; give a URI exactly "
                "as it appeared.",
                retryable=True,
            )
        if conn is None or conn.lost.is_set():
            return ToolResult.fail(f"MCP server {name} is restarting; try again in a moment.")
        try:
            with anyio.fail_after(self.config.call_timeout_s):
                result = await conn.session.read_resource(uri)
        except TimeoutError as exc:
            return ToolResult.fail(
                f"MCP server {name} did not read {uri} within {self.config.call_timeout_s:g} s.",
                error=exc,
            )
        except MCPError as exc:
            return self._failed("read_resource", conn, exc)
        except Exception as exc:
            conn.lost.set()
            return ToolResult.fail(f"MCP server {name} failed: {describe(exc)}", error=exc)
        return read_result(result.contents)

    def _failed(self, tool: str, conn: _Connection, exc: MCPError) -> ToolResult:
        name = self.config.name
        if exc.code == types.REQUEST_TIMEOUT:
            return ToolResult.fail(
                f"MCP tool {tool} on server {name} did not answer within "
                f"{self.config.call_timeout_s:g} s.",
                error=exc,
            )
        if exc.code == types.CONNECTION_CLOSED:
            conn.lost.set()
            return ToolResult.fail(
                f"MCP server {name} stopped during the call; it is being restarted.", error=exc
            )
        return ToolResult.fail(f"MCP server {name} refused the call: {exc.message}", error=exc)

    async def _supervise(self, started: asyncio.Future[bool]) -> None:
        name, loop = self.config.name, asyncio.get_running_loop()
        failures, expired_before = 0, False
        try:
            while True:
                self._connected_at, expired = None, False
                try:
                    expired = await self._serve(started)
                    reason = "the connection closed"
                except Exception as exc:
                    reason = describe(exc)
                finally:
                    self._conn = None
                    self._up.clear()
                if expired and not expired_before:  # once; a server that keeps at it waits
                    log.info("MCP server %s forgot the session; starting a new one", name)
                    expired_before = True
                    continue
                expired_before, self._renewing = expired, False
                self.error = reason
                ran = self._connected_at is not None
                if ran and loop.time() - (self._connected_at or 0.0) > self.backoff_s[-1]:
                    failures = 0  # it ran well for a while: start the backoff over
                delay = self.backoff_s[min(failures, len(self.backoff_s) - 1)]
                failures += 1
                if not started.done():
                    log.error(
                        "MCP server %s could not start (%s); retrying in %g s", name, reason, delay
                    )
                    started.set_result(False)
                else:
                    what = "stopped" if ran else "could not restart"
                    log.warning(
                        "MCP server %s %s (%s); retrying in %g s", name, what, reason, delay
                    )
                await asyncio.sleep(delay)
        finally:
            if not started.done():
                started.set_result(False)

    async def _serve(self, started: asyncio.Future[bool]) -> bool:
        """One connection, from connecting to its end; every context is entered and left here.
        True when it ended because the server no longer knew its session (HTTP 404)."""
        lost, expired, changed = asyncio.Event(), asyncio.Event(), asyncio.Event()
        refused: list[str] = []

        def session_gone(call: str | None) -> None:
            if call is not None:
                refused.append(call)
            if not lost.is_set():
                expired.set()
                lost.set()
                self._up.clear()
                self._renewing = True

        async with contextlib.AsyncExitStack() as stack:
            auth = await self.sign_in.ready(self.config.headers) if self.sign_in else None
            http = Session()  # left open while a task runs in it:
            http.keep = lambda: http.id in self.tasks.values()
            read, write = await stack.enter_async_context(
                transport(self.config, session_gone, auth, session=http)
            )
            send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
            stack.callback(send.close)
            stack.callback(receive.close)
            relays = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(relays.cancel_scope.cancel)
            relays.start_soon(relay, read, send, lost)
            dispatcher = JSONRPCDispatcher(receive, write)
            session = await stack.enter_async_context(self._session(dispatcher, changed))
            with anyio.fail_after(self.connect_timeout_s):
                self.init = await initialize(session, self.config)
                self.instructions = self.init.instructions or ""
                capabilities = self.init.capabilities
                tasks = capabilities.tasks and capabilities.tasks.requests
                self.tasks_ok = bool(tasks and tasks.tools and tasks.tools.call is not None)
                specs = await list_tools(session)
                self.has_resources = bool(capabilities.resources)
                if self.has_resources:
                    await self._list_resources(session)
            key = http.id or secrets.token_hex(8)
            conn = _Connection(session, lost, expired, changed, refused, dispatcher, key)
            self._connected(conn, specs, started)
            await self._watch(conn)
        return expired.is_set()

    def _session(self, dispatcher: JSONRPCDispatcher, changed: asyncio.Event) -> ClientSession:
        """A session announcing what relaybot's hooks can answer (tools/mcp/_client.py), and
        hearing the server's log messages and changes of its tool list (tools/mcp/_notices.py).
        Nothing is announced for tasks: relaybot runs none of the server's requests as tasks,
        and calling a server's tool as a task needs only the server's capability."""
        answers = self.answers
        return ClientSession(
            dispatcher=dispatcher,
            client_info=_client(),
            logging_callback=server_log(self.config.name),
            message_handler=list_changes(changed),
            list_roots_callback=answers.roots,
            sampling_callback=answers.sample if answers.client.sample is not None else None,
            elicitation_callback=answers.elicit if answers.client.ask is not None else None,
        )

    def _waiting(self) -> None:
        """A person must sign in first: the start goes on without this server for now."""
        if self._started is not None and not self._started.done():
            self._started.set_result(False)

    async def _list_resources(self, session: ClientSession) -> None:
        cursor: str | None = None
        for _ in range(MAX_RESOURCE_PAGES):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_resources(params=params)
            for resource in page.resources:
                self.offered.add(str(resource.uri))
            cursor = page.next_cursor
            if not cursor:
                return

    def _connected(
        self, conn: _Connection, specs: list[types.Tool], started: asyncio.Future[bool]
    ) -> None:
        self._conn, self.error, self._renewing = conn, None, False
        self._up.set()
        self._connected_at = asyncio.get_running_loop().time()
        name, first = self.config.name, not started.done()
        if first:
            log.info("MCP server %s started with %d tools", name, len(specs))
            started.set_result(True)
        elif not self._ever_connected:
            log.info("MCP server %s started at last, with %d tools", name, len(specs))
        else:
            log.info("MCP server %s is back", name)
        self._ever_connected = True
        self._take(specs)

    def _take(self, specs: list[types.Tool]) -> None:
        if specs != self.specs:
            self.specs = specs
            self.on_tools(self)

    async def _watch(self, conn: _Connection) -> None:
        """Return when the connection is lost: its stream ended, a call saw it close, or a
        keep-alive ping went unanswered. List the tools again when the server says they changed."""
        while True:
            with anyio.move_on_after(self.keepalive_s):
                await either(conn.lost, conn.tools_changed)
            if conn.lost.is_set():
                return
            relist = conn.tools_changed.is_set()
            try:
                with anyio.fail_after(min(self.keepalive_s, 10.0)):
                    if relist:
                        conn.tools_changed.clear()
                        self._take(await list_tools(conn.session))
                        log.info("MCP server %s changed its tools", self.config.name)
                    else:
                        await conn.session.send_ping()
            except Exception as exc:
                what = "listing the changed tools" if relist else "keep-alive ping"
                raise ConnectionError(f"{what} failed: {describe(exc)}") from exc
