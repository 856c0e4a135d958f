"""Which backend a configuration asks for: a ``postgresql://`` URL, else the SQLite file.

asyncpg is imported only when a URL asks for PostgreSQL, so a SQLite deployment starts no
faster or slower than before.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.store._api import Store


def open_store(url: str | None, path: str | Path, *, wal_limit_bytes: int | None = None) -> Store:
    """The store (not yet open: ``async with`` it) at `url` if given, else the file `path`
    (its write-ahead log checkpointed to stay under `wal_limit_bytes`, if given)."""
    if url:
        from engine.store.postgres import PgStore

        return PgStore(url)
    from engine.store.sqlite import SqliteStore

    if wal_limit_bytes is None:
        return SqliteStore(path)
    return SqliteStore(path, wal_limit_bytes=wal_limit_bytes)
