"""Standing permissions and usage counters in PostgreSQL."""

from __future__ import annotations

import time

from engine._store._pg_db import PgDb
from engine._store._records import Grant, UsageTotals


class PgGrants:
    def __init__(self, db: PgDb) -> None:
        self.db = db

    async def grant(
        self, channel: str, chat_id: str, tool: str, user_id: str, user_name: str
    ) -> None:
        await self.db.execute(
            "INSERT INTO grants(channel, chat_id, tool, granted_by, granted_by_name, granted_at) "
            "VALUES ($1,$2,$3,$4,$5,$6) ON CONFLICT (channel, chat_id, tool) DO UPDATE SET "
            "granted_by=excluded.granted_by, granted_by_name=excluded.granted_by_name, "
            "granted_at=excluded.granted_at",
            channel,
            chat_id,
            tool,
            user_id,
            user_name,
            time.time(),
        )

    async def in_chat(self, channel: str, chat_id: str) -> list[Grant]:
        rows = await self.db.fetch(
            "SELECT channel, chat_id, tool, granted_by, granted_by_name, granted_at FROM grants "
            "WHERE channel=$1 AND chat_id=$2 ORDER BY tool",
            channel,
            chat_id,
        )
        return [Grant(**dict(r)) for r in rows]

    async def revoke(self, channel: str, chat_id: str, tool: str | None = None) -> int:
        """Revoke one tool's grant, or every grant of the chat (`tool` None)."""
        if tool is None:
            return await self.db.execute(
                "DELETE FROM grants WHERE channel=$1 AND chat_id=$2", channel, chat_id
            )
        return await self.db.execute(
            "DELETE FROM grants WHERE channel=$1 AND chat_id=$2 AND tool=$3", channel, chat_id, tool
        )


class PgUsage:
    def __init__(self, db: PgDb) -> None:
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
        await self.db.execute(
            "INSERT INTO usage AS u(channel, user_id, day, prompt_tokens, completion_tokens, "
            "turns, tool_calls) VALUES ($1,$2,$3,$4,$5,1,$6) "
            "ON CONFLICT (channel, user_id, day) DO UPDATE SET "
            "prompt_tokens = u.prompt_tokens + excluded.prompt_tokens, "
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
            "WHERE channel=$1 AND user_id=$2 AND starts_with(day, $3)",
            channel,
            user_id,
            day_prefix,
        )
        assert row is not None
        return UsageTotals(user_id, int(row["p"]), int(row["c"]), int(row["t"]), int(row["k"]))

    async def top(self, channel: str, day_prefix: str, limit: int = 5) -> list[UsageTotals]:
        rows = await self.db.fetch(
            "SELECT user_id, SUM(prompt_tokens) AS p, SUM(completion_tokens) AS c, "
            "SUM(turns) AS t, SUM(tool_calls) AS k FROM usage "
            "WHERE channel=$1 AND starts_with(day, $2) "
            "GROUP BY user_id ORDER BY SUM(prompt_tokens) + SUM(completion_tokens) DESC LIMIT $3",
            channel,
            day_prefix,
            limit,
        )
        return [
            UsageTotals(r["user_id"], int(r["p"]), int(r["c"]), int(r["t"]), int(r["k"]))
            for r in rows
        ]
