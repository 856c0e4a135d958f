"""One process per store: the advisory lock next to the database."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot._lock import StoreLock, holder
from tools.errors import StoreError


def test_a_second_holder_is_refused_until_the_first_lets_go(tmp_path: Path) -> None:
    store = tmp_path / "state" / "relaybot.db"  # the directory does not exist yet
    assert holder(store) is None
    first = StoreLock(store)
    assert holder(store) == os.getpid()
    with pytest.raises(StoreError, match=rf"another relaybot \(pid {os.getpid()}\) is already"):
        StoreLock(store)
    first.release()
    assert holder(store) is None
    StoreLock(store).release()


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    store = tmp_path / "relaybot.db"
    code = (
        "import pathlib, bot._lock\n"
        f"bot._lock.lock_store(pathlib.Path({str(store)!r}))\n"
        "print('held', flush=True)\n"
        "input()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "held\n"
        assert holder(store) == proc.pid
    finally:
        proc.kill()
        proc.wait()
    assert holder(store) is None  # the kernel dropped it with the process
    StoreLock(store).release()
