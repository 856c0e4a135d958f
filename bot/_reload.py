"""Reloading the config while the daemon runs: SIGHUP, or `systemctl reload relaybot`.

The file is read and checked exactly as `relaybot check-config` checks it (bot/_checks.py); a
file with a mistake is refused with the same words, logged, and the running config stays. A good
one is put in force in one step: the engine's settings are one object (engine.chat.Live) that
every part reads where a message, a press or a turn starts, and the reload replaces it whole, so
a turn already running finishes with what it started with, and nothing queued is dropped or run
twice. What changes live: who may use the bot (allowed_users, admins, pairing), [limits],
[access] max_message_chars, the system prompt, the tool policy, [media], the log level, and the
model and tools: the model, its fallbacks and the models chats may choose, the built-ins,
plugins (their modules imported again), skills and MCP servers are built anew from the file
(bot/_generation.py), and those replaced are closed once the turns running with them end. What
needs a restart is named in one log line: tokens and the channels' receiving side, the store,
the instance and metrics settings, the transcription model.

When the config was loaded is kept next to a SQLite store (``<store>.config``), for
`relaybot status`, with the pid and the command (`run` or `chat`) that loaded it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot._checks import tool_problems, validate
from bot._generation import put_in_force
from bot._logging import setup_logging
from bot._secrets import seal_secrets
from bot.config import Config, load_config
from tools.errors import ConfigError

if TYPE_CHECKING:
    from bot.app import App

log = logging.getLogger("relaybot")

# What a running daemon cannot change: whole sections, or a section but the keys named.
_RESTART_SECTIONS = ("storage", "instance", "metrics")
_RESTART_BUT = {
    "telegram": {"allowed_users"},
    "discord": {"allowed_users"},
}


def needs_restart(old: Config, new: Config) -> list[str]:
    """The keys whose change `new` makes that only a restart puts in force."""
    changed = []
    for name in _RESTART_SECTIONS:
        if getattr(old, name) != getattr(new, name):
            changed.append(f"[{name}]")
    for name, live in _RESTART_BUT.items():
        before = getattr(old, name).model_dump()
        after = getattr(new, name).model_dump()
        changed += [
            f"{name}.{key}" for key in before if key not in live and before[key] != after.get(key)
        ]
    made_at_start = [  # the media parts (bot/_media.py)
        *(("media", k) for k in ("transcription_model", "speech_model", "speech_voice")),
        *(("media", k) for k in ("image_model", "image_size")),
        ("limits", "images_per_day"),
    ]
    for section, key in made_at_start:
        if getattr(getattr(old, section), key) != getattr(getattr(new, section), key):
            changed.append(f"{section}.{key}")
    if new.media.transcription_model and old.llm.base_url != new.llm.base_url:
        changed.append("media.transcription_model's endpoint (llm.base_url)")
    return changed


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
        self._lock = asyncio.Lock()

    async def reload(self) -> bool:
        async with self._lock:
            try:
                config = await asyncio.to_thread(read_checked, self.path, fresh=True)
            except ConfigError as exc:
                log.error("config error: %s; the running config stays", exc)
                return False
            return await self.apply(config)

    async def apply(self, config: Config) -> bool:
        """Put `config` in force: its model and tools built, then one swap of the engine's
        settings and tooling (no await in between)."""
        app = self.app
        old = app.config
        later = needs_restart(old, config)
        try:
            await put_in_force(app, config)
        except ConfigError as exc:  # a fallback's key missing, say
            log.error("config error: %s; the running config stays", exc)
            return False
        app.config = config
        if config.log.level != old.log.level:
            setup_logging(config.log.level, secrets=config.secrets())
        log.info("config reloaded from %s", config._path or self.path)
        if later:
            log.warning("not changed until a restart: %s", ", ".join(later))
        self.record()
        return True

    def record(self) -> None:
        """Say when the config was loaded (for `relaybot status`)."""
        if self.app.config.storage.resolved_url() is not None:
            return
        record_loaded(self.app.config, self.command, self.app.dispatcher.live.loaded_at)


def loaded_path(config: Config) -> Path:
    store = config.storage.resolved_path()
    return store.with_name(store.name + ".config")


def record_loaded(config: Config, command: str, at: float | None = None) -> None:
    """Write when `config` was loaded, by which process, next to the SQLite store."""
    path = loaded_path(config)
    data = {
        "pid": os.getpid(),
        "command": command,
        "loaded_at": at or time.time(),
        "config": str(config._path or ""),
    }
    try:
        tmp = path.with_name(path.name + ".tmp")
        tmp.unlink(missing_ok=True)
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
            out.write(json.dumps(data) + "\n")  # private, like the store beside it
        tmp.replace(path)
    except OSError as exc:
        log.debug("could not record when the config was loaded: %s", exc)


def read_loaded(config: Config) -> dict[str, Any] | None:
    try:
        data = json.loads(loaded_path(config).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
