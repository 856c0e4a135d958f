"""What a sick machine does to a SQLite store, in words, and said once.

A disk that fills up, a file or file system made read-only, another program holding a lock past
the busy timeout, an I/O error: SQLite refuses the statement and nothing of it is recorded. Each
of these is :class:`tools.errors.StoreUnavailable` (:func:`unavailable`), the same error an
unreachable PostgreSQL server raises, so every caller already does the right thing with it:
nothing is confirmed to a platform (Telegram delivers the update again, a webhook answers 500),
and the work is tried again later instead of being dropped.

:class:`Episodes` keeps the log readable while that lasts: the first refusal is one ERROR line
saying why and what it means; the refusals after it are silent; the first write that succeeds
again is one INFO line saying how long it lasted. Any other SQLite error (a bug, a corrupt file)
is left as it is.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

from engine._clock import monotonic
from tools.errors import StoreUnavailable

log = logging.getLogger("engine.store")

# SQLite's primary result codes (the low byte of an extended code) that a machine, not relaybot,
# causes, and what each means for the person reading the log.
_REASONS = {
    sqlite3.SQLITE_FULL: "the disk is full",
    sqlite3.SQLITE_READONLY: "it is read-only (the file, its directory or its file system)",
    sqlite3.SQLITE_BUSY: "another program holds a lock on it",
    sqlite3.SQLITE_LOCKED: "another program holds a lock on it",
    sqlite3.SQLITE_IOERR: "the disk reported an I/O error",
    sqlite3.SQLITE_CANTOPEN: "it cannot be opened for writing (a read-only file system, a "
    "directory relaybot may not write to, or the file removed)",
    sqlite3.SQLITE_PROTOCOL: "another program holds a lock on it",
}


def reason(exc: BaseException) -> str | None:
    """Why the machine refused a statement, or None when `exc` is not such a refusal."""
    if not isinstance(exc, sqlite3.Error):
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return _REASONS.get(code & 0xFF)
    text = str(exc)  # an error raised without a code (older SQLite builds)
    if "disk is full" in text:
        return _REASONS[sqlite3.SQLITE_FULL]
    if "readonly" in text:
        return _REASONS[sqlite3.SQLITE_READONLY]
    if "locked" in text:
        return _REASONS[sqlite3.SQLITE_BUSY]
    return None


def unavailable(path: Path, exc: BaseException) -> StoreUnavailable | None:
    """`exc` as :class:`StoreUnavailable` when the machine refused the statement, else None."""
    why = reason(exc)
    if why is None:
        return None
    return StoreUnavailable(f"the store at {path} cannot be written: {why} ({exc})")


class Episodes:
    """One line when the store starts refusing writes, one when it takes them again.

    A disk that is nearly full refuses one write and takes the next (one that fits in space the
    file has already), so episodes can follow each other quickly: a new one within `quiet_s` of
    the last line said is not said again (nor its end), only counted."""

    def __init__(self, path: Path, quiet_s: float = 300.0) -> None:
        self.path = path
        self.quiet_s = quiet_s
        self.since: float | None = None  # monotonic time of the first refusal of this episode
        self.refused = 0  # statements refused since the last line said
        self._said_at: float | None = None  # when the last refusal line was said
        self._said = False  # this episode's refusal was said

    @property
    def failing(self) -> bool:
        return self.since is not None

    def refusal(self, error: StoreUnavailable) -> None:
        self.refused += 1
        if self.since is not None:
            return
        self.since = now = monotonic()
        self._said = self._said_at is None or now - self._said_at >= self.quiet_s
        if not self._said:
            return
        self._said_at = now
        log.error(
            "%s. Nothing new is confirmed to the platforms meanwhile (they deliver it again) "
            "and waiting work is retried: relaybot carries on by itself once it can write again",
            error,
        )

    def written(self) -> None:
        if self.since is None:
            return
        seconds = monotonic() - self.since
        self.since = None
        if not self._said:
            return
        log.info(
            "the store at %s is written again (it refused %d writes over %.0f s)",
            self.path,
            self.refused,
            seconds,
        )
        self.refused = 0
