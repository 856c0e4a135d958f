"""The SQLite backend: its :class:`~engine.store._db.Db` (one file, one connection, writes
batched into the transaction's next trip), its schema's migrations (with the copy made before an
upgrade), and `relaybot backup`."""

from engine.store.sqlite._backup import BackupMade, backup_sqlite
from engine.store.sqlite._db import WAL_LIMIT_BYTES, SqliteDb
from engine.store.sqlite._schema import MIGRATIONS
from engine.store.sqlite._store import SqliteStore
from engine.store.sqlite._upgrade import (
    backup_path,
    stored_readable_from,
    stored_version,
    upgrade_backups,
)

__all__ = [
    "MIGRATIONS",
    "WAL_LIMIT_BYTES",
    "BackupMade",
    "SqliteDb",
    "SqliteStore",
    "backup_path",
    "backup_sqlite",
    "stored_readable_from",
    "stored_version",
    "upgrade_backups",
]
