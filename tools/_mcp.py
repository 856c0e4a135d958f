"""MCP servers' tools as relaybot tools.

    async with McpManager(config.mcp.servers, registry) as mcp:
        ...  # the registry now holds "<server>__<tool>" for each server that started
        mcp.tools()  # [McpToolInfo(server, name, tier), ...] for `relaybot tools`

Each server's session lives in one long-lived supervisor task, because the SDK's anyio cancel
scopes must be entered and exited by the same task; calls from other tasks use the session
directly. When a connection drops (the process exits, a keep-alive ping fails) the supervisor
reconnects with backoff, and calls meanwhile get an error result. A server that cannot start at
all is logged and skipped.

Tiers: a tool is safe only if it declares `readOnlyHint: true` and the server's
`trust_annotations` is on, or if it is in the server's `trusted_tools`; every other tool asks.
What a tool returns reaches the model only as a tool result.

A stdio server runs under the same keeper as run_command (`tools/builtins/_sandbox.py`): its
descendants die with it, and it cannot read the daemon's /proc entries or the credentials
directory. Its stderr is read line by line into this module's logger, so the daemon's log
handler redacts secrets from it like from any other record.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import threading
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import anyio
import httpx2
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from tools._base import Tier, Tool
from tools._config import McpServerConfig
from tools._errors import ToolDefinitionError
from tools._registry import ToolRegistry
from tools._result import ToolResult
from tools.builtins._sandbox import keeper_argv
from tools.builtins._text import clip

log = logging.getLogger(__name__)

MAX_RESULT_CHARS = 16_000
MAX_STDERR_LINE = 2_000
_CLIENT = types.Implementation(name="relaybot", version="0.1.0")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class McpToolInfo(NamedTuple):
    """One registered MCP tool, for `relaybot tools`: `for server, name, tier in mcp.tools()`."""

    server: str
    name: str  # the registered name, "<server>__<tool>" (the tool's `remote_name` is the server's)
    tier: Tier


def tool_name(server: str, tool: str) -> str:
    """`<server>__<tool>` with only [A-Za-z0-9_-], at most 64 characters (a long name keeps
    its start and gets a short hash, so two long names stay distinct)."""
    name = _UNSAFE.sub("_", f"{server}__{tool}")
    if len(name) > 64:
        name = f"{name[:55]}_{hashlib.sha1(name.encode()).hexdigest()[:8]}"
    return name


def tool_tier(config: McpServerConfig, spec: types.Tool) -> Tier:
    if spec.name in config.trusted_tools:
        return Tier.SAFE
    read_only = spec.annotations is not None and spec.annotations.read_only_hint is True
    return Tier.SAFE if config.trust_annotations and read_only else Tier.DESTRUCTIVE


class McpTool(Tool):
    """One tool of one MCP server; its schema and description are the server's own."""

    def __init__(self, server: _Server, spec: types.Tool) -> None:
        self.server = server
        self.remote_name = spec.name
        self.name = tool_name(server.config.name, spec.name)
        self.description = spec.description or f"{spec.name} (MCP server {server.config.name})"
        self.parameters = spec.input_schema
        self.tier = tool_tier(server.config, spec)
        annotations = spec.annotations
        self.safety = (
            annotations.model_dump(by_alias=True, exclude_none=True) if annotations else {}
        )
        self.timeout_s = server.config.call_timeout_s + 5  # the SDK's timeout answers first

    async def execute(self, args: dict[str, Any]) -> ToolResult:
        return await self.server.call(self.remote_name, args)


@dataclass(slots=True)
class _Connection:
    session: ClientSession
    lost: asyncio.Event  # set when this connection is gone


