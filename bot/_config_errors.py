"""Explaining a config file's mistakes in its own terms: the key, the reason, and the form a
right value takes (`e.g. allowed_users = ["123456789"]`); the key probably meant for an unknown
one; a boolean given as a word (`stream = "yes"`: TOML has true and false, and a quoted word is
more likely a mistake than a wish).

It works on any pydantic model tree; bot/config.py gives it :class:`bot.config.Config`.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from bot._shipped import SHOW_EXAMPLE

# Examples for keys whose default does not show the form a value takes.
_EXAMPLES: dict[str, Any] = {
    "allowed_users": ["123456789"],
    "allowed_guilds": ["112233445566778899"],
    "command_guilds": ["112233445566778899"],
    "builtins": ["current_time", "fetch_url"],
    "confirm": ["fetch_url"],
    "dm_only": ["recall"],
    "plugins": ["my_tools"],
    "fetch_allow_hosts": ["intranet.example.com"],
    "args": ["--port", "8080"],
    "trusted_tools": ["lookup"],
    "path": "/var/lib/relaybot/relaybot.db",
    "workspace": "/srv/relaybot/workspace",
    "api_key_env": "OPENAI_API_KEY",
    "token_env": "TELEGRAM_BOT_TOKEN",
    "options": {"top_p": 0.9},
    "env": {"LANG": "C.UTF-8"},
    "headers": {"Authorization": "Bearer ..."},
    "temperature": 0.7,
    "max_tokens": 1024,
    "context_window": 8192,
    "max_output_tokens": 1024,
    "budget": 6000,
}
_KINDS = {
    "list_type": "a list",
    "string_type": "text in quotes",
    "int_parsing": "a whole number",
    "int_type": "a whole number",
    "int_from_float": "a whole number",
    "float_parsing": "a number",
    "float_type": "a number",
    "dict_type": "a table",
    "path_type": "a path in quotes",
}


def explain(err: Any, root: type[BaseModel]) -> str:
    """pydantic's error `err` in words, with the form the value should take; `root` is the
    model the whole file is validated against."""
    loc = tuple(p for p in err["loc"] if isinstance(p, str))
    reason = str(err["msg"]).removeprefix("Value error, ").replace("Input should be", "must be")
    if err["type"] == "extra_forbidden":
        known = list(_fields_at(root, loc[:-1]))
        import difflib  # only for a mistake

        close = difflib.get_close_matches(loc[-1], known, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return f"unknown key ({hint}`{SHOW_EXAMPLE}` prints every key there is)"
    if err["type"] == "model_type":
        return f"must be a table: a [{'.'.join(loc)}] section with keys under it"
    example = _example(root, loc)
    if err["type"] in _KINDS:
        reason = f"must be {_KINDS[err['type']]}"
    elif err["type"] != "literal_error":
        return reason
    return f"{reason}, e.g. {loc[-1]} = {example}" if example else reason


def _fields_at(root: type[BaseModel], loc: tuple[str, ...]) -> dict[str, Any]:
    """The fields of the section at `loc` ({} when it is not a section)."""
    model: Any = root
    for part in loc:
        field = model.model_fields.get(part) if _is_model(model) else None
        model = model_in(field.annotation) if field is not None else None
    return dict(model.model_fields) if _is_model(model) else {}


def _example(root: type[BaseModel], loc: tuple[str, ...]) -> str | None:
    field = _fields_at(root, loc[:-1]).get(loc[-1])
    if field is None:
        return None
    value = _EXAMPLES.get(loc[-1], field.get_default(call_default_factory=True))
    literal = [a for a in typing.get_args(field.annotation) if isinstance(a, str)]
    if literal:
        value = literal[0]
    return None if value is None else _toml(value)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, str | Path):
        return json.dumps(str(value), ensure_ascii=False)
    return str(value)


def _is_model(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, BaseModel)


def model_in(annotation: Any) -> Any:
    """The section model inside an annotation (`X`, `X | None`, `list[X]`), or None."""
    if _is_model(annotation):
        return annotation
    for arg in typing.get_args(annotation):
        found = model_in(arg)
        if found is not None:
            return found
    return None


def loose_booleans(model: Any, data: Any, loc: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The key of each boolean setting given as something else (e.g. "yes")."""
    if not isinstance(data, dict):
        return
    for key, value in data.items():
        field = model.model_fields.get(key)
        if field is None:
            continue
        if field.annotation is bool and not isinstance(value, bool):
            yield (*loc, key)
        sub = model_in(field.annotation)
        if sub is None:
            continue
        items = enumerate(value) if isinstance(value, list) else [(None, value)]
        for i, item in items:
            yield from loose_booleans(sub, item, (*loc, key) if i is None else (*loc, key, str(i)))
