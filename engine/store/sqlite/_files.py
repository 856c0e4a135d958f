"""The files SQLite makes beside a store: owned like the store when this process runs as root,
so a daemon started by systemd as its own user can still open them."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


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
