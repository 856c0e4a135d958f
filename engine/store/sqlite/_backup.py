"""A consistent copy of a SQLite store while the daemon writes to it (`relaybot backup`).

SQLite's online backup API copies the pages in one step, inside one read transaction: the copy
is the database as of that moment, with every transaction committed before it and none after,
and WAL lets the daemon go on writing meanwhile. The copy is written next to the target and
renamed into place once complete and checked (``quick_check``), so a failed or interrupted
backup never leaves a half-written file under the target's name. It is one self-contained file
(rollback journal, no WAL beside it), readable only by its owner: it holds every conversation.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from engine._clock import monotonic
from engine.store.sqlite._files import owned_like_store
from tools.errors import StoreError


@dataclass(frozen=True, slots=True)
class BackupMade:
    path: Path
    bytes: int
    schema_version: int
    messages: int
    seconds: float


def backup_sqlite(source: Path, target: Path) -> BackupMade:
    """Copy the store at `source` to `target` (a file; in a directory, a dated name in it).
    Blocking: run it in a thread."""
    if not source.exists():
        raise StoreError(f"there is no store at {source} (see [storage] path)")
    if target.is_dir():
        target = target / f"relaybot-{time.strftime('%Y%m%d-%H%M%S')}.db"
    if target.exists():
        raise StoreError(f"{target} exists already; give a new name, or remove it first")
    if target.resolve() == source.resolve():
        raise StoreError("the backup cannot replace the store itself")
    partial = target.with_name(f".{target.name}.partial")
    started = monotonic()
    try:
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.close(fd)
        uri = f"file:{quote(str(source.resolve()))}?mode=ro"
        with (
            owned_like_store(source),
            contextlib.closing(sqlite3.connect(uri, uri=True, timeout=30)) as src,
            contextlib.closing(sqlite3.connect(partial, timeout=30)) as dst,
        ):
            src.backup(dst)  # every page in one step: one read transaction, one moment
            dst.execute("PRAGMA journal_mode=DELETE")
            check = dst.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise StoreError(f"the copy failed its check ({check}); the store was not changed")
            version = dst.execute("PRAGMA user_version").fetchone()[0]
            messages = dst.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
        os.replace(partial, target)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot back up {source} to {target}: {exc}") from exc
    except OSError as exc:
        raise StoreError(f"cannot write {target}: {exc.strerror or exc}") from exc
    finally:
        partial.unlink(missing_ok=True)
    return BackupMade(target, target.stat().st_size, version, messages, monotonic() - started)
