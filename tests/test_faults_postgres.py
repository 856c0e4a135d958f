"""PostgreSQL restarted mid-burst under two instances (issue 34), real daemons on a real server.

Two `relaybot run` instances share a store (the rig of tests/test_instances.py); a burst over
12 chats waits at the model's gate when the server is stopped (`pg_ctl stop -m fast`: every
connection is cut), more messages arrive while it is down, then it starts again and the model
answers. The server comes back at once, or after the instances' leases ran out (each then
stops working on its chats and joins again, as after a restart). Every message is answered
exactly once and in order per chat; each instance says once that the database is unreachable,
with no traceback and no storm (its warnings do not grow with the number of chats).
"""

from __future__ import annotations

import asyncio

import pytest

from benchmarks._crash_rig import wait_for_log
from tests.test_faults_store import log_records
from tests.test_instances import WAIT_S, Cluster, cluster  # noqa: F401 (the fixture)

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
    counts = {}
    for name in NAMES:
        records = log_records(cluster.daemons[name].files.log)
        lines = [
            str(r["msg"])
            for r in records
            if r.get("level") in ("WARNING", "ERROR") and "has no price" not in str(r["msg"])
        ]  # the fake model's missing price is said once and is not about the outage
        counts[name] = len(lines)
        down = [m for m in lines if "database is unreachable" in m]
        assert len(down) == 1, f"{name}: {lines}"
        assert len(lines) <= 6, f"{name}: a line per chat? {lines}"  # not 12 and more
        assert not [r for r in records if "exc" in r], cluster.daemons[name].log_tail()
    said = sum(len(t) for t in cluster.said.values())
    print(
        f"postgres restarted mid-burst ({'past' if past_lease else 'within'} the lease): "
        f"down {down_s:.1f} s, {said} messages over 2 instances "
        f"answered once each {answered_s:.1f} s after the stop; warnings+errors per instance "
        f"{counts}"
    )
