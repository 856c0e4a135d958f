"""relaybot's daemon: config, wiring, lifecycle and the `relaybot` command."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.app import App
    from bot.config import Config, load_config, parse_config

__all__ = ["App", "Config", "load_config", "parse_config"]


def __getattr__(name: str) -> Any:
    """Imported on first use: the `relaybot` command sets up before it loads anything
    (bot/__main__.py), and App pulls in every tool source."""
    if name == "App":
        from bot.app import App

        return App
    if name in ("Config", "load_config", "parse_config"):
        from bot import config

        return getattr(config, name)
    raise AttributeError(name)
