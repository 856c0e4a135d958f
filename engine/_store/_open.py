"""Which backend a configuration asks for: a ``postgresql://`` URL, else the SQLite file.

asyncpg is imported only when a URL asks for PostgreSQL, so a SQLite deployment starts no
faster or slower than before.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine._store._api import Store

SCHEMES = ("postgresql://", "postgres://")


def is_postgres(url: str | None) -> bool:
    return bool(url) and str(url).startswith(SCHEMES)


def redact(url: str) -> str:
    """`url` without its password (``postgresql://bot:***@db/relaybot``)."""
    return re.sub(r"(://[^:/@]+):[^@/]*@", r"\1:***@", url)


def open_store(url: str | None, path: str | Path, *, wal_limit_bytes: int | None = None) -> Store:
    """The store (not yet open: ``async with`` it) at `url` if given, else the file `path`
    (its write-ahead log checkpointed to stay under `wal_limit_bytes`, if given)."""
    if url:
        from engine._store.postgres import PgStore

        return PgStore(url)
    from engine._store.sqlite import SqliteStore

    if wal_limit_bytes is None:
        return SqliteStore(path)
    return SqliteStore(path, wal_limit_bytes=wal_limit_bytes)
