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
    "instance": "this instance's name and lease in the cluster",
    "metrics.listen": "the /metrics server",
    "telegram": "the Telegram connection (all but allowed_users)",
    "discord": "the Discord connection (all but allowed_users)",
    "media.transcription_model": "the media models are made at start",
    "media.speech_model": "the media models are made at start",
    "media.speech_voice": "the media models are made at start",
    "media.image_model": "the media models are made at start",
    "media.image_size": "the media models are made at start",
}
# keys of a section in RESTART that a reload applies all the same
LIVE_IN: dict[str, set[str]] = {"telegram": {"allowed_users"}, "discord": {"allowed_users"}}
# what the media models send their requests with: the [llm] endpoint of start-up
_MEDIA_ENDPOINT = ("base_url", "api_key", "api_key_env", "request_timeout_s", "max_retries")
_MEDIA_MODELS = ("transcription_model", "speech_model", "image_model")


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
    changed = [key for key in restart_keys() if value(old, key) != value(new, key)]
    if any(getattr(new.media, m) for m in _MEDIA_MODELS):
        for key in _MEDIA_ENDPOINT:
            if getattr(old.llm, key) != getattr(new.llm, key):
                changed.append(f"llm.{key} (for [media]'s models)")
    return changed


def readme_list() -> str:
    """The table above as README.md words it (between its `restart-keys` markers)."""
    lines = []
    for key, why in RESTART.items():
        but = LIVE_IN.get(key)
        shown = f"`[{key}]`" if "." not in key else f"`{key}`"
        if but:
            shown += " (but " + ", ".join(f"`{k}`" for k in sorted(but)) + ")"
        lines.append(f"- {shown}: {why}")
    lines.append(
        "- `[llm]` " + ", ".join(f"`{k}`" for k in _MEDIA_ENDPOINT) + ", for the media models "
        "only (the chat's model takes them at a reload)"
    )
    return "\n".join(lines)
