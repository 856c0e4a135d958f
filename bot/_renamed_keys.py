"""Config keys across releases: a key a release renames or removes is still read under its old
name, with one warning, for one release (then the entry goes, and the old name is an unknown
key like any other). `validate` (bot/_checks.py) returns the warnings, so `check-config` names
each key (and `relaybot upgrade` shows the new generation's before it switches to it) and
`run` logs each once at start.

    RENAMED = {
        "telegram.poll_timeout": "telegram.poll_timeout_s",   # renamed in 0.3.0
        "engine.old_knob": None,                              # removed in 0.3.0: ignored
    }
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

# old dotted key -> new dotted key, or None when the key was removed; with the release that did it
RENAMED: dict[str, str | None] = {}


def _pop(data: dict[str, Any], dotted: str) -> tuple[bool, Any]:
    *sections, key = dotted.split(".")
    for name in sections:
        data = data.get(name)  # type: ignore[assignment]
        if not isinstance(data, dict):
            return False, None
    return (True, data.pop(key)) if key in data else (False, None)


def _has(data: dict[str, Any], dotted: str) -> bool:
    *sections, key = dotted.split(".")
    for name in sections:
        data = data.get(name)  # type: ignore[assignment]
        if not isinstance(data, dict):
            return False
    return key in data


def _put(data: dict[str, Any], dotted: str, value: Any) -> None:
    *sections, key = dotted.split(".")
    for name in sections:
        data = data.setdefault(name, {})
    data[key] = value


def carry_over(
    data: dict[str, Any], table: Mapping[str, str | None] = RENAMED
) -> tuple[dict[str, Any], list[str]]:
    """`data` (a parsed config file) with each old key of `table` moved to its new name (or
    dropped, when removed), and a warning for each one found. `data` itself is not changed."""
    if not any(_has(data, old) for old in table):
        return data, []
    moved, warnings = copy.deepcopy(data), []
    for old, new in table.items():
        found, value = _pop(moved, old)
        if not found:
            continue
        if new is None:
            warnings.append(f"{old} is no longer used and was ignored: remove it from the config")
        elif _has(moved, new):
            warnings.append(f"{old} was renamed {new}, which is set too: {old} was ignored")
        else:
            _put(moved, new, value)
            warnings.append(f"{old} was renamed {new}: read as {new} (rename it in the config)")
    return moved, warnings
