"""The SQLite backend: one file holds every part of the store, and one process writes it
(bot/_lock.py), so what its parts read often is kept in memory; what the command line writes
meanwhile is heard of within a second (sqlite/_watch.py).

``async with SqliteStore(path) as store:`` opens (creating or migrating) and closes the file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from engine.store._composed import ComposedStore
from engine.store.sqlite._db import WAL_LIMIT_BYTES, SqliteDb
from engine.store.sqlite._schema import MIGRATIONS
from engine.store.sqlite._watch import Watch


class SqliteStore(ComposedStore):
    """`readonly` opens a store another process may be writing, to read it (`relaybot status`):
    it must be of this relaybot's schema version. `wal_limit_bytes` bounds the WAL; `migrations`
    is the schema (this relaybot's unless a test gives another)."""

    db: SqliteDb

    def __init__(
        self,
        path: str | Path,
        *,
        readonly: bool = False,
        wal_limit_bytes: int = WAL_LIMIT_BYTES,
        migrations: Sequence[str] = MIGRATIONS,
    ) -> None:
        limit = wal_limit_bytes
        super().__init__(
            SqliteDb(path, readonly=readonly, wal_limit_bytes=limit, migrations=migrations)
        )
        self.path = self.db.path
        self._watch = Watch(lambda: self.db.db, self.db.outside_write)

    async def watch(self) -> None:
        """Hear of what other processes write (sqlite/_watch.py), until closed."""
        self._watch.start()

    async def close(self) -> None:
        await self._watch.stop()
        await super().close()
