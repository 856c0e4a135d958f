"""What an upgrade of the store does, in words: `relaybot migrate --check` and the messages of
a failed upgrade, for both backends.

A schema version is the number of migrations applied (each backend's ``MIGRATIONS`` list): an
upgrade from version 10 to 12 applies migrations 11 and 12, each described here by the first
line of each of its statements (``ALTER TABLE receivers ADD COLUMN resume TEXT``), which is
exact and never out of date.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Step:
    number: int  # the schema version it leads to
    does: tuple[str, ...]  # one line per statement


def statements(script: str) -> list[str]:
    """The statements of a migration script (split on ``;``: migrations hold no other ``;``)."""
    return [s.strip() for s in script.split(";") if s.strip()]


def steps(version: int, migrations: Sequence[str]) -> list[Step]:
    """The migrations an upgrade from schema `version` applies."""
    return [
        Step(number, tuple(_first_line(s) for s in statements(script)))
        for number, script in enumerate(migrations[version:], start=version + 1)
    ]


def plan(where: str, version: int, migrations: Sequence[str], backup: str | None) -> str:
    """What an upgrade of the store at `where` (schema `version`) would do, for a person."""
    newest = len(migrations)
    if version > newest:
        return (
            f"The store at {where} has schema version {version}, newer than this relaybot knows "
            f"({newest}): it was written by a newer relaybot. This one refuses to start on it "
            "and leaves it untouched: upgrade relaybot, or restore a copy made by this version."
        )
    if version == newest:
        return f"The store at {where} is at schema version {version}: nothing to upgrade."
    lines = [
        f"The store at {where} is at schema version {version or '0 (new)'}; this relaybot's is "
        f"{newest}. Upgrading applies {newest - version} migration(s), in one "
        "transaction (a failure leaves the store as it was):"
    ]
    for step in steps(version, migrations):
        lines.append(f"  {step.number}:")
        lines += [f"      {line}" for line in step.does]
    if backup is not None and version > 0:
        lines.append(f"Before that, a copy of the store is made at {backup}.")
    return "\n".join(lines)


def _first_line(statement: str) -> str:
    line = re.sub(r"\s+", " ", statement.strip().splitlines()[0]).strip()
    return line if len(line) <= 96 else line[:95] + "…"
