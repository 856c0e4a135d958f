"""What the parts the daemon starts read of it: :class:`Daemon`, a protocol that
:class:`bot.app.App` meets. The web console (bot/web, bot/_web.py) is given the daemon as one, so
it depends on this and not on the App that starts it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from bot._mcp_oauth import SignIns
    from bot.config import Config
    from engine import Channel
    from engine.chat import Dispatcher
    from engine.store import Store
    from tools.registry import ToolRegistry


class Daemon(Protocol):
    @property
    def config(self) -> Config:
        """The config in force (a reload swaps it)."""
        ...

    @property
    def channels(self) -> Sequence[Channel]: ...

    @property
    def store(self) -> Store: ...

    @property
    def dispatcher(self) -> Dispatcher: ...

    @property
    def registry(self) -> ToolRegistry:
        """The tools in force (a reload replaces them)."""
        ...

    @property
    def signins(self) -> SignIns:
        """The MCP OAuth sign-ins waiting for their callback (bot/_mcp_oauth.py)."""
        ...
