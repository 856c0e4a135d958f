"""A SQLite store's schema brought up to this relaybot's (:class:`Upgrade`), the copy made before
an upgrade, and how long it is kept.

A store of a newer schema is refused, and (read-only, for `relaybot status`) an older one too.

Before the first migration of a store that holds anything, the daemon copies it next to itself
(`relaybot.db.v10.bak` for a store of schema version 10), with SQLite's online backup
(``_backup``): one consistent moment, checked, renamed into place only when complete. The
migrations then run in one transaction, in one trip to the db thread (:func:`apply`), so a
failed one leaves the store as it was; the copy is what the previous relaybot can run on after
a successful upgrade turns out to be unwanted.

There is one such copy at a time: a new upgrade replaces it, and it is removed at the next
successful start after the upgrade (:func:`settle`), by then the upgraded daemon has run once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

from engine.store._opening._upgrade import runs_as_it_is, statements
from engine.store.sqlite._backup import backup_sqlite
from tools.errors import StoreError, StoreUnavailable

log = logging.getLogger("engine.store")

_SUFFIX = re.compile(r"\.v(\d+)\.bak$")


def backup_path(store: Path, version: int) -> Path:
    """Where the copy of `store` at schema `version` goes before it is upgraded."""
    return store.with_name(f"{store.name}.v{version}.bak")


def upgrade_backups(store: Path) -> list[Path]:
    """The copies made before upgrades of `store` that are still there."""
    prefix = f"{store.name}.v"
    return sorted(
        p
        for p in store.parent.glob(f"{glob_escape(prefix)}*.bak")
        if _SUFFIX.search(p.name[len(store.name) :])
    )


def glob_escape(text: str) -> str:
    return re.sub(r"([*?[])", r"[\1]", text)


def back_up_before_upgrade(store: Path, version: int) -> Path:
    """Copy `store` (schema `version`) next to itself; the copy replaces an earlier one.
    Blocking: run it in a thread."""
    target = backup_path(store, version)
    partial = target.with_name(target.name + ".new")
    partial.unlink(missing_ok=True)
    try:
        backup_sqlite(store, partial)
    except StoreError as exc:
        raise StoreError(
            f"the store at {store} was not upgraded: the copy made before an upgrade failed "
            f"({exc}). Nothing was changed; free space next to it and start again"
        ) from exc
    partial.replace(target)
    for old in upgrade_backups(store):
        if old != target:
            old.unlink(missing_ok=True)
    return target


def settle(store: Path, keep: Path | None) -> None:
    """The daemon started on the upgraded store: the copy of an earlier upgrade goes (`keep`:
    the one this start made, if it upgraded)."""
    for old in upgrade_backups(store):
        if old != keep:
            with contextlib.suppress(OSError):
                old.unlink()
                log.info("removed %s, the copy made before the last upgrade", old)


def stored_version(store: Path) -> int:
    """The schema version of the SQLite file at `store`, read without changing it (0: none).
    Blocking."""
    if not store.exists():
        return 0
    uri = f"file:{quote(str(store.resolve()))}?mode=ro"
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=5)) as db:
            return int(db.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the store at {store}: {exc}") from exc


def refusal(
    path: Path, version: int, known: int, *, older_too: bool, readable_from: int | None = None
) -> StoreError | None:
    """Why this relaybot (of schema version `known`) may not open the store at `path`, of schema
    `version`: newer than it knows, unless the store says relaybots of schema `readable_from` and
    later run on it (migration 23: what came since only adds); or, `older_too` (it may not
    upgrade it), older."""
    if version > known and not runs_as_it_is(version, known, readable_from):
        return StoreError(
            f"the store at {path} has schema version {version}, newer than this relaybot knows "
            f"({known}): it was written by a newer relaybot. Upgrade relaybot, or restore a "
            "backup made by this version; the file was left untouched."
        )
    if older_too and version < known:
        return StoreError(
            f"the store at {path} has schema version {version}, older than this relaybot's "
            f"({known}): start the daemon of this version once to upgrade it (`relaybot migrate "
            "--check` says what that does), then try again"
        )
    return None


def failure(
    path: Path, version: int, newest: int, number: int, exc: BaseException, copy: Path | None
) -> str:
    """What the log says when migration `number` of an upgrade to `newest` failed."""
    back = f"; the copy made before trying is at {copy}" if copy is not None else ""
    return (
        f"upgrading the store at {path} from schema version {version} to {newest} failed at "
        f"migration {number} ({exc}). The store was left as it was, at version {version}{back}. "
        "To go back, install the relaybot you ran before and start it: it runs on the store as "
        "it is. Report this failure with the line above."
    )


def apply(
    conn: sqlite3.Connection, migrations: Sequence[str], version: int, reached: list[int]
) -> None:
    """The `migrations` after `version`, statement by statement on `conn` (in the db thread, in
    the caller's transaction), then the new version; `reached` gets the number of each one as it
    starts, so a failure can name it."""
    for number, script in enumerate(migrations[version:], version + 1):
        reached.append(number)
        for stmt in statements(script):
            conn.execute(stmt)
    conn.execute(f"PRAGMA user_version = {len(migrations)}")


def readable_from(conn: sqlite3.Connection) -> int | None:
    """The oldest schema whose relaybot runs on this store (migration 23); None: not said."""
    try:
        row = conn.execute("SELECT min(readable_from) FROM schema_compat").fetchone()
    except sqlite3.Error:
        return None
    return None if row is None or row[0] is None else int(row[0])


def stored_readable_from(store: Path) -> int | None:
    """The marker of the SQLite file at `store` (:func:`readable_from`), read without changing
    it. Blocking."""
    if not store.exists():
        return None
    uri = f"file:{quote(str(store.resolve()))}?mode=ro"
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=5)) as db:
            return readable_from(db)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the store at {store}: {exc}") from exc


class Connection(Protocol):
    """What an upgrade needs of the store's connection (sqlite/_db.py's SqliteDb)."""

    async def schema_version(self) -> int: ...

    def transaction(self) -> contextlib.AbstractAsyncContextManager[None]: ...

    async def run(self, fn: Callable[[sqlite3.Connection], Any]) -> Any: ...


class Upgrade:
    """This relaybot's schema (`migrations`; a test may give another) on the store at `path`."""

    def __init__(self, path: Path, migrations: Sequence[str]) -> None:
        self.path = path
        self.migrations = migrations
        self.backup: Path | None = None  # the copy made before this open upgraded it

    async def check(self, db: Connection, *, older_too: bool) -> None:
        """Refuse a store this relaybot cannot run on (`older_too`: nor upgrade)."""
        version, known = await db.schema_version(), len(self.migrations)
        readable = await db.run(readable_from) if version > known else None
        if refused := refusal(
            self.path, version, known, older_too=older_too, readable_from=readable
        ):
            raise refused
        if version > known:
            log.info(
                "the store's schema (%d) is newer than this relaybot's (%d); what came since only "
                "adds, so this relaybot runs on it as it is",
                version,
                known,
            )

    async def migrate(self, db: Connection) -> None:
        """Every migration the store lacks, in one transaction: a failure leaves it as it was.
        A store that holds anything is first copied next to itself."""
        version = await db.schema_version()
        newest = len(self.migrations)
        if version >= newest:  # newer: check() let this relaybot run on it, untouched
            return
        if version > 0:
            self.backup = await asyncio.to_thread(back_up_before_upgrade, self.path, version)
            log.info(
                "upgrading the store from schema version %d to %d; a copy of it is at %s",
                version,
                newest,
                self.backup,
            )
        reached = [version]  # ends with the number of the migration being applied
        try:
            async with db.transaction():  # one trip for them all, not one per statement
                await db.run(lambda conn: apply(conn, self.migrations, version, reached))
        except StoreUnavailable as exc:  # a full disk, say: worth waiting for
            raise StoreUnavailable(self._failed(version, reached[-1], exc)) from exc
        except sqlite3.Error as exc:
            raise StoreError(self._failed(version, reached[-1], exc)) from exc
        log.info("store migrated from schema version %d to %d", version, newest)

    def _failed(self, version: int, number: int, exc: BaseException) -> str:
        return failure(self.path, version, len(self.migrations), number, exc, self.backup)

    async def settled(self) -> None:
        """The daemon runs on this store: the copy an earlier upgrade made is not needed."""
        await asyncio.to_thread(settle, self.path, self.backup)
