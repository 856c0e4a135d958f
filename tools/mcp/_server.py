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
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from tools._base import ToolContext
from tools._result import ToolResult
from tools.config import McpServerConfig
from tools.mcp._client import Answers, McpClient
from tools.mcp._content import Offered, call_result, read_result
from tools.mcp._oauth import SignIn
from tools.mcp._transport import describe, transport

log = logging.getLogger("tools.mcp")

MAX_RESOURCE_PAGES = 20  # of resources/list read at each connection
_CLIENT = types.Implementation(name="relaybot", version="0.1.0")


@dataclass(slots=True)
class _Connection:
    session: ClientSession
    lost: asyncio.Event  # set when this connection is gone


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
    ) -> None:
        self.config = config
        client = client or McpClient()
        self.answers = Answers(config, client)
        # an OAuth server's start does not wait for a person: its tools come when signed in
        self.sign_in = (
            SignIn(config, client.oauth, self._waiting) if config.auth == "oauth" else None
        )
        self.joined: Callable[[], None] | None = None  # the manager's, for such a late start
        self._started: asyncio.Future[bool] | None = None
        self.offered = Offered()  # the URIs read_resource may read
        self.reader = ""  # the name of this server's read_resource tool, once registered
        self.has_resources = False
        self.backoff_s = backoff_s
        self.connect_timeout_s = connect_timeout_s
        self.keepalive_s = keepalive_s
        self.specs: list[types.Tool] = []
        self._conn: _Connection | None = None
        self._connected_at: float | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> bool:
        """Connect and list the tools; False (logged) if the server cannot start."""
        started = self._started = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._supervise(started), name=f"mcp:{self.config.name}")
        return await started

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def call(self, tool: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Call `tool` for the user `ctx` names (who the server's own requests are for)."""
        name, conn = self.config.name, self._conn
        if conn is None or conn.lost.is_set():
            return ToolResult.fail(f"MCP server {name} is restarting; try again in a moment.")
        token = self.answers.callers.enter(ctx)
        try:
            result = await conn.session.call_tool(
                tool, args, read_timeout_seconds=self.config.call_timeout_s
            )
        except MCPError as exc:
            return self._failed(tool, conn, exc)
        except Exception as exc:  # the transport broke under the call
            conn.lost.set()
            return ToolResult.fail(f"MCP server {name} failed: {describe(exc)}", error=exc)
        finally:
            self.answers.callers.leave(token)
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
        failures = 0
        try:
            while True:
                self._connected_at = None
                try:
                    await self._serve(started)
                    reason = "the connection closed"
                except Exception as exc:
                    reason = describe(exc)
                finally:
                    self._conn = None
                if not started.done():
                    log.error("MCP server %s could not start (%s); skipping it", name, reason)
                    return
                ran = self._connected_at is not None
                if ran and loop.time() - (self._connected_at or 0.0) > self.backoff_s[-1]:
                    failures = 0  # it ran well for a while: start the backoff over
                delay = self.backoff_s[min(failures, len(self.backoff_s) - 1)]
                failures += 1
                what = "stopped" if ran else "could not restart"
                log.warning("MCP server %s %s (%s); retrying in %g s", name, what, reason, delay)
                await asyncio.sleep(delay)
        finally:
            if not started.done():
                started.set_result(False)

    async def _serve(self, started: asyncio.Future[bool]) -> None:
        """One connection, from connecting to its end; every context is entered and left here."""
        async with contextlib.AsyncExitStack() as stack:
            auth = await self.sign_in.ready(self.config.headers) if self.sign_in else None
            read, write = await stack.enter_async_context(transport(self.config, auth))
            lost = asyncio.Event()
            send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
            stack.callback(send.close)
            stack.callback(receive.close)
            relays = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(relays.cancel_scope.cancel)
            relays.start_soon(_relay, read, send, lost)
            session = await stack.enter_async_context(self._session(receive, write))
            with anyio.fail_after(self.connect_timeout_s):
                await session.initialize()
                specs = await _list_tools(session)
                capabilities = session.server_capabilities
                self.has_resources = capabilities is not None and bool(capabilities.resources)
                if self.has_resources:
                    await self._list_resources(session)
            conn = _Connection(session, lost)
            self._connected(conn, specs, started)
            await self._watch(conn)

    def _session(self, receive: Any, write: Any) -> ClientSession:
        """A session announcing what relaybot's hooks can answer (tools/mcp/_client.py)."""
        answers = self.answers
        return ClientSession(
            receive,
            write,
            client_info=_CLIENT,
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
        self._conn = conn
        self._connected_at = asyncio.get_running_loop().time()
        late = started.done() and not started.result() and self.joined is not None
        if not started.done() or late:
            self.specs = specs
            log.info("MCP server %s started with %d tools", self.config.name, len(specs))
            if late and self.joined is not None:
                self.joined()
                self.joined = None
            else:
                started.set_result(True)
            return
        log.info("MCP server %s is back", self.config.name)
        if {s.name for s in specs} != {s.name for s in self.specs}:
            log.warning(
                "MCP server %s now lists other tools; restart relaybot to use them",
                self.config.name,
            )

    async def _watch(self, conn: _Connection) -> None:
        """Return when the connection is lost: its stream ended, a call saw it close, or a
        keep-alive ping went unanswered."""
        while True:
            with anyio.move_on_after(self.keepalive_s):
                await conn.lost.wait()
                return
            try:
                with anyio.fail_after(min(self.keepalive_s, 10.0)):
                    await conn.session.send_ping()
            except Exception as exc:
                raise ConnectionError(f"keep-alive ping failed: {describe(exc)}") from exc


async def _relay(
    source: MemoryObjectReceiveStream[Any], sink: MemoryObjectSendStream[Any], lost: asyncio.Event
) -> None:
    """Pass the transport's messages to the session, and notice when the stream ends."""
    try:
        async with sink:
            async for item in source:
                await sink.send(item)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass
    finally:
        lost.set()


async def _list_tools(session: ClientSession) -> list[types.Tool]:
    specs: list[types.Tool] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        specs += page.tools
        cursor = page.next_cursor
        if not cursor:
            return specs
