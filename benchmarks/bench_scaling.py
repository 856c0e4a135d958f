"""What running as several instances costs, measured apart from what sharing the machine costs.

    .venv/bin/python benchmarks/bench_scaling.py [--instances 2 3 4] [--repeat 3]

`bench_instances.py` divides one instance's CPU per message by n instances' to say how n would
scale on n free cores. On a machine with fewer cores than processes that ratio also carries
what sharing the cores costs each process (a process that has to wait for a core, and finds its
caches cold, takes more CPU for the same work), which free cores would not. Here n *clustered*
instances (one PostgreSQL store, one Telegram bot) run against n *separate* ones (each its own
database and its own bot, a one-instance cluster each) on the same machine, with the same users
(30 × 40 messages from an instant model, spread over the separate bots), alternately: both
share the cores alike, so their CPU per message differs only by what clustering costs (handing
messages over, claims, signals). "× one, same load" is n × separate ÷ clustered: what n
instances would answer on n free cores, in units of one instance. The raw ratio against one
instance alone (as bench_instances.py computes it) and the system calls per message (reads and
writes, /proc/PID/io: the work, whatever the cores) are printed beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._crash_rig import (  # noqa: E402
    Daemon,
    Ledger,
    TokenModel,
    reaped,
    token,
    write_files,
)
from benchmarks.bench_instances import cpu_s  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI  # noqa: E402
from tests.fakes.telegram_server import FakeTelegram  # noqa: E402
from tests.postgres import PostgresServer  # noqa: E402

GROUP = 100_000  # each bot's tokens start at its number times this (q000001, q100001, ...)


@dataclass(frozen=True)
class Cost:
    cpu_ms: float  # the instances' CPU per message, together
    syscalls: float  # their read and write system calls per message


class Bot:
    """One Telegram bot's users: messages in, answers counted by the shared ledger."""

    def __init__(self, tg: FakeTelegram, ledger: Ledger, number: int) -> None:
        self.tg, self.ledger, self._n = tg, ledger, number * GROUP

    async def converse(self, chat: int, messages: int) -> None:
        for _ in range(messages):
            self._n += 1
            tok = token(self._n)
            self.tg.inject_message(chat, chat, f"{tok} hello")
            await self.ledger.wait_until(lambda t=tok: self.ledger.answered([t]), 60)


def syscalls(pid: int) -> int:
    fields = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    return int(fields["syscr"]) + int(fields["syscw"])


async def measure(n: int, clustered: bool, pg: PostgresServer, args: argparse.Namespace) -> Cost:
    bots = 1 if clustered else n
    urls = [pg.new_database(migrated=False) for _ in range(bots)]
    with tempfile.TemporaryDirectory() as tmp:
        async with contextlib.AsyncExitStack() as stack:
            tgs = [await stack.enter_async_context(FakeTelegram()) for _ in range(bots)]
            llm = await stack.enter_async_context(FakeOpenAI(default=TokenModel()))
            ledger = Ledger()
            for tg in tgs:
                tg.answer_listeners.append(ledger.see)
            daemons = []
            for i in range(n):
                bot = 0 if clustered else i
                (Path(tmp) / str(i)).mkdir()
                files = write_files(
                    Path(tmp) / str(i),
                    tgs[bot],
                    llm.base_url,
                    store_url=urls[bot],
                    instance=f"i{i}",
                )
                daemons.append(Daemon(files, tgs[bot]))
            users = [Bot(tg, ledger, number) for number, tg in enumerate(tgs)]
            async with reaped(daemons):
                if clustered:
                    await daemons[0].start()
                    await asyncio.gather(*(d.start(polls=False) for d in daemons[1:]))
                else:
                    await asyncio.gather(*(d.start() for d in daemons))
                pids = [d.pid for d in daemons if d.pid is not None]

                async def talk(messages: int) -> None:
                    await asyncio.gather(
                        *(users[u % bots].converse(50_000 + u, messages) for u in range(args.users))
                    )

                await talk(args.warmup)
                cpu0, calls0 = cpu_s(pids), sum(syscalls(p) for p in pids)
                await talk(args.messages)
                sent = args.users * args.messages
                cost = Cost(
                    (cpu_s(pids) - cpu0) / sent * 1000,
                    (sum(syscalls(p) for p in pids) - calls0) / sent,
                )
                for d in daemons:
                    await d.terminate()
    return cost


async def main_async(args: argparse.Namespace) -> None:
    pg = PostgresServer()
    pg.start()
    rows: dict[tuple[int, bool], list[Cost]] = {}
    try:
        for _ in range(args.repeat):
            for n in [1, *args.instances]:
                for clustered in (False, True) if n > 1 else (True,):
                    rows.setdefault((n, clustered), []).append(
                        await measure(n, clustered, pg, args)
                    )
    finally:
        pg.stop()

    def med(n: int, clustered: bool) -> Cost:
        costs = rows[(n, clustered)]
        return Cost(
            statistics.median(c.cpu_ms for c in costs), statistics.median(c.syscalls for c in costs)
        )

    one = med(1, True)
    print(f"{args.users} users × {args.messages} messages, instant model; medians of {args.repeat}")
    print(
        f"{'':14} {'clustered ms/msg':>16} {'separate ms/msg':>15} {'× one, same load':>16} "
        f"{'× one, raw':>10} {'syscalls/msg clustered':>22} {'separate':>8}"
    )
    print(
        f"{'1 instance':14} {one.cpu_ms:16.2f} {'-':>15} {'1.00':>16} {'1.00':>10} "
        f"{one.syscalls:22.1f} {'-':>8}"
    )
    for n in args.instances:
        c, s = med(n, True), med(n, False)
        print(
            f"{f'{n} instances':14} {c.cpu_ms:16.2f} {s.cpu_ms:15.2f} "
            f"{n * s.cpu_ms / c.cpu_ms:16.2f} {n * one.cpu_ms / c.cpu_ms:10.2f} "
            f"{c.syscalls:22.1f} {s.syscalls:8.1f}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=30)
    parser.add_argument("--messages", type=int, default=40, help="messages per user")
    parser.add_argument("--warmup", type=int, default=3, help="messages per user, not measured")
    parser.add_argument("--instances", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--repeat", type=int, default=3, help="runs, medians reported")
    asyncio.run(main_async(parser.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