class _Server:
    """One configured server: a supervisor task and, while connected, its session."""

    def __init__(
        self,
        config: McpServerConfig,
        *,
        backoff_s: Sequence[float],
        connect_timeout_s: float,
        keepalive_s: float,
    ) -> None:
        self.config = config
        self.backoff_s = backoff_s
        self.connect_timeout_s = connect_timeout_s
        self.keepalive_s = keepalive_s
        self.specs: list[types.Tool] = []
        self._conn: _Connection | None = None
        self._connected_at: float | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> bool:
        """Connect and list the tools; False (logged) if the server cannot start."""
        started = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._supervise(started), name=f"mcp:{self.config.name}")
        return await started

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def call(self, tool: str, args: dict[str, Any]) -> ToolResult:
        name, conn = self.config.name, self._conn
        if conn is None or conn.lost.is_set():
            return ToolResult.fail(f"MCP server {name} is restarting; try again in a moment.")
        try:
            result = await conn.session.call_tool(
                tool, args, read_timeout_seconds=self.config.call_timeout_s
            )
        except MCPError as exc:
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
        except Exception as exc:  # the transport broke under the call
            conn.lost.set()
            return ToolResult.fail(f"MCP server {name} failed: {_describe(exc)}", error=exc)
        return _to_result(result)

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
                    reason = _describe(exc)
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
            read, write = await stack.enter_async_context(self._transport())
            lost = asyncio.Event()
            send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
            stack.callback(send.close)
            stack.callback(receive.close)
            relays = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(relays.cancel_scope.cancel)
            relays.start_soon(_relay, read, send, lost)
            session = await stack.enter_async_context(
                ClientSession(receive, write, client_info=_CLIENT)
            )
            with anyio.fail_after(self.connect_timeout_s):
                await session.initialize()
                specs = await _list_tools(session)
            conn = _Connection(session, lost)
            self._connected(conn, specs, started)
            await self._watch(conn)

    def _connected(
        self, conn: _Connection, specs: list[types.Tool], started: asyncio.Future[bool]
    ) -> None:
        self._conn = conn
        self._connected_at = asyncio.get_running_loop().time()
        if not started.done():
            self.specs = specs
            log.info("MCP server %s started with %d tools", self.config.name, len(specs))
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
                raise ConnectionError(f"keep-alive ping failed: {_describe(exc)}") from exc

    @contextlib.asynccontextmanager
    async def _transport(
        self,
    ) -> AsyncIterator[tuple[Any, Any]]:  # the SDK's (read, write) streams
        cfg = self.config
        if cfg.command is not None:
            path = (cfg.env or {}).get("PATH", os.environ.get("PATH"))
            command = shutil.which(cfg.command, path=path)
            if command is None:
                raise FileNotFoundError(f"no command {cfg.command!r} found")
            credentials = os.environ.get("CREDENTIALS_DIRECTORY")
            keeper, *args = keeper_argv([command, *cfg.args], [credentials] if credentials else [])
            params = StdioServerParameters(command=keeper, args=args, env=cfg.env or None)
            read_end, write_end = os.pipe()
            threading.Thread(
                target=_log_stderr,
                args=(cfg.name, read_end),
                name=f"mcp-stderr:{cfg.name}",
                daemon=True,
            ).start()
            with os.fdopen(write_end, "w") as errlog:  # closed once the server has its own copy
                async with stdio_client(params, errlog=errlog) as streams:
                    errlog.close()
                    yield streams
            return
        assert cfg.url is not None
        timeout = httpx2.Timeout(30.0, read=300.0)
        async with (
            httpx2.AsyncClient(headers=cfg.headers, timeout=timeout) as http,
            streamable_http_client(cfg.url, http_client=http) as streams,
        ):
            yield streams


class McpManager:
    """Connects the configured MCP servers and registers their tools; an async context manager
    (leaving it unregisters the tools and stops the servers)."""

    def __init__(
        self,
        servers: Sequence[McpServerConfig],
        registry: ToolRegistry,
        *,
        backoff_s: Sequence[float] = (1.0, 2.0, 5.0, 15.0, 60.0),
        connect_timeout_s: float = 30.0,
        keepalive_s: float = 30.0,
    ) -> None:
        self.registry = registry
        self._servers = [
            _Server(
                cfg,
                backoff_s=backoff_s,
                connect_timeout_s=connect_timeout_s,
                keepalive_s=keepalive_s,
            )
            for cfg in servers
        ]
        self._tools: list[McpTool] = []

    async def __aenter__(self) -> McpManager:
        try:
            started = await asyncio.gather(*(s.start() for s in self._servers))
            for server, ok in zip(self._servers, started, strict=True):
                if ok:
                    self._register(server)
        except BaseException:
            await self._stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stop()

    def tools(self) -> list[McpToolInfo]:
        return [McpToolInfo(t.server.config.name, t.name, t.tier) for t in self._tools]

    def _register(self, server: _Server) -> None:
        for spec in server.specs:
            try:
                tool = McpTool(server, spec)
                self.registry.register(tool)
            except ToolDefinitionError as exc:
                log.error("MCP server %s: tool %s left out: %s", server.config.name, spec.name, exc)
                continue
            self._tools.append(tool)
        unknown = set(server.config.trusted_tools) - {s.name for s in server.specs}
        if unknown:
            log.warning(
                "MCP server %s: trusted_tools names no such tool: %s",
                server.config.name,
                ", ".join(sorted(unknown)),
            )

    async def _stop(self) -> None:
        for tool in self._tools:
            if self.registry.get(tool.name) is tool:
                self.registry.unregister(tool.name)
        self._tools.clear()
        await asyncio.gather(*(s.stop() for s in self._servers))


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


def _to_result(result: types.CallToolResult) -> ToolResult:
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            parts.append(f"[{block.type} ({block.mime_type}) not shown]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource {block.uri}]")
        elif isinstance(block, types.EmbeddedResource):
            res = block.resource
            text = getattr(res, "text", None)
            parts.append(text if isinstance(text, str) else f"[binary resource {res.uri}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    text = clip("\n".join(parts), MAX_RESULT_CHARS) or "(no output)"
    return ToolResult.fail(text) if result.is_error else ToolResult.ok(text)


def _log_stderr(server: str, fd: int) -> None:
    """Log each line the server writes to stderr, until every copy of the pipe is closed."""
    with os.fdopen(fd, "rb") as pipe:
        while raw := pipe.readline(MAX_STDERR_LINE):
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                log.info("MCP server %s: %s", server, line)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
