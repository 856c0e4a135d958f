"""The web console's sign-in, for every backend: one-time links and the sessions they open.

A link's token and a session's token are random (256 bits) and only their SHA-256 is stored, so
the store alone cannot sign anybody in; any instance sharing the store can redeem a link another
made, and accept a session another opened. A link is redeemed once, atomically (the row is
marked used in the same statement that finds it), and only before it expires. Rows past their
expiry are deleted whenever a new link is made.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Collection
from dataclasses import dataclass

from engine._clock import wall
from engine.store._db import Db

_KEEP_S = 86_400.0  # expired links and sessions are deleted a day after they expire
CLI = "cli"  # who a link made on the server (`relaybot console-link`) signs in


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class ConsoleSession:
    """A signed-in browser: who (an owner, "telegram:123", or "cli"), in what role ("admin"
    sees message text; "viewer" does not), and the token its changes must carry (CSRF)."""

    admin: str
    role: str
    csrf: str
    expires_at: float


class Console:
    def __init__(self, db: Db) -> None:
        self.db = db

    async def new_link(self, admin: str, ttl_s: float, role: str = "admin") -> str:
        """A one-time sign-in token for `admin`, valid for `ttl_s` seconds."""
        token = secrets.token_urlsafe(32)
        now = wall()
        async with self.db.transaction():
            await self.db.execute("DELETE FROM console_links WHERE expires_at < ?", now - _KEEP_S)
            await self.db.execute(
                "DELETE FROM console_sessions WHERE expires_at < ?", now - _KEEP_S
            )
            await self.db.execute(
                "INSERT INTO console_links(token_hash, admin, role, created_at, expires_at) "
                "VALUES (?,?,?,?,?)",
                token_hash(token),
                admin,
                role,
                now,
                now + ttl_s,
            )
        return token

    async def redeem(self, token: str, session_s: float) -> tuple[str, ConsoleSession] | None:
        """Use the link `token` (once, before it expires): a new session's token and the
        session; None when the link is unknown, used or expired."""
        now = wall()
        async with self.db.transaction():
            row = await self.db.fetchrow(
                "UPDATE console_links SET used_at=? WHERE token_hash=? AND used_at IS NULL "
                "AND expires_at > ? RETURNING admin, role",
                now,
                token_hash(token),
                now,
            )
            if row is None:
                return None
            session = secrets.token_urlsafe(32)
            csrf = secrets.token_urlsafe(24)
            opened = ConsoleSession(row["admin"], row["role"], csrf, now + session_s)
            await self.db.execute(
                "INSERT INTO console_sessions(token_hash, admin, role, csrf, created_at, "
                "expires_at) VALUES (?,?,?,?,?,?)",
                token_hash(session),
                opened.admin,
                opened.role,
                opened.csrf,
                now,
                opened.expires_at,
            )
        return session, opened

    async def session(self, token: str) -> ConsoleSession | None:
        """The open session `token` names; None when unknown, ended or expired."""
        row = await self.db.fetchrow(
            "SELECT admin, role, csrf, expires_at FROM console_sessions WHERE token_hash=? "
            "AND ended_at IS NULL AND expires_at > ?",
            token_hash(token),
            wall(),
        )
        if row is None:
            return None
        return ConsoleSession(row["admin"], row["role"], row["csrf"], row["expires_at"])

    async def usable(self, token: str) -> bool:
        """Whether the link `token` would sign in now (unused, unexpired); nothing changes."""
        row = await self.db.fetchrow(
            "SELECT 1 FROM console_links WHERE token_hash=? AND used_at IS NULL AND expires_at > ?",
            token_hash(token),
            wall(),
        )
        return row is not None

    async def end_others(self, owners: Collection[str]) -> int:
        """End every open session but those of `owners` (and those opened on the server,
        ``cli``): owners no longer among ``[access] admins`` are signed out everywhere."""
        among, params = self.db.dialect.among([CLI, *owners], "text")
        return await self.db.execute(
            "UPDATE console_sessions SET ended_at=? WHERE ended_at IS NULL "
            f"AND NOT (admin {among})",
            wall(),
            *params,
        )

    async def end(self, token: str) -> bool:
        """Sign out: the session is refused from now on, on every instance."""
        ended = await self.db.execute(
            "UPDATE console_sessions SET ended_at=? WHERE token_hash=? AND ended_at IS NULL",
            wall(),
            token_hash(token),
        )
        return ended == 1
