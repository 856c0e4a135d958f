"""Standing permissions and usage counters in SQLite."""

from __future__ import annotations

import time

from engine._store._records import Grant, UsageTotals
from engine._store._sqlite_db import SqliteDb

_CACHED_CHATS = 10_000  # the cache is emptied past this many chats


class SqliteGrants:
    """A turn reads its chat's grants: they are kept in memory (only this process writes the
    file: bot/_lock.py), and dropped for the chat whenever they change."""

    def __init__(self, db: SqliteDb) -> None:
        self.db = db
        self._cache = db.chat_grants

    async def grant(
        self, channel: str, chat_id: str, tool: str, user_id: str, user_name: str
    ) -> None:
        await self.db.write(
            "INSERT INTO grants(channel, chat_id, tool, granted_by, granted_by_name, granted_at) "
            "VALUES (?,?,?,?,?,?) ON CONFLICT (channel, chat_id, tool) DO UPDATE SET "
            "granted_by=excluded.granted_by, granted_by_name=excluded.granted_by_name, "
            "granted_at=excluded.granted_at",
            (channel, chat_id, tool, user_id, user_name, time.time()),
        )
        self._cache.pop((channel, chat_id), None)

    async def in_chat(self, channel: str, chat_id: str) -> list[Grant]:
        cached = self._cache.get((channel, chat_id))
        if cached is None:
            rows = await self.db.all(
                "SELECT channel, chat_id, tool, granted_by, granted_by_name, granted_at "
                "FROM grants WHERE channel=? AND chat_id=? ORDER BY tool",
                (channel, chat_id),
            )
            cached = tuple(Grant(**dict(r)) for r in rows)
            if len(self._cache) >= _CACHED_CHATS:
                self._cache.clear()
            self._cache[(channel, chat_id)] = cached
        return list(cached)

    async def revoke(self, channel: str, chat_id: str, tool: str | None = None) -> int:
        """Revoke one tool's grant, or every grant of the chat (`tool` None)."""
        sql = "DELETE FROM grants WHERE channel=? AND chat_id=?"
        params: tuple[str, ...] = (channel, chat_id)
        if tool is not None:
            sql += " AND tool=?"
            params += (tool,)
        revoked = (await self.db.write(sql, params)).rowcount
        self._cache.pop((channel, chat_id), None)
        return revoked


class SqliteUsage:
    def __init__(self, db: SqliteDb) -> None:
        self.db = db

    async def add(
        self,
        channel: str,
        user_id: str,
        day: str,
        prompt_tokens: int,
        completion_tokens: int,
        tool_calls: int,
    ) -> None:
        await self.db.write(
            "INSERT INTO usage(channel, user_id, day, prompt_tokens, completion_tokens, turns, "
            "tool_calls) VALUES (?,?,?,?,?,1,?) ON CONFLICT (channel, user_id, day) DO UPDATE SET "
            "prompt_tokens = prompt_tokens + excluded.prompt_tokens, "
            "completion_tokens = completion_tokens + excluded.completion_tokens, "
            "turns = turns + 1, tool_calls = tool_calls + excluded.tool_calls",
            (channel, user_id, day, prompt_tokens, completion_tokens, tool_calls),
        )

    async def totals(self, channel: str, user_id: str, day_prefix: str) -> UsageTotals:
        """A user's totals over the days starting with `day_prefix` ("2026-11-23", "2026-11")."""
        row = await self.db.one(
            "SELECT COALESCE(SUM(prompt_tokens), 0) AS p, "
            "COALESCE(SUM(completion_tokens), 0) AS c, COALESCE(SUM(turns), 0) AS t, "
            "COALESCE(SUM(tool_calls), 0) AS k FROM usage "
            "WHERE channel=? AND user_id=? AND day LIKE ?",
            (channel, user_id, f"{day_prefix}%"),
        )
        assert row is not None
        return UsageTotals(user_id, row["p"], row["c"], row["t"], row["k"])

    async def top(self, channel: str, day_prefix: str, limit: int = 5) -> list[UsageTotals]:
        rows = await self.db.all(
            "SELECT user_id, SUM(prompt_tokens) AS p, SUM(completion_tokens) AS c, "
            "SUM(turns) AS t, SUM(tool_calls) AS k FROM usage WHERE channel=? AND day LIKE ? "
            "GROUP BY user_id ORDER BY p + c DESC LIMIT ?",
            (channel, f"{day_prefix}%", limit),
        )
        return [UsageTotals(r["user_id"], r["p"], r["c"], r["t"], r["k"]) for r in rows]
