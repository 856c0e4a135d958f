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


def open_store(url: str | None, path: str | Path) -> Store:
    """The store (not yet open: ``async with`` it) at `url` if given, else the file `path`."""
    if url:
        from engine._store._pg import PgStore

        return PgStore(url)
    from engine._store._sqlite import SqliteStore

    return SqliteStore(path)
