"""`relaybot migrate-store --from PATH.db --to postgresql://…`: move to several instances.

The SQLite store must not be in use (stop the daemon first: its lock says who holds it), and
the PostgreSQL database must be empty, so nothing is ever merged into or written over: a target
with any row is refused before anything is written. The copy itself is one transaction
(engine/store/_pg_copy.py), so a failure leaves the target empty again.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from bot._lock import holder
from engine.store import is_postgres, redact
from tools.errors import StoreError

log = logging.getLogger("relaybot")


def migrate_store(source: Path, target: str) -> int:
    if not is_postgres(target):
        raise StoreError(f"--to must be a postgresql:// URL, not {redact(target)!r}")
    if not source.is_file():
        raise StoreError(f"--from: there is no SQLite store at {source}")
    pid = holder(source)
    if pid is not None:
        raise StoreError(
            f"relaybot (pid {pid}) is using {source}: stop it first (systemctl stop relaybot)"
        )
    return asyncio.run(_copy(source, target))


async def _copy(source: Path, target: str) -> int:
    from engine.store.postgres import PgStore, copy_store, target_rows
    from engine.store.sqlite import SqliteStore

    async with PgStore(target) as pg:
        rows = await target_rows(pg)
        if rows:
            raise StoreError(
                f"the database at {redact(target)} is not empty ({rows} rows): migrate-store "
                "only writes into an empty database, so nothing is merged or overwritten. "
                "Create a new database (createdb -O relaybot relaybot) and try again."
            )
        async with SqliteStore(source) as lite:
            copied = await copy_store(lite, pg)
    for c in copied:
        print(f"  {c.table}: {c.rows} rows")
    total = sum(c.rows for c in copied)
    print(f"copied {total} rows from {source} to {redact(target)}")
    print("Set [storage] url (or url_env) in each instance's config, then start them.")
    return 0
