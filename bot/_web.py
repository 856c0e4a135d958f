"""Where the web console is served: the address `[web] listen` in force says, or nowhere.

The App starts it with the channels; a reload that adds, moves or removes `[web] listen`
(bot/_reload.py) opens the new address before anything else is put in force, so an address that
cannot be listened on refuses the whole reload (with the key and the reason) and the console
stays where it was; once the new config is in force, the old server stops. What the console
reads of `[web]` besides the address (public_url, session_hours, link_minutes) it reads from the
config in force at each request. The console's package (bot/web) is imported only when served.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.config import WebConfig
from tools.errors import ConfigError

if TYPE_CHECKING:
    from bot._daemon import Daemon

log = logging.getLogger(__name__)

Address = tuple[str, int]


@dataclass(slots=True)
class _Served:
    address: Address
    stack: contextlib.AsyncExitStack


@dataclass(slots=True)
class Move:
    """A console opened for a reload, not yet in force: :meth:`keep` it, or :meth:`drop` it."""

    console: WebConsole
    opened: _Served | None  # None: served nowhere from now on
    unchanged: bool = False

    async def keep(self) -> None:
        """The new address in force: the old server stops."""
        if self.unchanged:
            return
        old, self.console.served = self.console.served, self.opened
        if old is not None:
            await old.stack.aclose()
        if self.opened is None:
            log.info("console: stopped ([web] listen unset)")

    async def drop(self) -> None:
        """The reload refused: the console opened for it stops, the old one stays."""
        if not self.unchanged and self.opened is not None:
            await self.opened.stack.aclose()


class WebConsole:
    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.served: _Served | None = None

    @property
    def address(self) -> Address | None:
        return self.served.address if self.served is not None else None

    async def move(self, web: WebConfig) -> Move:
        """The console where `web` says, opened (ConfigError, nothing changed, when the address
        cannot be listened on); the one serving now stops when the move is kept."""
        want = web.address() if web.listen else None
        if want == self.address:
            return Move(self, self.served, unchanged=True)
        if want is None:
            return Move(self, None)
        try:
            return Move(self, await self._open(want))
        except ConfigError:
            if self.served is None or self.served.address[1] != want[1]:
                raise
        # the same port on another host: the old server lets it go first, and comes back when
        # the new one cannot listen either
        old = self.served
        await old.stack.aclose()
        self.served = None
        try:
            return Move(self, await self._open(want))
        except ConfigError:
            self.served = await self._open(old.address)
            raise

    async def _open(self, address: Address) -> _Served:
        from bot.web import console_server  # the console: only when asked for

        stack = contextlib.AsyncExitStack()
        try:
            await stack.enter_async_context(console_server(self.daemon, *address))
        except BaseException:
            await stack.aclose()
            raise
        return _Served(address, stack)

    async def aclose(self) -> None:
        served, self.served = self.served, None
        if served is not None:
            await served.stack.aclose()
