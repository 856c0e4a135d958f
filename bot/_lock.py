"""One daemon per store: an advisory lock on a file next to the database.

`relaybot run` and `relaybot chat` hold ``<store>.lock`` with ``flock`` for as long as they run;
a second process on the same store is refused with the first one's pid. The kernel drops the
lock when the process exits, however it exits (even SIGKILL), so a crash never leaves a stale
lock behind, and the file itself may stay.

Why `chat` refuses too instead of sharing the store: at start-up a process finishes what the
store says was left unfinished (unanswered messages, running background jobs, approved actions).
A second process would take the daemon's work in progress for leftovers of a crash and report
or redo it. `relaybot doctor` only reads the lock, to say who holds it.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import os
from pathlib import Path
from typing import TYPE_CHECKING

from bot._store_place import claim
from tools.errors import StoreError

if TYPE_CHECKING:
    from bot._sdnotify import Notifier
    from bot.config import Config

TAKE_OVER = "RELAYBOT_TAKE_OVER"  # set by `relaybot upgrade` (bot/_handoff.py) for the new daemon
WAITING = "waiting for the store"  # the STATUS= it sends while it waits for the old one to exit


def lock_path(store: Path) -> Path:
    return store.with_name(store.name + ".lock")


def holder(store: Path) -> int | None:
    """The pid of the live process holding `store`'s lock, or None when it is free."""
    try:
        fd = os.open(lock_path(store), os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
        return int(text) if text.isdigit() else 0
    finally:
        os.close(fd)  # closing also drops the shared lock taken just now
    return None


class StoreLock:
    """The lock on one store, held by this process until `release` (or its exit)."""

    def __init__(self, store: Path, *, wait: bool = False) -> None:
        self.path = lock_path(store)
        writable = True
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            # A file system remounted read-only: the lock still works on the file as it is
            # (the store then waits until it can write, see engine/store/sqlite/_faults.py).
            if exc.errno != errno.EROFS or not self.path.exists():
                raise StoreError(
                    f"cannot create the lock file {self.path}: {exc.strerror}"
                ) from None
            fd, writable = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC), False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StoreError(
                f"another relaybot (pid {pid}) is already using the store {store}. Stop it first "
                "(systemctl stop relaybot, or Ctrl-C in its terminal), or give this one its own "
                "store with [storage] path in its config."
            ) from None
        if writable:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the lock
            self._fd = None


_held: list[StoreLock] = []


def lock_store(store: Path, *, wait: bool = False) -> StoreLock:
    """Lock `store` for the rest of this process's life; StoreError if another holds it (or,
    `wait`, once the other has let go: blocking)."""
    lock = StoreLock(store, wait=wait)
    _held.append(lock)
    return lock


def lock_config_store(config: Config, *, wait: bool = False) -> None:
    """One process per SQLite file; instances share a PostgreSQL store (engine/work/_cluster.py)."""
    if config.storage.resolved_url() is None:
        lock_store(config.storage.resolved_path(), wait=wait)
        if config.storage.path is None:  # the default: an upgrade's shared store, maybe
            claim(config.storage.resolved_path(), config._path)


async def take_store(config: Config, notifier: Notifier) -> None:
    """`run`'s lock. Started by `relaybot upgrade` ($RELAYBOT_TAKE_OVER=1), the daemon has
    imported what it runs by now; it says so (STATUS=waiting for the store), and waits for the
    daemon it replaces, which the upgrade then stops, to let go of the store: the time without
    a daemon is its start-up, not its imports too."""
    if os.environ.pop(TAKE_OVER, None) != "1":
        lock_config_store(config)
        return
    notifier.status(WAITING)
    await asyncio.to_thread(lock_config_store, config, wait=True)
