"""When the config was loaded, and what of it waits for a restart: kept next to a SQLite store
(``<store>.config``) with the pid and the command (`run` or `chat`), for `relaybot status`.

Apart from bot/_reload.py, which writes it at each reload, so that `status` reads it without
loading the engine a reload builds.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.config import Config

log = logging.getLogger("relaybot")


def loaded_path(config: Config) -> Path:
    store = config.storage.resolved_path()
    return store.with_name(store.name + ".config")


def record_loaded(
    config: Config, command: str, at: float | None = None, waiting: list[str] | None = None
) -> None:
    """Write when `config` was loaded, by which process, and what of it waits for a restart,
    next to the SQLite store."""
    path = loaded_path(config)
    data = {
        "pid": os.getpid(),
        "command": command,
        "loaded_at": at or time.time(),
        "config": str(config._path or ""),
        "waiting": waiting or [],
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
