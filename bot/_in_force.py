"""Which keys of the config a reload puts in force, and which wait for a restart: one table.

Every key of the schema (bot/config.py and the sections it is made of) is read through the
settings in force (engine.chat.Live, the App's config, the generation of model and tools a
reload builds: bot/_generation.py), so a reload applies it to the next turn, except the keys in
:data:`RESTART`, each with what holds it from start-up. :func:`waiting` names those a new file
changes, for the reload's one log line and `relaybot status`; :func:`readme_list` words the table
for README.md (tests/test_reload_keys.py checks that README says the same, and that every key of
the schema is reloaded or named).
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel

from bot.config import Config

# key (or a whole section: "instance") -> what holds it from start-up
RESTART: dict[str, str] = {
    "storage.path": "the store is opened at start",
    "storage.url": "the store is opened at start",
    "storage.url_env": "the store is opened at start",
    "storage.wal_limit_mb": "the store is opened at start",
    "instance": "this instance joins the cluster under its name and lease at start",
    "metrics.listen": "the /metrics server is started with the daemon",
    "telegram": "the connection to each platform is made at start",
    "discord": "the connection to each platform is made at start",
    "media.transcription_model": "the media models are made at start",
    "media.speech_model": "the media models are made at start",
    "media.speech_voice": "the media models are made at start",
    "media.image_model": "the media models are made at start",
    "media.image_size": "the media models are made at start",
}
_SECRET_PAIRS = (("token", "token_env"), ("api_key", "api_key_env"))  # bot/_secrets.py
# keys of a section in RESTART that a reload applies all the same
LIVE_IN: dict[str, set[str]] = {"telegram": {"allowed_users"}, "discord": {"allowed_users"}}


def schema_keys(model: type[BaseModel] = Config, prefix: str = "") -> list[str]:
    """Every key of the schema, dotted ("llm.model"); a table of tables that the file names
    itself ([pricing."MODEL"], [[mcp.servers]], [[llm.fallback]]) is one key."""
    keys = []
    for name, field in model.model_fields.items():
        section = _section(field.annotation)
        if section is not None:
            keys += schema_keys(section, f"{prefix}{name}.")
        else:
            keys.append(prefix + name)
    return keys


def _section(annotation: Any) -> type[BaseModel] | None:
    args = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else ()
    for candidate in (annotation, *args):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def needs_restart(key: str) -> bool:
    """Whether only a restart puts `key` in force."""
    section, _, rest = key.partition(".")
    if rest in LIVE_IN.get(section, ()):
        return False
    return key in RESTART or section in RESTART


def restart_keys() -> list[str]:
    """The keys of the schema that wait for a restart, in the schema's order."""
    return [key for key in schema_keys() if needs_restart(key)]


def value(config: Config, key: str) -> Any:
    found: Any = config
    for part in key.split("."):
        found = getattr(found, part)
    return found


def waiting(old: Config, new: Config) -> list[str]:
    """The keys that `new` changes from `old` (the config of start-up) and only a restart puts
    in force."""
    waits = restart_keys()
    changed = {key for key in waits if value(old, key) != value(new, key)}
    for key in list(changed):  # a secret named by variable is read into the config (sealed):
        section, _, name = key.rpartition(".")  # either key of the pair may be the one changed
        for pair in _SECRET_PAIRS:
            if name in pair:
                changed.update(f"{section}.{k}" for k in pair if f"{section}.{k}" in waits)
    return [key for key in waits if key in changed]


def readme_list() -> str:
    """The table above as README.md words it (between its `restart-keys` markers)."""
    by_reason: dict[str, list[str]] = {}
    for key, why in RESTART.items():
        shown = f"`[{key}]`" if "." not in key else f"`{key}`"
        if but := LIVE_IN.get(key):
            shown += " (all but " + ", ".join(f"`{k}`" for k in sorted(but)) + ")"
        by_reason.setdefault(why, []).append(shown)
    return "\n".join(f"- {', '.join(keys)}: {why}" for why, keys in by_reason.items())
