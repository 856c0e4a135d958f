"""Which server of a PostgreSQL URL the store writes to, and what a server that cannot take a
write means: the store is unavailable for now, not broken.

A URL may name several hosts (libpq's form, which asyncpg reads:
``postgresql://bot@db1:5432,db2:5432/relaybot?target_session_attrs=read-write``): each new
connection tries them in order and keeps the first that suits ``target_session_attrs``. The
daemon's store writes, so it asks for ``read-write`` when the URL (or ``PGTARGETSESSIONATTRS``)
does not say: a streaming-replication standby, or a server made read-only (an operator's
``default_transaction_read_only``, a managed server whose disk is full), is then never taken
as the store. After a failover, the connections the old primary took with it are replaced by
connections to whichever host is writable now. A read-only look (`relaybot status`) sets
``default_transaction_read_only`` itself, so it asks for the ``primary`` instead of
``read-write``.

What "the store cannot write now" looks like from asyncpg is :data:`UNREACHABLE`, and
:func:`unavailable` words it as :class:`tools.errors.StoreUnavailable`: a refused or broken
socket, a server shutting down or starting up, no host that takes writes, or a write refused
with "cannot execute … in a read-only transaction" (a URL that asks for any server, during a
failover). Callers then confirm nothing to a platform and try again later: nothing is lost.
"""

from __future__ import annotations

import asyncio
import os
import urllib.parse

import asyncpg

from engine.store._opening._urls import redact
from tools.errors import StoreUnavailable

ATTRS = "target_session_attrs"
WRITABLE = "read-write"
# A write refused because the server is read-only: a standby, or one made read-only.
READ_ONLY: tuple[type[BaseException], ...] = (asyncpg.ReadOnlySQLTransactionError,)
# No host of the URL suits target_session_attrs (all standbys, or read-only, for now).
NO_WRITABLE_HOST = asyncpg.TargetServerAttributeNotMatched
UNREACHABLE: tuple[type[BaseException], ...] = (
    OSError,
    asyncio.TimeoutError,
    asyncpg.InterfaceError,
    # a connection whose protocol a server going away left out of step ("cannot switch to
    # state 12; another operation is in progress"): dropped, and the write tried again later
    asyncpg.InternalClientError,
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.ConnectionFailureError,
    NO_WRITABLE_HOST,
    *READ_ONLY,
)


def session_attrs(url: str, *, readonly: bool) -> str | None:
    """The ``target_session_attrs`` to connect with (None: asyncpg's default, any server)."""
    asked = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query).get(ATTRS, [None])[-1]
    asked = asked or os.environ.get("PGTARGETSESSIONATTRS") or None
    if readonly:  # its own sessions are read-only: a primary is what read-write means here
        return "primary" if asked == WRITABLE else asked
    return asked or WRITABLE


def unavailable(where: str, exc: BaseException, *, opening: bool = False) -> StoreUnavailable:
    """`exc` (one of :data:`UNREACHABLE`) as the store being unavailable, saying why
    (`opening`: the store, at start-up)."""
    if isinstance(exc, READ_ONLY):
        return StoreUnavailable(
            f"the database at {where} refuses writes ({reason(exc)}): it is a standby or was "
            "made read-only; waiting for a writable server"
        )
    if isinstance(exc, NO_WRITABLE_HOST):
        return StoreUnavailable(
            f"the database at {where} has no server that takes writes now (a standby not yet "
            "promoted, or one made read-only); waiting for a writable server"
        )
    if opening:
        return StoreUnavailable(f"cannot reach the store at {where}: {reason(exc)}")
    return StoreUnavailable(f"the database at {where} is unreachable")


def reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return redact(text)
