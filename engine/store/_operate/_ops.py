"""Operating the store, for every backend: what is going on (`relaybot status`), the last error
of each channel, what a restart resumes receiving from, bounded growth (pruning settled rows,
capping history by age, the WAL of a SQLite file), forgetting a user.

Status reads only, so it works on a read-only connection from another process while the daemon
writes; on a shared store it covers every instance. A turn's start is the `taken_at` of the inbox
rows it answers; a scheduled run's and an approved action's, the time of their last transition
(``finished_at`` and ``decided_at`` are stamped on every move, so for one still running it is
when it started).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime

from engine._clock import wall
from engine.store._cache import Caches
from engine.store._db import ACCESS, FORGOT, Db
from engine.store._operate._forget import drop_summaries_before, forget_user
from engine.store._people._schedules import Schedules
from engine.store._types._reports import (
    ChannelError,
    Forgotten,
    JobView,
    PendingPrompt,
    Pruned,
    QueuedChat,
    Running,
    StatusSnapshot,
    StoreCounts,
    UpcomingRun,
)
from engine.store._types._states import JobState

_SETTLED_JOBS = "('delivered', 'interrupted')"
_SETTLED_RUNS = "('done', 'failed', 'skipped', 'interrupted')"
_DECIDED = "('declined', 'expired', 'cancelled', 'executed', 'interrupted')"


class Ops:
    def __init__(self, db: Db, schedules: Schedules, caches: Caches) -> None:
        self.db = db
        self.schedules = schedules
        self.caches = caches

    # -- status ---------------------------------------------------------------------------

    async def status(self) -> StatusSnapshot:
        db = self.db
        queued = [
            QueuedChat(r["channel"], r["chat_id"], r["n"], r["oldest"], r["held"])
            for r in await db.fetch(
                "SELECT channel, chat_id, COUNT(*) AS n, MIN(received_at) AS oldest, "
                "MIN(hold_until) AS held FROM inbox WHERE state='queued' "
                "GROUP BY channel, chat_id ORDER BY oldest"
            )
        ]
        running = [
            Running(r["channel"], r["chat_id"], _answering(r["n"]), r["since"])
            for r in await db.fetch(
                "SELECT channel, chat_id, COUNT(*) AS n, MIN(taken_at) AS since FROM inbox "
                "WHERE state='taken' GROUP BY channel, chat_id ORDER BY since"
            )
        ]
        running += [
            Running(r["channel"], r["chat_id"], f"scheduled task #{r['id']}", r["since"])
            for r in await db.fetch(
                "SELECT s.channel, s.chat_id, s.id, COALESCE(r.finished_at, r.created_at) AS since "
                "FROM schedule_runs r JOIN schedules s ON s.id = r.schedule_id "
                "WHERE r.state='running' ORDER BY since"
            )
        ]
        running += [
            Running(r["channel"], r["chat_id"], f"approved action {r['tool']}", r["decided_at"])
            for r in await db.fetch(
                "SELECT channel, chat_id, tool, decided_at FROM confirmations "
                "WHERE state='executing' ORDER BY decided_at"
            )
        ]
        prompts = [
            PendingPrompt(
                r["id"],
                r["channel"],
                r["chat_id"],
                r["user_id"],
                r["tool"],
                r["summary"],
                r["expires_at"],
            )
            for r in await db.fetch(
                "SELECT id, channel, chat_id, user_id, tool, summary, expires_at "
                "FROM confirmations WHERE state='pending' ORDER BY expires_at"
            )
        ]
        jobs = [
            JobView(
                r["id"],
                r["channel"],
                r["chat_id"],
                r["user_id"],
                r["tool"],
                JobState(r["state"]),
                r["created_at"],
                _due(r["args"]),
            )
            for r in await db.fetch(
                "SELECT id, channel, chat_id, user_id, tool, state, created_at, args FROM jobs "
                "WHERE state IN ('running', 'resumed', 'done') ORDER BY created_at"
            )
        ]
        upcoming = [
            UpcomingRun(r["id"], r["channel"], r["chat_id"], r["task"], r["next_due"])
            for r in await db.fetch(
                "SELECT id, channel, chat_id, task, next_due FROM schedules "
                "WHERE state='active' ORDER BY next_due LIMIT 20"
            )
        ]
        errors = [
            ChannelError(r["channel"], r["at"], r["text"])
            for r in await db.fetch("SELECT channel, at, text FROM channel_errors ORDER BY channel")
        ]
        counted = await db.fetchrow(
            "SELECT (SELECT COUNT(*) FROM conversations WHERE active = TRUE) AS c, "
            "(SELECT COUNT(*) FROM messages) AS m"
        )
        assert counted is not None
        return StatusSnapshot(
            await db.schema_version(),
            queued,
            running,
            prompts,
            jobs,
            upcoming,
            errors,
            counted["c"],
            counted["m"],
        )

    async def counts(self) -> StoreCounts:
        row = await self.db.fetchrow(
            "SELECT (SELECT COUNT(*) FROM confirmations WHERE state='pending') AS p, "
            "(SELECT COUNT(*) FROM jobs WHERE state IN ('running', 'resumed')) AS j"
        )
        assert row is not None
        db_bytes, wal_bytes = await self.db.size()
        return StoreCounts(row["p"], row["j"], db_bytes, wal_bytes)

    async def record_errors(self, errors: Sequence[ChannelError]) -> None:
        if not errors:
            return
        async with self.db.transaction():
            for e in errors:
                await self.db.execute(
                    "INSERT INTO channel_errors(channel, at, text) VALUES (?,?,?) "
                    "ON CONFLICT (channel) DO UPDATE SET at=excluded.at, text=excluded.text "
                    "WHERE excluded.at >= channel_errors.at",
                    e.channel,
                    e.at,
                    e.text,
                )
                await self.db.execute(
                    "INSERT INTO channel_error_counts(channel, minute, n) VALUES (?,?,?) "
                    "ON CONFLICT (channel, minute) DO UPDATE "
                    "SET n = channel_error_counts.n + excluded.n",
                    e.channel,
                    int(e.at // 60),
                    e.count,
                )
            await self.db.execute(  # a day is kept: the console shows the last hour
                "DELETE FROM channel_error_counts WHERE minute < ?", int(wall() // 60) - 1440
            )

    # -- what a restart resumes receiving from ---------------------------------------------
    # The rows of the instances' receiving parts (engine/store/postgres/_cluster.py), held by
    # nobody (instance 0): one process alone keeps them while it runs, and reads them at start.

    async def resume_points(self) -> dict[str, str]:
        rows = await self.db.fetch(
            "SELECT channel, resume FROM receivers WHERE instance = 0 AND resume IS NOT NULL"
        )
        return {r["channel"]: r["resume"] for r in rows}

    async def keep_resume_point(self, part: str, resume: str) -> None:
        await self.db.execute(
            "INSERT INTO receivers(channel, instance, since, resume) VALUES (?, 0, ?, ?) "
            "ON CONFLICT (channel) DO UPDATE SET resume = excluded.resume "
            "WHERE receivers.instance = 0",
            part,
            wall(),
            resume,
        )

    # -- bounded growth -------------------------------------------------------------------

    async def prune(self, settled_before: float, history_before: float | None = None) -> Pruned:
        t = settled_before
        write = self.db.execute
        async with self.db.transaction():
            inbox = await write("DELETE FROM inbox WHERE state='answered' AND received_at < ?", t)
            deliveries = await write(
                "DELETE FROM deliveries WHERE state <> 'pending' AND sent_at < ?", t
            )
            jobs = await write(
                f"DELETE FROM jobs WHERE state IN {_SETTLED_JOBS} "
                "AND COALESCE(finished_at, created_at) < ?",
                t,
            )
            runs = await write(
                f"DELETE FROM schedule_runs WHERE state IN {_SETTLED_RUNS} AND created_at < ?", t
            )
            decided = await write(
                f"DELETE FROM confirmations WHERE state IN {_DECIDED} AND created_at < ?", t
            )
            messages = 0
            if history_before is not None:
                messages = await self._trim(history_before)
                await drop_summaries_before(self.db)
        if inbox or messages:  # arrivals or messages the caches hold may be gone
            self.caches.drop()
        return Pruned(inbox, deliveries, jobs, runs, decided, messages)

    async def _trim(self, cut: float) -> int:
        """Delete each conversation's messages before its first user message from `cut` on (all
        of them when it has none): what remains starts at a user message, so every tool result
        keeps its call. Late parts of an exchange begun before the cut go with it."""
        deleted = 0
        for r in await self.db.fetch(_CUTS, cut, cut):
            deleted += await self.db.execute(
                "DELETE FROM messages WHERE conversation_id=? AND id < ?", r["c"], r["cut"]
            )
        return deleted

    async def compact(self) -> None:
        await self.db.compact()

    # -- forgetting -----------------------------------------------------------------------

    def on_forgot(self, listener: Callable[[], object]) -> None:
        self.db.on_notify(FORGOT, lambda _payload: listener())

    async def forget_user(
        self, channel: str | None, user_id: str, *, dry_run: bool = False
    ) -> Forgotten:
        forgotten = await forget_user(self.db, channel, user_id, dry_run=dry_run)
        if not dry_run:
            self.caches.drop()  # some conversations and grants may be gone
            await self.db.notify(FORGOT)  # what processes keep in memory about them goes
            if forgotten.access:  # an owner's approval went with the rest
                await self.db.notify(ACCESS)
        if forgotten.schedules and not dry_run:
            await self.schedules.changed()
        return forgotten


# Per conversation with messages from before the cut: the id its history is cut at.
_CUTS = """
SELECT old.c, COALESCE(
    (SELECT MIN(n.id) FROM messages n WHERE n.conversation_id = old.c AND n.role = 'user'
     AND n.created_at >= ?),
    (SELECT MAX(n.id) + 1 FROM messages n WHERE n.conversation_id = old.c)
) AS cut
FROM (SELECT DISTINCT conversation_id AS c FROM messages WHERE created_at < ?) AS old
"""


def _answering(n: int) -> str:
    return f"answering {n} message{'' if n == 1 else 's'}"


def _due(args: str) -> float | None:
    """A job's `at` argument (a reminder's time, ISO 8601) as unix time, if it has one."""
    try:
        at = json.loads(args).get("at")
        return datetime.fromisoformat(str(at).replace("Z", "+00:00")).timestamp() if at else None
    except (ValueError, AttributeError):
        return None
