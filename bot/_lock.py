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

import errno
import fcntl
import os
from pathlib import Path

from tools.errors import StoreError


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

    def __init__(self, store: Path) -> None:
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
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
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


def lock_store(store: Path) -> StoreLock:
    """Lock `store` for the rest of this process's life; StoreError if another holds it."""
    lock = StoreLock(store)
    _held.append(lock)
    return lock
