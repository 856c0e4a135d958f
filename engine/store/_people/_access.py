"""Who was let in by an owner, and the requests strangers made (pairing), for every backend.

A stranger's request is a row with a short code, pending until an owner answers it or it
expires; at most one is pending per person (a unique index on the pending ones). Allowing it
records the person as approved on that platform in the same transaction, so a press that
counts is never half done. Approvals are kept until revoked. Each change is told (`ACCESS`,
through the store's notifications: on PostgreSQL every instance hears it; SQLite's daemon hears
a command line's write through its watch, engine/store/sqlite/_watch.py), so a process that
keeps who is let in in memory reads it again.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from engine._clock import wall
from engine.store._db import ACCESS, Db, Row


class RequestState(enum.StrEnum):
    PENDING = "pending"
    ALLOWED = "allowed"
    DENIED = "denied"
    EXPIRED = "expired"


@dataclass(frozen=True, slots=True)
class AccessRequest:
    """A stranger asking to use the bot: who, where from, and what became of it."""

    code: str  # short, shown to the stranger and on the owners' buttons
    channel: str
    user_id: str
    user_name: str
    username: str  # the platform handle ("" when it has none)
    chat_id: str  # where they wrote
    asked_at: float
    expires_at: float
    state: RequestState = RequestState.PENDING
    decided_by: str | None = None  # "<channel>:<user id>" of the owner who answered
    decided_at: float | None = None


@dataclass(frozen=True, slots=True)
class ApprovedUser:
    channel: str
    user_id: str
    user_name: str
    approved_by: str  # "<channel>:<user id>", or "cli"
    approved_at: float


_REQUEST = (
    "code, channel, user_id, user_name, username, chat_id, asked_at, expires_at, state, "
    "decided_by, decided_at"
)


def _request(r: Row) -> AccessRequest:
    d = dict(r)
    d["state"] = RequestState(d["state"])
    return AccessRequest(**d)


class Access:
    def __init__(self, db: Db) -> None:
        self.db = db

    def on_change(self, listener: Callable[[], object]) -> None:
        self.db.on_notify(ACCESS, lambda _payload: listener())

    async def is_approved(self, channel: str, user_id: str) -> bool:
        found = await self.db.fetchval(
            "SELECT 1 FROM approved_users WHERE channel=? AND user_id=?", channel, user_id
        )
        return found is not None

    async def approved(self) -> list[ApprovedUser]:
        rows = await self.db.fetch(
            "SELECT channel, user_id, user_name, approved_by, approved_at FROM approved_users "
            "ORDER BY channel, approved_at, user_id"
        )
        return [ApprovedUser(**dict(r)) for r in rows]

    async def approve(self, channel: str, user_id: str, user_name: str, by: str) -> bool:
        """Let the person in; False when they were already."""
        done = bool(
            await self.db.execute(
                "INSERT INTO approved_users(channel, user_id, user_name, approved_by, "
                "approved_at) VALUES (?,?,?,?,?) ON CONFLICT (channel, user_id) DO NOTHING",
                channel,
                user_id,
                user_name,
                by,
                wall(),
            )
        )
        if done:
            await self.db.notify(ACCESS)
        return done

    async def revoke(self, channel: str, user_id: str) -> bool:
        done = bool(
            await self.db.execute(
                "DELETE FROM approved_users WHERE channel=? AND user_id=?", channel, user_id
            )
        )
        if done:
            await self.db.notify(ACCESS)
        return done

    async def ask(self, request: AccessRequest) -> bool:
        """Record a new pending request; False when the person has one pending already (an
        expired one is closed first) or the code is taken."""
        async with self.db.transaction():
            await self.db.execute(
                "UPDATE access_requests SET state=? WHERE channel=? AND user_id=? AND state=? "
                "AND expires_at <= ?",
                RequestState.EXPIRED.value,
                request.channel,
                request.user_id,
                RequestState.PENDING.value,
                request.asked_at,
            )
            return bool(
                await self.db.execute(
                    f"INSERT INTO access_requests({_REQUEST}) VALUES (?,?,?,?,?,?,?,?,?,?,?) "
                    "ON CONFLICT DO NOTHING",
                    request.code,
                    request.channel,
                    request.user_id,
                    request.user_name,
                    request.username,
                    request.chat_id,
                    request.asked_at,
                    request.expires_at,
                    RequestState.PENDING.value,
                    None,
                    None,
                )
            )

    async def latest(self, channel: str, user_id: str) -> AccessRequest | None:
        """The person's newest request, whatever became of it."""
        row = await self.db.fetchrow(
            f"SELECT {_REQUEST} FROM access_requests WHERE channel=? AND user_id=? "
            "ORDER BY asked_at DESC LIMIT 1",
            channel,
            user_id,
        )
        return None if row is None else _request(row)

    async def request(self, code: str) -> AccessRequest | None:
        row = await self.db.fetchrow(f"SELECT {_REQUEST} FROM access_requests WHERE code=?", code)
        return None if row is None else _request(row)

    async def waiting(self, now: float) -> list[AccessRequest]:
        """The requests pending and not expired at `now`, oldest first."""
        rows = await self.db.fetch(
            f"SELECT {_REQUEST} FROM access_requests WHERE state=? AND expires_at > ? "
            "ORDER BY asked_at, code",
            RequestState.PENDING.value,
            now,
        )
        return [_request(r) for r in rows]

    async def asked_since(self, since: float) -> int:
        """How many requests were made since `since` (the owners' notifications are capped)."""
        n = await self.db.fetchval(
            "SELECT COUNT(*) FROM access_requests WHERE asked_at >= ?", since
        )
        return int(n or 0)

    async def decide(self, code: str, allow: bool, by: str, now: float) -> AccessRequest | None:
        """Answer the pending request `code` (allowing also approves the person); None when it
        is not pending any more (answered, expired, or unknown)."""
        state = RequestState.ALLOWED if allow else RequestState.DENIED
        async with self.db.transaction():
            rows = await self.db.fetch(
                "UPDATE access_requests SET state=?, decided_by=?, decided_at=? "
                f"WHERE code=? AND state=? AND expires_at > ? RETURNING {_REQUEST}",
                state.value,
                by,
                now,
                code,
                RequestState.PENDING.value,
                now,
            )
            if not rows:
                return None
            decided = _request(rows[0])
            if allow:
                await self.approve(decided.channel, decided.user_id, decided.user_name, by)
        return decided
