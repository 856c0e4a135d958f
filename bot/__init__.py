"""relaybot's daemon: config, wiring, lifecycle and the `relaybot` command."""

from typing import Any

from bot.config import Config, load_config, parse_config

__all__ = ["App", "Config", "load_config", "parse_config"]


def __getattr__(name: str) -> Any:  # App pulls in every tool source: import it on first use
    if name == "App":
        from bot.app import App

        return App
    raise AttributeError(name)
