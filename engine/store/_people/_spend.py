"""What requests cost, for every backend: one row per channel, chat, user, day (UTC,
"YYYY-MM-DD") and model, summed as requests are charged (engine/chat/_access/_spend.py).

Costs are integers of nano-dollars, so sums are exact. The figures are read per user (/usage,
``[limits] usd_per_day``), per chat (/usage for admins), and per model (`relaybot status`).
"""

from __future__ import annotations

from engine.store._db import Db, Row
from engine.store._types._rows import Spent, UserDay

_SUMS = (
    "COALESCE(SUM(requests), 0) AS requests, COALESCE(SUM(prompt_tokens), 0) AS prompt, "
    "COALESCE(SUM(completion_tokens), 0) AS completion, COALESCE(SUM(images), 0) AS images, "
    "COALESCE(SUM(chars), 0) AS chars, COALESCE(SUM(seconds), 0) AS seconds, "
    "COALESCE(SUM(nano_usd), 0) AS nano, COALESCE(SUM(reasoning_tokens), 0) AS reasoning"
)


class Spend:
    def __init__(self, db: Db) -> None:
        self.db = db

    async def add(
        self,
        channel: str,
        chat_id: str,
        user_id: str,
        day: str,
        model: str,
        spent: Spent,
    ) -> None:
        """Add one request's figures (`spent`, its `of` unused) to the day's row."""
        await self.db.execute_soon(  # a counter: with the next trip
            "INSERT INTO spend AS s(channel, chat_id, user_id, day, model, requests, "
            "prompt_tokens, completion_tokens, images, chars, seconds, nano_usd, reasoning_tokens) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) "
            "ON CONFLICT (channel, chat_id, user_id, day, model) DO UPDATE SET "
            "requests = s.requests + excluded.requests, "
            "prompt_tokens = s.prompt_tokens + excluded.prompt_tokens, "
            "completion_tokens = s.completion_tokens + excluded.completion_tokens, "
            "images = s.images + excluded.images, chars = s.chars + excluded.chars, "
            "seconds = s.seconds + excluded.seconds, nano_usd = s.nano_usd + excluded.nano_usd, "
            "reasoning_tokens = s.reasoning_tokens + excluded.reasoning_tokens",
            channel,
            chat_id,
            user_id,
            day,
            model,
            spent.requests,
            spent.prompt_tokens,
            spent.completion_tokens,
            spent.images,
            spent.chars,
            float(spent.seconds),
            spent.nano_usd,
            spent.reasoning_tokens,
        )

    async def of_user(self, channel: str, user_id: str, day_prefix: str) -> Spent:
        """A user's figures in every chat over the days starting with `day_prefix`."""
        row = await self.db.fetchrow(
            f"SELECT {_SUMS} FROM spend WHERE channel=? AND user_id=? AND day LIKE ?",
            channel,
            user_id,
            f"{day_prefix}%",
        )
        return _spent(user_id, row)

    async def of_chat(self, channel: str, chat_id: str, day_prefix: str) -> Spent:
        """A chat's figures, every user's, over the days starting with `day_prefix`."""
        row = await self.db.fetchrow(
            f"SELECT {_SUMS} FROM spend WHERE channel=? AND chat_id=? AND day LIKE ?",
            channel,
            chat_id,
            f"{day_prefix}%",
        )
        return _spent(chat_id, row)

    async def by_model(self, day_prefix: str) -> list[Spent]:
        """Each model's figures over the days starting with `day_prefix`, the costliest first."""
        rows = await self.db.fetch(
            f"SELECT model, {_SUMS} FROM spend WHERE day LIKE ? GROUP BY model "
            "ORDER BY SUM(nano_usd) DESC, model",
            f"{day_prefix}%",
        )
        return [_spent(r["model"], r) for r in rows]

    async def by_user_day(self, since_day: str) -> list[UserDay]:
        """Each user's tokens and cost per day from `since_day` ("YYYY-MM-DD") on, by day."""
        rows = await self.db.fetch(
            "SELECT channel, user_id, day, COALESCE(SUM(prompt_tokens + completion_tokens), 0) "
            "AS tokens, COALESCE(SUM(nano_usd), 0) AS nano FROM spend WHERE day >= ? "
            "GROUP BY channel, user_id, day ORDER BY day, channel, user_id",
            since_day,
        )
        return [
            UserDay(r["channel"], r["user_id"], r["day"], int(r["tokens"]), int(r["nano"]))
            for r in rows
        ]


def _spent(of: str, r: Row) -> Spent:
    """Sums as Python numbers (PostgreSQL's SUM of a BIGINT is a NUMERIC)."""
    return Spent(
        of,
        int(r["requests"]),
        int(r["prompt"]),
        int(r["completion"]),
        int(r["images"]),
        int(r["chars"]),
        float(r["seconds"]),
        int(r["nano"]),
        int(r["reasoning"]),
    )
