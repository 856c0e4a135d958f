"""`relaybot migrate [--check]`: say what upgrading the store would do, or do it now.

The daemon upgrades its store by itself when it starts (a SQLite store is first copied next to
itself; the migrations run in one transaction). This command lets an operator see it coming
(`--check`: which migrations, from which version to which; nothing is changed) or do it while
the daemon is stopped, then start it. A store written by a newer relaybot is refused, untouched,
with exit status 1, unless what that one added only adds (its schema_compat marker: the same
reading as the daemon's, engine.store.runs_as_it_is): then this relaybot runs on it as it is,
status 0. `relaybot rollback` asks the previous generation's `migrate --check` before it goes
back, so it goes back only to a relaybot that runs on the store.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot._lock import StoreLock
from bot.config import Config
from engine.store import redact, runs_as_it_is, upgrade_plan


async def migrate(config: Config, check: bool, store: Path | None = None) -> int:
    """`store`: a SQLite file to upgrade instead of the config's (a copy, to try)."""
    url = config.storage.resolved_url() if store is None else None
    if url:
        return await _postgres(url, check)
    return await _sqlite(store or config.storage.resolved_path(), check)


async def _sqlite(path: Path, check: bool) -> int:
    from engine.store.sqlite import (
        MIGRATIONS,
        SqliteStore,
        backup_path,
        stored_readable_from,
        stored_version,
    )

    version = await asyncio.to_thread(stored_version, path)
    readable = await asyncio.to_thread(stored_readable_from, path)
    copy = str(backup_path(path, version))
    print(upgrade_plan(str(path), version, MIGRATIONS, copy, readable))
    if version > len(MIGRATIONS):
        return 0 if runs_as_it_is(version, len(MIGRATIONS), readable) else 1
    if check or version == len(MIGRATIONS):
        return 0
    lock = StoreLock(path)  # not while the daemon runs on it
    try:
        async with SqliteStore(path) as store:
            done = await store.schema_version()
    finally:
        lock.release()
    print(f"Upgraded to schema version {done}." + (f" The copy is at {copy}." if version else ""))
    return 0


async def _postgres(url: str, check: bool) -> int:
    from engine.store.postgres import MIGRATIONS, PgDb, PgStore

    db = PgDb(url, readonly=True, check=False, max_connections=1)
    await db.open()
    try:
        version = await db.stored_version()
        readable = await db.readable_from()
    finally:
        await db.close()
    print(upgrade_plan(redact(url), version, MIGRATIONS, None, readable))
    if version > len(MIGRATIONS):
        return 0 if runs_as_it_is(version, len(MIGRATIONS), readable) else 1
    if check or version == len(MIGRATIONS):
        return 0
    async with PgStore(url) as store:  # instances starting meanwhile wait for it
        done = await store.schema_version()
    print(f"Upgraded to schema version {done}. Back it up with pg_dump before the next upgrade.")
    return 0
