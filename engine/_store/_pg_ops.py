"""Operating the PostgreSQL store: what is going on (`relaybot status`), the last error of each
channel, bounded growth (pruning settled rows, capping history by age), forgetting a user.

The same rows and answers as ``_sqlite_ops``, in PostgreSQL's dialect. Its status covers every
instance sharing the store. There is no WAL of relaybot's own to bound here: the server's is the
server's business (``max_wal_size``, its checkpoints), so :meth:`PgOps.compact` does nothing and
the database's size is what ``pg_database_size`` says.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine._store._pg_db import PgDb
from engine._store._pg_forget import drop_summaries_before, forget_user
from engine._store._pg_schedules import PgSchedules
from engine._store._records import (
    ChannelError,
    Forgotten,
    JobState,
    JobView,
    PendingPrompt,
    Pruned,
    QueuedChat,
    Running,
    StatusSnapshot,
    StoreCounts,
    UpcomingRun,
)
from engine._store._sqlite_ops import (
    _CUTS,
    _DECIDED,
    _SETTLED_JOBS,
    _SETTLED_RUNS,
    _answering,
    _due,
)


class PgOps:
    def __init__(self, db: PgDb, schedules: PgSchedules) -> None:
        self.db = db
        self.schedules = schedules

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
            "SELECT (SELECT COUNT(*) FROM conversations WHERE active) AS c, "
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
            "(SELECT COUNT(*) FROM jobs WHERE state IN ('running', 'resumed')) AS j, "
            "pg_database_size(current_database()) AS size"
        )
        assert row is not None
        return StoreCounts(row["p"], row["j"], row["size"], None)

    async def record_errors(self, errors: Sequence[ChannelError]) -> None:
        if not errors:
            return
        async with self.db.transaction():
            for e in errors:
                await self.db.execute(
                    "INSERT INTO channel_errors(channel, at, text) VALUES ($1,$2,$3) "
                    "ON CONFLICT (channel) DO UPDATE SET at=excluded.at, text=excluded.text "
                    "WHERE excluded.at >= channel_errors.at",
                    e.channel,
                    e.at,
                    e.text,
                )

    # -- bounded growth -------------------------------------------------------------------

    async def prune(self, settled_before: float, history_before: float | None = None) -> Pruned:
        t = settled_before
        run = self.db.execute
        async with self.db.transaction():
            inbox = await run("DELETE FROM inbox WHERE state='answered' AND received_at < $1", t)
            deliveries = await run(
                "DELETE FROM deliveries WHERE state <> 'pending' AND sent_at < $1", t
            )
            jobs = await run(
                f"DELETE FROM jobs WHERE state IN {_SETTLED_JOBS} "
                "AND COALESCE(finished_at, created_at) < $1",
                t,
            )
            runs = await run(
                f"DELETE FROM schedule_runs WHERE state IN {_SETTLED_RUNS} AND created_at < $1", t
            )
            decided = await run(
                f"DELETE FROM confirmations WHERE state IN {_DECIDED} AND created_at < $1", t
            )
            messages = 0
            if history_before is not None:
                messages = await self._trim(history_before)
                await drop_summaries_before(self.db)
        return Pruned(inbox, deliveries, jobs, runs, decided, messages)

    async def _trim(self, cut: float) -> int:
        """As ``SqliteOps._trim``: each conversation's messages before its first user message
        from `cut` on go (all of them when it has none)."""
        deleted = 0
        for r in await self.db.fetch(_CUTS.replace(":cut", "$1"), cut):
            deleted += await self.db.execute(
                "DELETE FROM messages WHERE conversation_id=$1 AND id < $2", r["c"], r["cut"]
            )
        return deleted

    async def compact(self) -> None:
        """Nothing: the server manages its own write-ahead log."""

    # -- forgetting -----------------------------------------------------------------------

    async def forget_user(
        self, channel: str | None, user_id: str, *, dry_run: bool = False
    ) -> Forgotten:
        forgotten = await forget_user(self.db, channel, user_id, dry_run=dry_run)
        if forgotten.schedules and not dry_run:
            await self.schedules.changed()
        return forgotten
