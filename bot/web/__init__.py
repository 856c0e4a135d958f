"""The operator's console in the browser (`[web] listen`): served by the daemon from its own
event loop with aiohttp, pages rendered server-side from the shared store, so the console of any
instance shows the whole cluster. bot/app.py imports this package only when `[web] listen` is
set.

Sign-in and sessions: ``_server``; the page layout and escaping: ``_html``; the pages:
``_overview``, ``_conversations``, ``_work``, ``_usage``, ``_tools``; what the console changes,
and how it reaches the instance holding the chat: ``_actions``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from bot._serving import serving
from bot.web import _conversations, _overview, _tools, _usage, _work
from bot.web._server import Server

if TYPE_CHECKING:
    from bot._daemon import Daemon

__all__ = ["console_server"]

log = logging.getLogger("bot.web")


@contextlib.asynccontextmanager
async def console_server(daemon: Daemon, host: str, port: int) -> AsyncIterator[None]:
    """Serve the console on host:port until the block exits."""
    pages = {
        **_overview.PAGES,
        **_conversations.PAGES,
        **_work.PAGES,
        **_usage.PAGES,
        **_tools.PAGES,
    }
    async with serving(Server(daemon).application(pages), host, port, "web.listen"):
        log.info("console: serving http://%s:%d/ (sign in with /console)", host, port)
        yield
