"""What an MCP server tells relaybot unasked, and how it is shown: its log messages go into the
daemon's log at the mapped level (the `tools.mcp` logger, so the log handler redacts secrets
from them like from any record); a changed tool list wakes the supervisor, which lists the tools
again (a request cannot be awaited inside the SDK's notification handler: its answer arrives
through the same loop); a call's progress becomes a short line for the turn's progress message."""

from __future__ import annotations

import asyncio
import json
import logging

import mcp.types as types
from mcp.client.session import IncomingMessage, LoggingFnT, MessageHandlerFnT

from tools.builtins._text import clip

log = logging.getLogger("tools.mcp")

MAX_LOG_CHARS = 2_000
LEVELS = {  # RFC 5424's, as MCP names them
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


def server_log(server: str) -> LoggingFnT:
    """The SDK's logging callback for `server`: each message one record of the daemon's log."""

    async def log_message(params: types.LoggingMessageNotificationParams) -> None:
        data = params.data if isinstance(params.data, str) else json.dumps(params.data, default=str)
        source = f"{server}/{params.logger}" if params.logger else server
        log.log(
            LEVELS.get(params.level, logging.INFO),
            "MCP server %s: %s",
            source,
            clip(data, MAX_LOG_CHARS),
        )

    return log_message


def list_changes(changed: asyncio.Event) -> MessageHandlerFnT:
    """The SDK's message handler: sets `changed` when the server's tool list changes."""

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    return on_message


def progress_text(progress: float, total: float | None, message: str | None) -> str:
    """A progress notification in a few words: "40% loading data", "3 of 7", "step 3"."""
    amount = f"{progress / total:.0%}" if total else f"{progress:g}"
    return f"{amount} {message.strip()}" if message and message.strip() else amount
