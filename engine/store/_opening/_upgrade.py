"""What an upgrade of the store does, in words: `relaybot migrate --check` and the messages of
a failed upgrade, for both backends.

A schema version is the number of migrations applied (each backend's ``MIGRATIONS`` list): an
upgrade from version 10 to 12 applies migrations 11 and 12, each described here by the first
line of each of its statements (``ALTER TABLE receivers ADD COLUMN resume TEXT``), which is
exact and never out of date.

A store of a newer schema than a relaybot knows is one it runs on as it is when the store says
so (:func:`runs_as_it_is`: migration 23's ``schema_compat.readable_from``, the oldest schema
whose relaybot runs on it): the one reading the daemon's open on either backend, `relaybot
migrate --check` and so `relaybot rollback` make.
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


def runs_as_it_is(version: int, known: int, readable_from: int | None) -> bool:
    """Whether a relaybot of schema `known` runs, unchanged, on a store of the newer schema
    `version` whose marker says relaybots of schema `readable_from` and later do (None: no
    marker, older than migration 23: none does)."""
    return version > known and readable_from is not None and readable_from <= known


def plan(
    where: str,
    version: int,
    migrations: Sequence[str],
    backup: str | None,
    readable_from: int | None = None,
) -> str:
    """What an upgrade of the store at `where` (schema `version`; `readable_from`: its marker)
    would do, for a person."""
    newest = len(migrations)
    if runs_as_it_is(version, newest, readable_from):
        return (
            f"The store at {where} has schema version {version}, newer than this relaybot's "
            f"({newest}), and what came since only adds (relaybots of schema {readable_from} and "
            "later run on it): this relaybot runs on it as it is; nothing to upgrade."
        )
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
