"""Reloading the config while the daemon runs: SIGHUP, or `systemctl reload relaybot`.

The file is read and checked exactly as `relaybot check-config` checks it (bot/_checks.py); a
file with a mistake is refused with the same words, logged, and the running config stays. A good
one is put in force in one step: the engine's settings are one object (engine.chat.Live) that
every part reads where a message, a press or a turn starts, and the reload replaces it whole
together with the App's config and the model and tools (bot/_generation.py: built anew from the
file, those replaced closed once the turns running with them end), so a turn already running
finishes with what it started with, and nothing queued is dropped or run twice. `[web] listen`
moves the console (bot/_web.py) before that step, so an address in use refuses the reload. Every
key is put in force but those of bot/_in_force.py's table, which the one log line names, and
bot/_loaded.py records for `relaybot status`.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from bot._checks import tool_problems, validate
from bot._generation import put_in_force
from bot._in_force import waiting
from bot._loaded import record_loaded
from bot._logging import setup_logging
from bot._secrets import seal_secrets
from bot.config import Config, load_config
from tools.errors import ConfigError, StoreError

if TYPE_CHECKING:
    from bot.app import App

log = logging.getLogger("relaybot")


def read_checked(path: Path | str | None, *, fresh: bool = False) -> Config:
    """The config file, checked as `check-config` checks it (ConfigError with the same words);
    `fresh` imports the plugin modules again (a reload: their files may have changed)."""
    config = load_config(path)
    seal_secrets(config)
    for warning in validate(config):
        log.warning("%s", warning)
    report = tool_problems(config, fresh=fresh)
    for warning in [*report.problems, *report.unknown]:
        log.warning("%s", warning)
    return config


class Reloader:
    """Reloads `app`'s config from `path` when asked; one reload at a time."""

    def __init__(self, app: App, path: Path | str | None, *, command: str = "run") -> None:
        self.app = app
        self.path = path
        self.command = command
        self.waiting: list[str] = []  # keys changed since start-up that wait for a restart
        self._started = app.config  # what a restart would change them from
        self._lock = asyncio.Lock()

    async def reload(self) -> bool:
        async with self._lock:
            try:
                config = await asyncio.to_thread(read_checked, self.path, fresh=True)
            except ConfigError as exc:
                log.error("config error: %s; the running config stays", exc)
                return False
            except Exception:  # a fault of relaybot's own: the daemon goes on all the same
                log.exception("the config could not be reloaded; the running config stays")
                return False
            return await self.apply(config)

    async def apply(self, config: Config) -> bool:
        """Put `config` in force: the console moved where `[web]` says, the model and tools
        built, then one swap of the engine's settings and tooling and the App's config (no await
        in between); the console it replaces stops."""
        app = self.app
        old = app.config
        try:
            console = await app.console.move(config.web)
        except ConfigError as exc:  # [web] listen on an address in use, say
            log.error("config error: %s; the running config stays", exc)
            return False
        try:
            await put_in_force(app, config)
        except BaseException as exc:
            await console.drop()
            if not isinstance(exc, ConfigError):  # a fallback's key missing, say
                raise
            log.error("config error: %s; the running config stays", exc)
            return False
        await console.keep()
        secrets = [*old.secrets(), *config.secrets()]  # a turn may still run with the old ones
        if config.log.level != old.log.level or set(config.secrets()) - set(old.secrets()):
            level = config.log.level if config.log.level != old.log.level else _level_now()
            setup_logging(level, secrets=secrets)
        log.info("config reloaded from %s", config._path or self.path)
        if set(old.access.admins) - set(config.access.admins):
            await self._sign_out_removed(config)
        self.waiting = waiting(self._started, config)
        if self.waiting:
            log.warning("not changed until a restart: %s", ", ".join(self.waiting))
        self.record()
        return True

    async def _sign_out_removed(self, config: Config) -> None:
        """Owners removed from `[access] admins`: their console sessions end, on every
        instance (each also refuses them at their next request: bot/web/_server.py)."""
        try:
            ended = await self.app.store.console.end_others(config.access.admins)
        except StoreError as exc:
            log.error("console: the sessions of removed owners could not be ended now: %s", exc)
            return
        if ended:
            log.info("console: %d sessions of owners no longer in [access] admins ended", ended)

    def record(self) -> None:
        """Say when the config was loaded (for `relaybot status`)."""
        store = self._started  # the store in use is the one of start-up
        if store.storage.resolved_url() is not None:
            return
        live = self.app.dispatcher.live
        record_loaded(store, self.command, live.loaded_at, self.waiting)


def _level_now() -> str:
    """The log level in force (`--log-level` may have set it over the file's)."""
    return logging.getLevelName(logging.getLogger().level)
