"""The Bot API's own description of its methods, used by the fake Telegram server to refuse any
request the real API would refuse, and any request that names something the API does not have.

`spec/telegram-bot-api-10.1.json` is the machine-readable Bot API 10.1 (every method and type with
its fields, their types and whether they are required; see `spec/telegram-bot-api-10.1.LICENSE`).
:func:`check` walks a request's parameters against it:

- an unknown method: 404 "Not Found", as Telegram answers;
- a parameter the method does not have, or a field an object type does not have: 400. Telegram
  itself ignores unknown names, so a misspelled parameter would silently do nothing there; here it
  fails the test that sent it;
- a required parameter or field missing, or a value of the wrong type (``Integer``, ``String``,
  ``Boolean``, ``Float``, ``Array of …``, ``InputFile``, an object type — one of its subtypes for
  an abstract one such as ``ReactionType``): 400;
- callback data over 64 bytes, a button without text. (Text and captions are measured after
  their entities are parsed, by the fake's handlers.)

Bot API 10.2 and 10.3 (block-based rich messages, compact tables, expandable quotations) are newer
than the vendored file: `spec/telegram-bot-api-10.3-rich.json` is an overlay of the types relaybot
uses from them, written from Telegram's changelog in the same format (a type there replaces the
10.1 one of its name; `fields_added` extends one). A field ``type`` that the spec describes as
'always "x"' must be "x", so an object matches the one subtype it names. What the spec's tables
cannot say about rich messages (exactly one of html/markdown/blocks, Telegram's limits) is checked
by `telegram_rich`.

Methods, parameters and types newer than the file (Bot API 10.2, 10.3) come from overlays beside
it, ``spec/*.overlay.json``, each naming its source: ``methods`` and ``types`` add whole entries,
``method_fields`` and ``type_fields`` add fields to existing ones (or replace one of the same name,
as when a required field became optional).

A form-encoded request (files) carries every value as text, which the fake reads as JSON where it
can: the text of a number or a boolean is taken where the type asks for one, and a number where it
asks for a string, as Telegram does.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

SPEC = Path(__file__).with_name("spec") / "telegram-bot-api-10.1.json"
OVERLAY = SPEC.with_name("telegram-bot-api-10.3-rich.json")
_ALWAYS = re.compile(r'always ["“](\w+)["”]')
_CALLBACK_DATA_MAX = 64  # bytes


class SpecError(Exception):
    """A request the Bot API refuses: `status` and Telegram's description."""

    def __init__(self, status: int, description: str) -> None:
        super().__init__(description)
        self.status = status
        self.description = description


@functools.cache
def _spec() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SPEC.read_text())
    overlay = json.loads(OVERLAY.read_text())
    data["types"] |= overlay["types"]
    for name, fields in overlay["fields_added"].items():
        data["types"][name]["fields"] += fields
    for overlay in sorted(SPEC.parent.glob("*.overlay.json")):
        _apply(data, json.loads(overlay.read_text()))
    data["by_lower"] = {name.lower(): name for name in data["methods"]}
    return data


def _apply(data: dict[str, Any], overlay: dict[str, Any]) -> None:
    """Add an overlay's methods, types and fields to the spec `data`."""
    for section in ("methods", "types"):
        data[section].update(overlay.get(section, {}))
    for section, key in (("methods", "method_fields"), ("types", "type_fields")):
        for name, added in overlay.get(key, {}).items():
            entry = data[section][name]
            names = {f["name"] for f in added}
            entry["fields"] = [f for f in entry.get("fields", []) if f["name"] not in names] + added


def known(method: str) -> str | None:
    """The method's name as the spec spells it (method names are case-insensitive), or None."""
    return _spec()["by_lower"].get(method.lower())


def check(method: str, params: dict[str, Any]) -> None:
    """Raise :class:`SpecError` when the Bot API would refuse `method` with `params`."""
    name = known(method)
    if name is None:
        raise SpecError(404, "Not Found")
    fields = {f["name"]: f for f in _spec()["methods"][name].get("fields", [])}
    for key in params:
        if key not in fields:
            raise SpecError(400, f"Bad Request: {name} has no parameter {key!r}")
    for field in fields.values():
        value = params.get(field["name"])
        if field["name"] == "reply_markup" and value == {}:
            continue  # no buttons (PTB's InlineKeyboardMarkup([])): Telegram takes it
        if value is None:
            if field["required"]:
                raise SpecError(400, f"Bad Request: parameter {field['name']!r} is required")
            continue
        _value(value, field["types"], field["name"])


def _value(value: Any, types: list[str], where: str) -> None:
    """`value` is of one of `types`, else a SpecError naming the first type's complaint."""
    complaints = []
    for kind in types:
        try:
            _one(value, kind, where)
            return
        except SpecError as exc:
            complaints.append(exc)
    named = [c for c in complaints if ".type must be" not in c.description]  # the subtype it named
    raise (named or complaints)[0]


def _one(value: Any, kind: str, where: str) -> None:
    if kind.startswith("Array of "):
        if not isinstance(value, list):
            raise SpecError(400, f"Bad Request: {where} must be an array")
        for i, item in enumerate(value):
            _value(item, [kind.removeprefix("Array of ")], f"{where}[{i}]")
        return
    simple = _SIMPLE.get(kind)
    if simple is not None:
        if not simple(value):
            raise SpecError(400, f"Bad Request: {where} must be of type {kind}")
        return
    if kind == "InputFile":  # a multipart file part, or a reference to one
        if not isinstance(value, str | int | float | dict | list) or str(value).startswith(
            "attach://"
        ):
            return
        raise SpecError(400, f"Bad Request: {where} must be a file")
    _object(value, kind, where)


def _object(value: Any, kind: str, where: str) -> None:
    spec = _spec()["types"].get(kind)
    if spec is None:
        raise SpecError(400, f"Bad Request: {where}: unknown type {kind}")
    if "subtypes" in spec:
        _value(value, spec["subtypes"], where)
        return
    if not isinstance(value, dict):
        raise SpecError(400, f"Bad Request: {where} must be a JSON object ({kind})")
    fields = {f["name"]: f for f in spec.get("fields", [])}
    always = _ALWAYS.search(fields["type"]["description"]) if "type" in fields else None
    if always is not None and value.get("type") != always[1]:
        raise SpecError(400, f"Bad Request: {where}: {kind}.type must be {always[1]!r}")
    for key in value:
        if key not in fields:
            raise SpecError(400, f"Bad Request: {kind} has no field {key!r} (in {where})")
    for field in fields.values():
        item = value.get(field["name"])
        if item is None:
            if field["required"]:
                raise SpecError(400, f"Bad Request: {where}: {kind}.{field['name']} is required")
            continue
        _value(item, field["types"], f"{where}.{field['name']}")
    if kind == "InlineKeyboardButton":
        if not value["text"]:
            raise SpecError(400, "Bad Request: text buttons are unallowed in the inline keyboard")
        data = value.get("callback_data")
        if isinstance(data, str) and not 1 <= len(data.encode()) <= _CALLBACK_DATA_MAX:
            raise SpecError(400, "Bad Request: BUTTON_DATA_INVALID")


def _is_int(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, str) and value.lstrip("-").isdigit()


def _is_float(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


_SIMPLE = {
    "Integer": _is_int,
    "Float": _is_float,
    "String": lambda v: isinstance(v, str | int | float) and not isinstance(v, bool),
    "Boolean": lambda v: isinstance(v, bool) or v in ("true", "false", "True", "False"),
}
