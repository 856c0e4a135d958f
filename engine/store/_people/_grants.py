"""Standing permissions and usage counters, for every backend."""

from __future__ import annotations

from engine._clock import wall
from engine.store._cache import Caches, Listed
from engine.store._db import Db, Row
from engine.store._types._rows import Grant, UsageTotals

_CACHED_CHATS = 10_000  # the cache is emptied past this many chats


class Grants:
    """A turn reads its chat's grants: they are kept in memory when only this process writes the
    store (a SQLite file: bot/_lock.py), and dropped for the chat whenever they change."""

    def __init__(self, db: Db, caches: Caches) -> None:
        self.db = db
        self._cache: dict[tuple[str, str], tuple[Grant, ...]] | None = (
            {} if caches.enabled else None
        )
        self._listed = Listed[tuple[str, str]]()  # the chats with grants (list_chats)
        caches.enroll(self._drop)

    async def list_chats(self) -> None:
        """Read which chats have grants (at open, and after another process wrote)."""
        rows = await self.db.fetch("SELECT DISTINCT channel, chat_id FROM grants")
        self._listed.load((r["channel"], r["chat_id"]) for r in rows)

    def _drop(self) -> None:
        if self._cache is not None:
            self._cache.clear()
        self._listed.clear()

    async def grant(
        self, channel: str, chat_id: str, tool: str, user_id: str, user_name: str
    ) -> None:
        self._listed.add((channel, chat_id))
        await self.db.execute(
            "INSERT INTO grants(channel, chat_id, tool, granted_by, granted_by_name, granted_at) "
            "VALUES (?,?,?,?,?,?) ON CONFLICT (channel, chat_id, tool) DO UPDATE SET "
            "granted_by=excluded.granted_by, granted_by_name=excluded.granted_by_name, "
            "granted_at=excluded.granted_at",
            channel,
            chat_id,
            tool,
            user_id,
            user_name,
            wall(),
        )
        self._forget(channel, chat_id)

    def _forget(self, channel: str, chat_id: str) -> None:
        if self._cache is not None:
            self._cache.pop((channel, chat_id), None)

    async def in_chat(self, channel: str, chat_id: str) -> list[Grant]:
        if self._listed.none((channel, chat_id)):
            return []
        cached = None if self._cache is None else self._cache.get((channel, chat_id))
        if cached is None:
            rows = await self.db.fetch(
                "SELECT channel, chat_id, tool, granted_by, granted_by_name, granted_at "
                "FROM grants WHERE channel=? AND chat_id=? ORDER BY tool",
                channel,
                chat_id,
            )
            cached = tuple(Grant(**dict(r)) for r in rows)
            if self._cache is not None:
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
        revoked = await self.db.execute(sql, *params)
        self._forget(channel, chat_id)
        return revoked


class Usage:
    def __init__(self, db: Db) -> None:
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
        await self.db.execute_soon(  # a counter: with the next trip
            "INSERT INTO usage AS u(channel, user_id, day, prompt_tokens, completion_tokens, "
            "turns, tool_calls) VALUES (?,?,?,?,?,1,?) ON CONFLICT (channel, user_id, day) "
            "DO UPDATE SET prompt_tokens = u.prompt_tokens + excluded.prompt_tokens, "
            "completion_tokens = u.completion_tokens + excluded.completion_tokens, "
            "turns = u.turns + 1, tool_calls = u.tool_calls + excluded.tool_calls",
            channel,
            user_id,
            day,
            prompt_tokens,
            completion_tokens,
            tool_calls,
        )

    async def totals(self, channel: str, user_id: str, day_prefix: str) -> UsageTotals:
        """A user's totals over the days starting with `day_prefix` ("2026-11-23", "2026-11")."""
        row = await self.db.fetchrow(
            "SELECT COALESCE(SUM(prompt_tokens), 0) AS p, "
            "COALESCE(SUM(completion_tokens), 0) AS c, COALESCE(SUM(turns), 0) AS t, "
            "COALESCE(SUM(tool_calls), 0) AS k FROM usage "
            "WHERE channel=? AND user_id=? AND day LIKE ?",
            channel,
            user_id,
            f"{day_prefix}%",
        )
        assert row is not None
        return _totals(user_id, row)

    async def top(self, channel: str, day_prefix: str, limit: int = 5) -> list[UsageTotals]:
        rows = await self.db.fetch(
            "SELECT user_id, SUM(prompt_tokens) AS p, SUM(completion_tokens) AS c, "
            "SUM(turns) AS t, SUM(tool_calls) AS k FROM usage WHERE channel=? AND day LIKE ? "
            "GROUP BY user_id ORDER BY SUM(prompt_tokens) + SUM(completion_tokens) DESC, user_id "
            "LIMIT ?",
            channel,
            f"{day_prefix}%",
            limit,
        )
        return [_totals(r["user_id"], r) for r in rows]


def _totals(user_id: str, r: Row) -> UsageTotals:
    """Sums as ints (PostgreSQL's SUM of a BIGINT is a NUMERIC)."""
    return UsageTotals(user_id, int(r["p"]), int(r["c"]), int(r["t"]), int(r["k"]))
