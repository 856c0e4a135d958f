"""The SQLite backend: its :class:`~engine.store._db.Db` (one file, one connection, writes
batched into the transaction's next trip), its schema's migrations, and `relaybot backup`."""

from engine.store.sqlite._backup import BackupMade, backup_sqlite
from engine.store.sqlite._db import WAL_LIMIT_BYTES, SqliteDb
from engine.store.sqlite._schema import MIGRATIONS
from engine.store.sqlite._store import SqliteStore

__all__ = [
    "MIGRATIONS",
    "WAL_LIMIT_BYTES",
    "BackupMade",
    "SqliteDb",
    "SqliteStore",
    "backup_sqlite",
]
