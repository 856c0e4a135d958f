# Left whole: one table family, what the instances share (liveness, chat leases, receivers,
# notices).
"""What several instances sharing one PostgreSQL database keep there: who is alive, who holds
each chat and each channel's receiving side, and the notifications between them.

An instance joins as a new row of ``instances`` (an *incarnation*: a process that lost the
database for too long joins again as a new one) and renews its heartbeat every second, in the
server's clock, so the instances' own clocks never matter. It is dead once its heartbeat is
older than its ``lease_s``; everything it held is tied to that one row, so one renewal keeps all
of it:

- ``chat_leases``: a chat is worked on by the instance holding its row. A free chat is claimed
  with ``INSERT … ON CONFLICT DO NOTHING`` (one claimer wins) and released when its work is
  done; a dead instance's chats are *adopted*, in one transaction, by the first live instance
  that sees it dead (``FOR UPDATE SKIP LOCKED``): its chats and its running jobs move to the
  adopter, which recovers them as a restart would;
- ``receivers``: one row per receiving part (a channel's polling, a Discord shard) names the
  instance that receives for it, and keeps what its next holder resumes from (a shard's gateway
  session: Discord sends the events it missed again);
- ``jobs.instance``: the background jobs each instance runs.

Work is announced with NOTIFY (sent at commit). What concerns every instance goes on
``relaybot_work``, which each one LISTENs to; a new message for a chat goes to one instance only,
on the channel of its own that each instance names in its row (``instances.channel``): the chat's
holder, found in the statement that notifies, else the chat's home (:meth:`PgCluster.hand_over`),
so an instance is not woken by the messages of chats it has nothing to do with. An instance
without a channel (an older relaybot, in a rolling upgrade) is told on ``relaybot_work``, as
before. What a missed notification would have said is still in the tables:
:meth:`PgCluster.orphans` claims every chat with unfinished work that nobody holds.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Collection, Sequence

from engine._clock import perf
from engine.store._chat._jobs import Incarnation
from engine.store._types._reports import Adoption, ServerInfo
from engine.store.postgres._db import PgDb

WORK = "relaybot_work"
_NOW = "extract(epoch FROM clock_timestamp())"
_ALIVE = f"i.heartbeat_at + i.lease_s >= {_NOW}"
_NOBODY = 0  # a receiving part nobody holds keeps its row: what to resume from
_LET_GO_RECEIVERS = f"UPDATE receivers SET instance = {_NOBODY} WHERE instance = $1"
# Chats with something left to do (the same as a restart looks for), less queued messages still
# held back by the rate limit (whoever held them queues them when the hold ends)
_WORK_CHATS = (
    "SELECT channel, chat_id FROM inbox WHERE state = 'taken' OR (state = 'queued' AND "
    f"(hold_until IS NULL OR hold_until <= {_NOW})) "
    "UNION SELECT channel, chat_id FROM deliveries WHERE state = 'pending' "
    "UNION SELECT channel, chat_id FROM confirmations WHERE state IN ('approved', 'executing') "
    "UNION SELECT channel, chat_id FROM jobs WHERE state = 'done' "
    "UNION SELECT s.channel, s.chat_id FROM schedule_runs r JOIN schedules s "
    "ON s.id = r.schedule_id WHERE r.state IN ('queued', 'running')"
)

# A chat's lease names an instance that exists (live, or dead and not yet adopted). One naming an
# instance that is gone (left by an earlier relaybot, whose claim could land after its instance
# was taken over) holds nothing: a claim or the sweep takes it.
_HELD_BY_ONE = (
    "SELECT 1 FROM chat_leases l JOIN instances h ON h.id = l.instance "
    "WHERE l.channel = w.channel AND l.chat_id = w.chat_id"
)
_TAKE_STRANDED = (
    "instance = excluded.instance, since = excluded.since WHERE chat_leases.instance = "
    "excluded.instance OR NOT EXISTS (SELECT 1 FROM instances g WHERE g.id = chat_leases.instance)"
)
# A claim locks its instance's row until it commits: an adoption (which deletes that row after
# moving its leases) waits for the claim, or the claim for it, and then finds no row and lands
# nothing. Without it a claim landing after the adoption left a lease naming a deleted instance.
_STILL_HERE = "FOR KEY SHARE OF i"

# Each chat signal in order (`n`): to the chat's holder, else its home, on that instance's own
# channel, or, for those not `alone` (and an older relaybot, or none named), on the shared one.
# Returns the instance each went to alone, if any.
_HAND_OVER = (
    "SELECT q.id, pg_notify(q.ch, q.payload) FROM (SELECT s.n, s.payload, CASE WHEN i.channel "
    f"IS NOT NULL THEN i.id END AS id, coalesce(i.channel, '{WORK}') AS ch FROM unnest($1::text[], "
    "$2::text[], $3::bigint[], $4::bool[], $5::text[]) WITH ORDINALITY AS "
    "s(channel, chat_id, home, alone, payload, n) LEFT JOIN instances i ON s.alone AND i.id = "
    "coalesce((SELECT l.instance FROM chat_leases l WHERE l.channel = s.channel AND "
    "l.chat_id = s.chat_id), s.home) ORDER BY s.n) q"
)


class PgCluster:
    def __init__(self, db: PgDb, incarnation: Incarnation) -> None:
        self.db = db
        self._incarnation = incarnation  # the store's: the jobs this process starts name it
        self.address = f"{WORK}_{secrets.token_hex(8)}"  # this process's own channel

    @property
    def incarnation(self) -> int | None:
        return self._incarnation.id

    def _me(self) -> int:
        if self._incarnation.id is None:
            raise RuntimeError("this instance has not joined")
        return self._incarnation.id

    # -- liveness -------------------------------------------------------------------------

    async def join(self, name: str, lease_s: float) -> int:
        """Register this process as a new live instance; returns its incarnation id."""
        self._incarnation.id = int(
            await self.db.fetchval(
                "INSERT INTO instances(name, lease_s, started_at, heartbeat_at, channel) "
                f"VALUES ($1, $2, {_NOW}, {_NOW}, $3) RETURNING id",
                name,
                lease_s,
                self.address,
            )
        )
        return self._incarnation.id

    async def heartbeat(self, timeout: float) -> bool:
        """Renew this instance's lease; False when it was found dead and taken over."""
        sql = f"UPDATE instances SET heartbeat_at = {_NOW} WHERE id = $1"
        return await self.db.on_listener(sql, self._me(), timeout=timeout) == 1

    async def live(self) -> tuple[int, ...]:
        rows = await self.db.fetch(f"SELECT i.id FROM instances i WHERE {_ALIVE} ORDER BY i.id")
        return tuple(int(r["id"]) for r in rows)

    async def leave(self) -> None:
        """A clean stop: what this instance still holds is taken over at once by another."""
        me = self._me()
        async with self.db.transaction():
            await self.db.execute(_LET_GO_RECEIVERS, me)
            await self.db.execute("UPDATE instances SET heartbeat_at = 0 WHERE id = $1", me)

    async def adopt(self, channels: Sequence[str]) -> Adoption | None:
        """Take over one dead instance, if any: its chats (of `channels`, the ones this
        instance serves; the others are let go) and its running jobs become this instance's,
        in one transaction (of several instances seeing it dead, one adopts it)."""
        me = self._me()
        async with self.db.transaction():
            dead = await self.db.fetchrow(
                f"SELECT id, name FROM instances i WHERE NOT ({_ALIVE}) AND id <> $1 "
                "ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED",
                me,
            )
            if dead is None:
                return None
            chats = await self.db.fetch(
                "UPDATE chat_leases SET instance = $1, since = "
                f"{_NOW} WHERE instance = $2 AND channel = ANY($3::text[]) "
                "RETURNING channel, chat_id",
                me,
                dead["id"],
                list(channels),
            )
            await self.db.execute("DELETE FROM chat_leases WHERE instance = $1", dead["id"])
            jobs = await self.db.fetch(
                "UPDATE jobs SET instance = $1 WHERE instance = $2 "
                "AND state IN ('running', 'resumed') RETURNING id",
                me,
                dead["id"],
            )
            await self.db.execute(_LET_GO_RECEIVERS, dead["id"])
            await self.db.execute("DELETE FROM instances WHERE id = $1", dead["id"])
        return Adoption(
            dead["name"],
            tuple((r["channel"], r["chat_id"]) for r in chats),
            tuple(r["id"] for r in jobs),
        )

    async def unheld(self, channels: Sequence[str]) -> frozenset[tuple[str, str]]:
        """The chats (of `channels`) with unfinished work that no instance holds."""
        rows = await self.db.fetch(
            f"SELECT w.channel, w.chat_id FROM ({_WORK_CHATS}) w WHERE w.channel = ANY($1::text[]) "
            f"AND NOT EXISTS ({_HELD_BY_ONE})",
            list(channels),
        )
        return frozenset((r["channel"], r["chat_id"]) for r in rows)

    async def orphans(self, chats: Collection[tuple[str, str]]) -> Adoption:
        """Claim those of `chats` that still have unfinished work no instance holds, and every
        running job that no live instance runs (a store copied from SQLite, say)."""
        me = self._me()
        pairs = sorted(chats)
        chats_taken = (
            []
            if not pairs
            else await self.db.fetch(
                "INSERT INTO chat_leases(channel, chat_id, instance, since) "
                f"SELECT w.channel, w.chat_id, $1, {_NOW} FROM ({_WORK_CHATS}) w "
                "JOIN unnest($2::text[], $3::text[]) AS s(channel, chat_id) "
                "ON s.channel = w.channel AND s.chat_id = w.chat_id JOIN instances i ON i.id = $1 "
                f"WHERE NOT EXISTS ({_HELD_BY_ONE}) {_STILL_HERE} "
                f"ON CONFLICT (channel, chat_id) DO UPDATE SET {_TAKE_STRANDED} "
                "RETURNING channel, chat_id",
                me,
                [c for c, _ in pairs],
                [i for _, i in pairs],
            )
        )
        jobs = await self.db.fetch(
            "UPDATE jobs SET instance = $1 WHERE state IN ('running', 'resumed') AND "
            "(instance IS NULL OR NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = "
            "jobs.instance)) RETURNING id",
            me,
        )
        return Adoption(
            "",
            tuple((r["channel"], r["chat_id"]) for r in chats_taken),
            tuple(r["id"] for r in jobs),
        )

    # -- chats ----------------------------------------------------------------------------

    async def claim(self, channel: str, chat_id: str) -> bool:
        """Hold a chat nobody holds (or this instance holds already, say after a release that
        did not reach the database, or a lease names an instance that is gone); False when
        another instance (live or not yet adopted) holds it, or this one was taken over."""
        return (
            await self.db.execute(
                "INSERT INTO chat_leases(channel, chat_id, instance, since) "
                f"SELECT $1, $2, i.id, {_NOW} FROM instances i WHERE i.id = $3 {_STILL_HERE} "
                f"ON CONFLICT (channel, chat_id) DO UPDATE SET {_TAKE_STRANDED}",
                channel,
                chat_id,
                self._me(),
            )
            == 1
        )

    async def release(self, channel: str, chat_id: str) -> None:
        await self.db.execute(
            "DELETE FROM chat_leases WHERE channel = $1 AND chat_id = $2 AND instance = $3",
            channel,
            chat_id,
            self._me(),
        )

    async def holder(self, channel: str, chat_id: str) -> str | None:
        """The name of the live instance holding the chat, if any."""
        return await self.db.fetchval(
            "SELECT i.name FROM chat_leases l JOIN instances i ON i.id = l.instance "
            f"WHERE l.channel = $1 AND l.chat_id = $2 AND {_ALIVE}",
            channel,
            chat_id,
        )

    # -- receiving ------------------------------------------------------------------------

    async def receive(self, parts: Sequence[str]) -> dict[str, str | None]:
        """Hold those of `parts` (receiving parts: a channel's polling, a shard) that no live
        instance holds, keeping those held here. Returns the ones held here, each with what
        its last holder left to resume from."""
        rows = await self.db.fetch(
            "INSERT INTO receivers(channel, instance, since) "
            f"SELECT part, $2, {_NOW} FROM unnest($1::text[]) AS part "
            "ON CONFLICT (channel) DO UPDATE SET instance = excluded.instance, since = CASE "
            "WHEN receivers.instance = excluded.instance THEN receivers.since "
            "ELSE excluded.since END WHERE receivers.instance = excluded.instance OR NOT EXISTS "
            f"(SELECT 1 FROM instances i WHERE i.id = receivers.instance AND {_ALIVE}) "
            "RETURNING channel, resume",
            list(parts),
            self._me(),
        )
        return {r["channel"]: r["resume"] for r in rows}

    async def checkpoint(self, part: str, resume: str | None) -> None:
        """Keep what another instance would resume `part` from if this one died now."""
        await self.db.execute(
            "UPDATE receivers SET resume = $3 WHERE channel = $1 AND instance = $2",
            part,
            self._me(),
            resume,
        )

    async def stop_receiving(self, part: str, resume: str | None = None) -> None:
        """Let go of `part`, leaving `resume` for its next holder."""
        await self.db.execute(
            f"UPDATE receivers SET instance = {_NOBODY}, resume = $3 "
            "WHERE channel = $1 AND instance = $2",
            part,
            self._me(),
            resume,
        )

    # -- notifications --------------------------------------------------------------------

    async def publish(self, payload: str) -> None:
        """Tell every instance (this one too) about work; delivered at commit."""
        await self.db.execute("SELECT pg_notify($1, $2)", WORK, payload)

    async def hand_over(
        self, signals: Sequence[tuple[str, str, int | None, bool, str]]
    ) -> list[int | None]:
        """Publish chat signals ``(channel, chat_id, home, alone, payload)``, in order, in one
        statement: those `alone` to the chat's holder, else instance `home`, on its own channel
        (it alone hears them), the others to every instance. Returns, for each, the instance it
        went to alone (None: every instance was told)."""
        rows = await self.db.fetch(
            _HAND_OVER,
            [s[0] for s in signals],
            [s[1] for s in signals],
            [s[2] for s in signals],
            [s[3] for s in signals],
            [s[4] for s in signals],
        )
        return [None if r["id"] is None else int(r["id"]) for r in rows]

    def on_signal(self, listener: Callable[[str], None]) -> None:
        self.db.on_notify(WORK, listener)

    def on_addressed(self, listener: Callable[[str], None]) -> None:
        """`listener` hears what is addressed to this instance alone (:meth:`hand_over`)."""
        self.db.on_notify(self.address, listener)

    def on_reconnect(self, hook: Callable[[], Awaitable[None]]) -> None:
        self.db.on_reconnect(hook)

    async def listen(self) -> None:
        await self.db.listen()

    async def server(self) -> ServerInfo:
        """The server's version, the round trip's time, the live instances and what each
        receives (for doctor and status)."""
        trips = []
        for _ in range(5):
            started = perf()
            await self.db.fetchval("SELECT 1")
            trips.append(perf() - started)
        version = await self.db.fetchval("SHOW server_version")
        names = await self.db.fetch(f"SELECT name FROM instances i WHERE {_ALIVE} ORDER BY id")
        receiving = await self.db.fetch(
            "SELECT r.channel, i.name FROM receivers r JOIN instances i ON i.id = r.instance "
            f"WHERE {_ALIVE} ORDER BY r.channel"
        )
        return ServerInfo(
            str(version),
            sorted(trips)[len(trips) // 2],
            tuple(r["name"] for r in names),
            tuple((r["channel"], r["name"]) for r in receiving),
        )
