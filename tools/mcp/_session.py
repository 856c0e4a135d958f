"""The plumbing of one connection's MCP session, apart from the supervisor that owns it
(tools/mcp/_server.py): the relay that notices when the transport's stream ends, the handshake
(with a hint when an older HTTP+SSE server refuses streamable HTTP), the paged tool list, and a
wait for the first of two events."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import ClientSession
from mcp.shared.exceptions import MCPError

from tools.config import McpServerConfig


async def either(a: asyncio.Event, b: asyncio.Event) -> None:
    waits = {asyncio.ensure_future(a.wait()), asyncio.ensure_future(b.wait())}
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


async def relay(
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


async def initialize(session: ClientSession, config: McpServerConfig) -> types.InitializeResult:
    try:
        return await session.initialize()
    except MCPError as exc:
        if config.url is None or config.transport == "sse":
            raise
        raise ConnectionError(
            f"{exc.message} (streamable HTTP): if {config.url} is an older HTTP+SSE server, "
            'set transport = "sse" (its URL usually ends in /sse)'
        ) from exc


async def list_tools(session: ClientSession) -> list[types.Tool]:
    specs: list[types.Tool] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        specs += page.tools
        cursor = page.next_cursor
        if not cursor:
            return specs
