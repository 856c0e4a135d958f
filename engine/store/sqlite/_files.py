"""The files of a SQLite store: private to their owner, and owned like the store.

The store holds every conversation, so it and what SQLite makes beside it (the -wal and -shm
files, which SQLite creates with the store's own mode), its lock and its copies are 0600, in a
0700 directory when the directory is the store's own (nothing else in it). A store made by an
older relaybot (0644 in a 0755 directory) is made so when it is opened, with one log line.
When this process runs as root, the files SQLite creates get the store's owner, so a daemon
started by systemd as its own user can still open them."""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

FILE_MODE = 0o600
DIR_MODE = 0o700


@contextlib.contextmanager
def owned_like_store(store: Path) -> Iterator[None]:
    """The -wal and -shm files SQLite creates beside `store` inside the block get the store's
    owner when this process runs as root (a no-op otherwise, and for files that existed)."""
    beside = [store.with_name(store.name + suffix) for suffix in ("-wal", "-shm")]
    new = [path for path in beside if not path.exists()]
    try:
        yield
    finally:
        if new and os.geteuid() == 0:
            with contextlib.suppress(OSError):
                owner = store.stat()
                for path in new:
                    if path.exists():
                        os.chown(path, owner.st_uid, owner.st_gid)


def store_files(store: Path) -> list[Path]:
    """`store` and every file relaybot or SQLite keeps beside it (log, lock, copies)."""
    with contextlib.suppress(OSError):
        beside = [p for p in store.parent.iterdir() if p.name.startswith(store.name)]
        return [store, *(p for p in beside if p.name != store.name)]
    return [store]


def make_private(store: Path) -> None:
    """Create `store`'s directory (0700) and file (0600) if missing, and take group and other
    access away from those that have it (one log line naming them). Blocking: a few syscalls."""
    folder = store.parent
    folder.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(store, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
    fixed = []
    for path in [p for p in store_files(store) if p.is_file() and not p.is_symlink()]:
        fixed += _take_away(path, FILE_MODE)
    if all(p.name.startswith(store.name) for p in folder.iterdir()):  # the store's own folder
        fixed += _take_away(folder, DIR_MODE)
    if fixed:
        log.warning(
            "the store's files were open to other users; made them private: %s", ", ".join(fixed)
        )


def _take_away(path: Path, mode: int) -> list[str]:
    try:
        st = path.stat()
        if st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) & 0o077 == 0:
            return []
        path.chmod(mode)
    except OSError:
        return []  # read-only, or not ours: the store opens as before
    return [f"{path} ({stat.S_IMODE(st.st_mode):o} -> {mode:o})"]
