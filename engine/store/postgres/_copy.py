"""A SQLite store copied into an empty PostgreSQL one (`relaybot migrate-store`).

Both are opened first, which brings each to the current schema, so they have the same tables
and columns (tests/test_store_migrations.py holds the two dialects to that). Each table is then
copied whole, in one transaction, with COPY: every value converted to its PostgreSQL column's
type (SQLite's 0/1 flags become booleans), ids kept, so every reference between rows still
holds; each identity column then continues after the largest id copied. The rows that say which
instance holds what (``instances``, ``chat_leases``, ``receivers``) are not copied: a SQLite
store has none that mean anything to another process, and a job's ``instance`` is left empty,
so the first instance to start takes over what was running (it is recovered as after a
restart).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.store.postgres._store import PgStore
from engine.store.sqlite import SqliteStore

# Referenced tables before the ones that reference them; tables of later migrations follow.
_ORDER = (
    "conversations",
    "messages",
    "deliveries",
    "inbox",
    "confirmations",
    "jobs",
    "memory",
    "grants",
    "usage",
    "schedules",
    "schedule_runs",
    "user_settings",
    "chat_settings",
    "summaries",
    "token_ratios",
)
_NOT_COPIED = {"instances", "chat_leases", "receivers", "schema_version", "schema_compat"}
_CLEARED = {("jobs", "instance")}


@dataclass(frozen=True, slots=True)
class Copied:
    table: str
    rows: int


async def target_rows(target: PgStore) -> int:
    """How many rows the target's tables hold (0: it may be written to)."""
    total = 0
    for table in await _pg_tables(target):
        total += int(await target.db.fetchval(f'SELECT count(*) FROM "{table}"'))
    return total


async def copy_store(source: SqliteStore, target: PgStore) -> list[Copied]:
    """Copy every table of `source` into `target` (which must be empty), in one transaction."""
    tables = await _pg_tables(target)
    ordered = [t for t in _ORDER if t in tables] + sorted(
        t for t in tables if t not in _ORDER and t not in _NOT_COPIED
    )
    copied: list[Copied] = []
    pool = target.db.pool
    async with pool.acquire() as conn, conn.transaction():
        for table in ordered:
            types = {
                r["column_name"]: r["data_type"]
                for r in await conn.fetch(
                    "SELECT column_name, data_type FROM information_schema.columns "
                    "WHERE table_schema = current_schema() AND table_name = $1",
                    table,
                )
            }
            rows = await source.db.fetch(f'SELECT * FROM "{table}"')
            if rows:
                columns = [c for c in rows[0].keys() if c in types]
                records = [
                    tuple(
                        None if (table, c) in _CLEARED else _convert(row[c], types[c])
                        for c in columns
                    )
                    for row in rows
                ]
                await conn.copy_records_to_table(table, records=records, columns=columns)
            copied.append(Copied(table, len(rows)))
        identities = await conn.fetch(
            "SELECT table_name FROM information_schema.columns WHERE table_schema = "
            "current_schema() AND column_name = 'id' AND is_identity = 'YES'"
        )
        for table in sorted(r["table_name"] for r in identities):
            await conn.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                f'COALESCE((SELECT max(id) FROM "{table}"), 0) + 1, false)'
            )
    return copied


async def _pg_tables(target: PgStore) -> set[str]:
    rows = await target.db.fetch(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
        "AND table_type = 'BASE TABLE'"
    )
    return {r["table_name"] for r in rows} - _NOT_COPIED


def _convert(value: Any, data_type: str) -> Any:
    if value is None:
        return None
    if data_type == "boolean":
        return bool(value)
    if data_type in ("bigint", "integer", "smallint"):
        return int(value)
    if data_type in ("double precision", "real", "numeric"):
        return float(value)
    return value if isinstance(value, str) else str(value)
