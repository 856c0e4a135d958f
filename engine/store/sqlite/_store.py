"""The SQLite backend: one file holds every part of the store, and one process writes it
(bot/_lock.py), so its active conversations and standing permissions are kept in memory.

``async with SqliteStore(path) as store:`` opens (creating or migrating) and closes the file.
"""

from __future__ import annotations

from pathlib import Path

from engine.store._composed import ComposedStore
from engine.store.sqlite._db import WAL_LIMIT_BYTES, SqliteDb


class SqliteStore(ComposedStore):
    """`readonly` opens a store another process may be writing, to read it (`relaybot status`):
    it must be of this relaybot's schema version. `wal_limit_bytes` bounds the WAL."""

    db: SqliteDb

    def __init__(
        self, path: str | Path, *, readonly: bool = False, wal_limit_bytes: int = WAL_LIMIT_BYTES
    ) -> None:
        super().__init__(SqliteDb(path, readonly=readonly, wal_limit_bytes=wal_limit_bytes))
        self.path = self.db.path
