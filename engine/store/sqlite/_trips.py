"""Counting the SQLite store's round trips to its database thread, for the benchmarks.

Each piece of work handed to aiosqlite's thread (a statement, a batch sent with a transaction's
next statement, a COMMIT) is one round trip: the event loop queues it, the thread runs it, the
loop is woken with the result. benchmarks/bench_telegram.py reports them per message.

Off unless ``RELAYBOT_STORE_TRIPS=PATH`` is in the environment: then the connection's hand-off is
wrapped to count, and each SIGUSR2 appends the count so far to PATH (one line). Off, nothing is
wrapped and nothing is installed: it costs one look-up in the environment per store opened.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import aiosqlite

ENV = "RELAYBOT_STORE_TRIPS"

_count = 0


def count_trips(connection: aiosqlite.Connection) -> None:
    """Count `connection`'s hand-offs to its thread when the environment asks for it."""
    path = os.environ.get(ENV)
    if not path:
        return
    handoff = connection._execute  # aiosqlite's private hand-off (pinned below its next minor)

    async def counted(fn: Any, *args: Any, **kwargs: Any) -> Any:
        global _count
        _count += 1
        return await handoff(fn, *args, **kwargs)

    connection._execute = counted  # type: ignore[method-assign]

    def report(_signum: int, _frame: object) -> None:
        with Path(path).open("a", encoding="utf-8") as out:
            out.write(f"{_count}\n")

    try:
        signal.signal(signal.SIGUSR2, report)
    except ValueError:  # not the main thread: counted, never reported
        pass
