"""PostgreSQL restarted mid-burst under two instances (issue 34), real daemons on a real server.

Two `relaybot run` instances share a store (the rig of tests/test_instances.py); a burst over
12 chats waits at the model's gate when the server is stopped (`pg_ctl stop -m fast`: every
connection is cut), more messages arrive while it is down, then it starts again and the model
answers. The server comes back at once, or after the instances' leases ran out (each then
stops working on its chats and joins again, as after a restart). Every message is answered
exactly once and in order per chat; each instance says once that the database is unreachable,
with no traceback and no storm (its warnings do not grow with the number of chats).

PostgreSQL failed over: a primary and its synchronous streaming-replication standby
(tests/postgres.py, both on 127.0.0.1), the store's URL naming both hosts. The store never
takes a standby for the store, and a write a standby refuses is the store being unavailable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from benchmarks._crash_rig import wait_for_log
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
    store being unavailable (retried, never lost), until the standby is promoted."""
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
        await asyncio.to_thread(standby.promote)
        assert await store.cluster.join("b", 5) > 0
    assert standby.psql("SELECT string_agg(name, ',' ORDER BY id) FROM instances", database) == (
        "a,b"
    )
