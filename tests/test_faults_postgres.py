"""PostgreSQL restarted mid-burst under two instances (issue 34), real daemons on a real server.

Two `relaybot run` instances share a store (the rig of tests/test_instances.py); a burst over
12 chats waits at the model's gate when the server is stopped (`pg_ctl stop -m fast`: every
connection is cut), more messages arrive while it is down, then it starts again and the model
answers. The server comes back at once, or after the instances' leases ran out (each then
stops working on its chats and joins again, as after a restart). Every message is answered
exactly once and in order per chat; each instance says once that the database is unreachable,
with no traceback and no storm (its warnings do not grow with the number of chats).

PostgreSQL failed over mid-burst: a primary and its synchronous streaming-replication standby
(tests/postgres.py, both on 127.0.0.1), the instances' URL naming both hosts. The primary
crashes while answers are flowing, the standby is promoted, and the instances carry on on it:
nothing lost or repeated, no cost uncounted, a few log lines. The store on its own: it never
takes a standby for the store, and a write a standby refuses is the store being unavailable.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks._crash_rig import wait_for_log
from engine.store import Spent
from engine.store.postgres import PgStore
from tests.postgres import PostgresServer, start_pair_or_skip
from tests.test_faults_store import log_records
from tests.test_instances import (  # noqa: F401 (the fixture)
    WAIT_S,
    Cluster,
    cluster,
    running_cluster,
)
from tools.errors import StoreUnavailable

CHATS = tuple(range(7101, 7113))
NAMES = ("a", "b")


@pytest.mark.parametrize("past_lease", [False, True], ids=["at-once", "past-the-lease"])
async def test_postgres_restarted_mid_burst_loses_nothing_and_repeats_nothing(
    cluster: Cluster,  # noqa: F811
    past_lease: bool,
) -> None:
    await cluster.daemons["a"].start()  # the first one receives
    await cluster.daemons["b"].start(polls=False)
    cluster.model.gate.clear()
    for chat in CHATS:
        cluster.say(chat)
    await cluster.llm.wait_requests(len(CHATS), timeout=WAIT_S)  # every turn at the model
    await cluster.recorded()
    loop = asyncio.get_running_loop()
    down_at = loop.time()
    await asyncio.to_thread(cluster.pg.halt)
    for chat in CHATS[:6]:
        cluster.say(chat)  # waits at Telegram, or in the receiving instance, until it is back
    for name in NAMES:
        await wait_for_log(cluster.daemons[name].files.log, "database is unreachable", WAIT_S)
        if past_lease:  # each instance gave its chats up: its lease may have run out
            await wait_for_log(cluster.daemons[name].files.log, "stops working on", WAIT_S)
    await asyncio.to_thread(cluster.pg.resume)
    down_s = loop.time() - down_at
    cluster.model.gate.set()
    for chat in CHATS[6:]:
        cluster.say(chat)
    last = [toks[-1] for toks in cluster.said.values()]
    await cluster.until(lambda: cluster.ledger.answered(last), 2 * WAIT_S)
    answered_s = loop.time() - down_at
    await cluster.stop_all()
    cluster.assert_each_answered_once_in_order()
    counts = quiet_logs(cluster, "database is unreachable")
    said = sum(len(t) for t in cluster.said.values())
    print(
        f"postgres restarted mid-burst ({'past' if past_lease else 'within'} the lease): "
        f"down {down_s:.1f} s, {said} messages over 2 instances "
        f"answered once each {answered_s:.1f} s after the stop; warnings+errors per instance "
        f"{counts}"
    )


def quiet_logs(rig: Cluster, outage: str, *, at_most: int | None = None) -> dict[str, int]:
    """Each instance said `outage` once (`at_most`: no more than that), with no traceback and
    no storm (its warnings do not grow with the number of chats); returns how many warnings and
    errors each logged."""
    counts = {}
    for name in NAMES:
        records = log_records(rig.daemons[name].files.log)
        lines = [
            str(r["msg"])
            for r in records
            if r.get("level") in ("WARNING", "ERROR") and "has no price" not in str(r["msg"])
        ]  # the fake model's missing price is said once and is not about the outage
        counts[name] = len(lines)
        down = [m for m in lines if outage in m]
        assert len(down) <= at_most if at_most is not None else len(down) == 1, (name, lines)
        assert len(lines) <= 6, f"{name}: a line per chat? {lines}"  # not 12 and more
        assert not [r for r in records if "exc" in r], rig.daemons[name].log_tail()
    return counts


@pytest.fixture
def pair() -> Iterator[tuple[PostgresServer, PostgresServer]]:
    """A primary and its synchronous standby (tests/postgres.py), both on 127.0.0.1."""
    primary, standby = start_pair_or_skip()
    try:
        yield primary, standby
    finally:
        primary.stop()
        standby.stop()


@pytest.mark.parametrize("attrs", ["read-write", "any"])
async def test_postgres_failed_over_mid_burst_loses_nothing_and_repeats_nothing(
    pair: tuple[PostgresServer, PostgresServer], tmp_path: Path, attrs: str
) -> None:
    """Two instances on a URL that names a primary and its standby. While a burst is being
    answered (the model takes up to 0.1 s a turn), the primary crashes (`pg_ctl stop -m
    immediate`: every connection cut under the turns in flight); more messages come; once the
    receiving instance has said it cannot record them, the standby is promoted. The instances
    find the new primary by themselves: with ``target_session_attrs=read-write`` (the
    documented form) none is taken until it is promoted; with ``any`` the standby is taken at
    once and refuses every write until then.
    Every message is answered exactly once and in order per chat, every request the model
    answered is counted in the day's spending, and each instance's log is a few lines."""
    primary, standby = pair
    database = primary.new_database(migrated=False).split("/")[3].split("?")[0]
    url = _hosts(primary, standby, database=database, attrs=attrs)
    async with running_cluster(primary, url, tmp_path) as rig:
        rig.model.delay_s, rig.model.rng = (0.0, 0.1), random.Random(34)
        loop = asyncio.get_running_loop()
        crash: list[asyncio.Future[None]] = []

        def crash_at_the_third(_: object) -> None:
            if len(rig.ledger.deliveries) >= 3 and not crash:
                crash.append(asyncio.ensure_future(asyncio.to_thread(primary.halt, "immediate")))

        await rig.daemons["a"].start()  # the first one receives
        await rig.daemons["b"].start(polls=False)
        rig.ledger.listeners.append(crash_at_the_third)
        for _ in range(4):
            for chat in CHATS:
                rig.say(chat)
        await rig.until(lambda: bool(crash))
        down_at = loop.time()
        await crash[0]
        for chat in CHATS:
            rig.say(chat)  # fetched by a, which cannot record them: not confirmed
        await wait_for_log(rig.daemons["a"].files.log, "updates not confirmed", WAIT_S)
        await asyncio.to_thread(standby.promote)
        promoted_at = loop.time()
        rig.pg = standby
        await rig.until(
            lambda: any(d.accepted_at > promoted_at for d in rig.ledger.deliveries), WAIT_S
        )
        first_s = loop.time() - promoted_at
        last = [toks[-1] for toks in rig.said.values()]
        await rig.until(lambda: rig.ledger.answered(last), 2 * WAIT_S)
        answered_s = loop.time() - down_at
        await rig.stop_all()
        rig.assert_each_answered_once_in_order()
        counts = quiet_logs(rig, "database is unreachable", at_most=1)
        charged = int(rig.sql("SELECT sum(requests) FROM spend"))
        # none lost; a charge cut off with its connection may have committed on the standby and
        # be made again: one per instance was seen (32 charged for 30 requests, two instances)
        assert len(rig.llm.requests) <= charged <= len(rig.llm.requests) + len(rig.daemons)
    said = sum(len(t) for t in rig.said.values())
    print(
        f"postgres failed over mid-burst ({attrs}): down {promoted_at - down_at:.1f} s, first "
        f"answer {first_s:.2f} s after the promotion, {said} messages over 2 instances "
        f"answered once each {answered_s:.1f} s after the crash, {charged} requests charged; "
        f"warnings+errors per instance {counts}"
    )


COST = Spent("m", 1, 10, 2, 0, 0, 0.0, 5)


def _hosts(*servers: PostgresServer, database: str, attrs: str = "") -> str:
    """A URL naming `servers` in that order (libpq's multi-host form)."""
    hosts = ",".join(f"127.0.0.1:{s.port}" for s in servers)
    query = f"?target_session_attrs={attrs}" if attrs else ""
    return f"postgresql://postgres@{hosts}/{database}{query}"


async def test_the_store_writes_to_whichever_host_takes_writes(
    pair: tuple[PostgresServer, PostgresServer],
) -> None:
    """The store never takes a standby for the store: a URL naming the standby first opens on
    the primary (relaybot asks for read-write when the URL does not say), and a read-only look
    (`relaybot status`) opens on a URL that asks for read-write. A URL that asks for any server
    lands on the standby once the primary is gone: its writes are refused there, which is the
    store being unavailable (retried, never lost), until the standby is promoted. A counter
    (what a request cost) written meanwhile is kept and written once the store takes writes."""
    primary, standby = pair
    database = primary.new_database().split("/")[3].split("?")[0]
    async with PgStore(_hosts(standby, primary, database=database)) as store:
        assert await store.cluster.join("a", 5) > 0  # written on the primary
    async with PgStore(
        _hosts(primary, standby, database=database, attrs="read-write"), readonly=True
    ) as look:
        assert (await look.cluster.server()).instances == ("a",)
    only_standby = _hosts(standby, database=database)
    with pytest.raises(StoreUnavailable, match="has no server that takes writes now"):
        await PgStore(only_standby).open()
    async with PgStore(_hosts(primary, standby, database=database, attrs="any")) as store:
        await asyncio.to_thread(primary.halt, "immediate")
        refused = []
        for _ in range(2):  # the old primary's connection is gone; the next is the standby's
            with pytest.raises(StoreUnavailable) as failed:
                await store.cluster.join("b", 5)
            refused.append(str(failed.value))
        assert "refuses writes (cannot execute INSERT in a read-only transaction)" in refused[-1]
        await store.spend.add("t", "c1", "u1", "2030-01-01", "m", COST)  # kept, not refused
        await asyncio.to_thread(standby.promote)
        assert await store.cluster.join("b", 5) > 0
        await store.spend.add("t", "c1", "u1", "2030-01-01", "m", COST)
    # closed: what was kept is written by now
    assert standby.psql("SELECT string_agg(name, ',' ORDER BY id) FROM instances", database) == (
        "a,b"
    )
    assert standby.psql("SELECT requests, prompt_tokens FROM spend", database) == "2|20"
