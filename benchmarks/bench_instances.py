"""Benchmark several instances on one PostgreSQL store against the fakes (issues 20 and 34).

    .venv/bin/python benchmarks/bench_instances.py [--instances 1 2 3 4] [--no-sqlite]

For 1 to 4 `relaybot run` processes on one PostgreSQL database (a server this script starts,
tests/postgres.py) and for 1 on SQLite: messages per second with an instant model (30 users × 10
messages, each user waiting for the answer before the next), the wall time until 100 users
writing at once are all answered by a model that takes 1 s, the same for 1,000 users (`--crowd`:
wall time, p50/p99 latency, CPU per message, the largest peak RSS), and, with more than one
instance, the takeover time: from the SIGKILL of an instance whose turns wait for the model
until the first answer in one of its chats. Every message's answers are counted (the crash
rig's tokens): lost and duplicated must both be 0.

All of it shares this machine's cores, so throughput alone cannot show how instances scale here;
the CPU each message costs the instances (together, and each one's share) and the PostgreSQL
server during the instant-model run can: n instances on n free cores answer n × (CPU per message
of one) / (CPU per message of n) times as many messages as one (the "× one" column), until the
database's share fills its own cores. `--repeat N` runs the whole table N times and prints each
figure's median.
"""

from __future__ import annotations

import argparse
import asyncio
import os
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
from tests.fakes.openai_server import FakeOpenAI  # noqa: E402
from tests.fakes.telegram_server import FakeTelegram  # noqa: E402
from tests.postgres import PostgresServer  # noqa: E402

TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def cpu_s(pids: list[int]) -> float:
    """utime + stime of these processes (those still alive)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total * TICK_S


def postgres_pids() -> list[int]:
    """The PostgreSQL server's processes (the postmaster and every backend)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().startswith("postgres"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


@dataclass
class Result:
    label: str
    per_s: float = 0.0
    burst_s: float = 0.0
    takeover_s: float | None = None
    lost: int = 0
    duplicated: int = 0
    cpu_ms: float = 0.0  # the instances' CPU per message, together
    db_cpu_ms: float = 0.0  # the PostgreSQL server's
    each_ms: tuple[float, ...] = ()  # each instance's CPU per message (of all the messages)
    crowd: tuple[float, ...] = ()  # --crowd users at once: wall s, p50 s, p99 s, CPU ms, MiB


class Run:
    def __init__(self, tg: FakeTelegram, model: TokenModel, ledger: Ledger) -> None:
        self.tg = tg
        self.model = model
        self.ledger = ledger
        self.sent: list[str] = []
        self._n = 0

    def say(self, chat: int) -> str:
        self._n += 1
        tok = token(self._n)
        self.tg.inject_message(chat, chat, f"{tok} hello")
        self.sent.append(tok)
        return tok

    async def answered(self, tokens: list[str], timeout: float = 120) -> None:
        await self.ledger.wait_until(lambda: self.ledger.answered(tokens), timeout)

    async def converse(self, chat: int, messages: int) -> None:
        for _ in range(messages):
            await self.answered([self.say(chat)])

    def counts(self) -> tuple[int, int]:
        per = [len(self.ledger.answers(t)) for t in self.sent]
        return sum(1 for n in per if n == 0), sum(n - 1 for n in per if n > 1)


async def measure(
    label: str, instances: int, pg: PostgresServer | None, args: argparse.Namespace
) -> Result:
    url = pg.new_database(migrated=False) if pg is not None else None
    loop = asyncio.get_running_loop()
    result = Result(label)
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeTelegram() as tg:
            model = TokenModel()
            async with FakeOpenAI(default=model) as llm:
                ledger = Ledger()
                tg.answer_listeners.append(ledger.see)
                names = [chr(ord("a") + i) for i in range(instances)]
                daemons = [
                    Daemon(
                        write_files(
                            Path(tmp), tg, llm.base_url, store_url=url, instance=n if url else ""
                        ),
                        tg,
                    )
                    for n in names
                ]
                run = Run(tg, model, ledger)
                async with reaped(daemons):
                    await daemons[0].start()
                    await asyncio.gather(*(d.start(polls=False) for d in daemons[1:]))
                    pids = [d.pid for d in daemons if d.pid is not None]
                    # warm up (what a process does once: imports, connections, caches) first
                    await asyncio.gather(
                        *(run.converse(20_000 + u, args.warmup) for u in range(args.users))
                    )
                    db_pids = postgres_pids() if pg is not None else []
                    each0 = [cpu_s([p]) for p in pids]
                    cpu0, db0, t0 = cpu_s(pids), cpu_s(db_pids), loop.time()
                    await asyncio.gather(
                        *(run.converse(20_000 + u, args.messages) for u in range(args.users))
                    )
                    n = args.users * args.messages
                    result.per_s = n / (loop.time() - t0)
                    result.cpu_ms = (cpu_s(pids) - cpu0) / n * 1000
                    result.each_ms = tuple(
                        (cpu_s([p]) - c) / n * 1000 for p, c in zip(pids, each0, strict=True)
                    )
                    # backends the pools opened meanwhile count whole
                    born = [p for p in postgres_pids() if p not in db_pids] if pg else []
                    db_cpu = cpu_s(db_pids) - db0 + cpu_s(born)
                    result.db_cpu_ms = db_cpu / n * 1000

                    model.delay_s = (1.0, 1.0)
                    t0 = loop.time()
                    burst = [run.say(30_000 + u) for u in range(args.burst)]
                    await run.answered(burst)
                    result.burst_s = loop.time() - t0
                    if args.crowd:
                        result.crowd = await crowd(run, pids, args.crowd)
                    model.delay_s = (0.0, 0.0)

                    if pg is not None and url is not None and instances > 1:
                        result.takeover_s = await takeover(run, daemons, pg, url, llm, args)
                    for d in daemons:
                        if d.running:
                            await d.terminate()
                result.lost, result.duplicated = run.counts()
    return result


async def crowd(run: Run, pids: list[int], n: int) -> tuple[float, ...]:
    """`n` users writing at once to the 1 s model: wall time, p50 and p99 latency, the
    instances' CPU per message, and the largest peak RSS of an instance."""
    loop = asyncio.get_running_loop()
    cpu0, t0 = cpu_s(pids), loop.time()
    tokens = [run.say(50_000 + u) for u in range(n)]
    await run.answered(tokens)
    wall, cpu = loop.time() - t0, cpu_s(pids) - cpu0
    took = sorted(run.ledger.answers(t)[0].accepted_at - t0 for t in tokens)
    peak = max(_kib(p, "VmHWM") for p in pids) / 1024
    return (
        wall,
        took[len(took) // 2],
        took[min(len(took) - 1, len(took) * 99 // 100)],
        (cpu / n * 1000),
        peak,
    )


def _kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return 0


async def takeover(
    run: Run,
    daemons: list[Daemon],
    pg: PostgresServer,
    url: str,
    llm: FakeOpenAI,
    args: argparse.Namespace,
) -> float:
    """SIGKILL the instance holding the most chats while every chat's turn waits for the
    model; the time until the first answer in one of the chats it held."""
    loop = asyncio.get_running_loop()
    database = url.split("/")[3].split("?")[0]
    run.model.gate.clear()
    before = len(llm.requests)
    chats = [40_000 + u for u in range(args.users)]
    tokens = {chat: run.say(chat) for chat in chats}
    await llm.wait_requests(before + len(chats), timeout=60)
    held = pg.psql(
        "SELECT i.name || ' ' || l.chat_id FROM chat_leases l JOIN instances i "
        "ON i.id = l.instance",
        database,
    ).split()
    owners = {  # chat id → instance name (of these chats: others may not be let go yet)
        chat: owner
        for chat, owner in zip(held[1::2], held[0::2], strict=True)
        if int(chat) in tokens
    }
    name = max(set(owners.values()), key=list(owners.values()).count)
    victim = next(d for d in daemons if d.files.instance == name)
    victim.kill_now()
    await victim.wait_dead()
    dead_at = loop.time()
    run.model.gate.set()
    await run.answered(list(tokens.values()))
    theirs = [tokens[int(chat)] for chat, owner in owners.items() if owner == name]
    return min(run.ledger.answers(t)[0].accepted_at for t in theirs) - dead_at


async def table(args: argparse.Namespace) -> list[Result]:
    results = [] if args.no_sqlite else [await measure("1 instance, SQLite", 1, None, args)]
    pg = PostgresServer()
    pg.start()
    try:
        for n in args.instances:
            label = f"{n} instance{'s' if n > 1 else ''}, PostgreSQL"
            results.append(await measure(label, n, pg, args))
    finally:
        pg.stop()
    return results


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def medians(runs: list[list[Result]]) -> list[Result]:
    """Each figure's median over the runs (lost and duplicated: the sum)."""
    out = []
    for rows in zip(*runs, strict=True):
        took = [r.takeover_s for r in rows if r.takeover_s is not None]
        each = [median([r.each_ms[i] for r in rows]) for i in range(len(rows[0].each_ms))]
        out.append(
            Result(
                rows[0].label,
                median([r.per_s for r in rows]),
                median([r.burst_s for r in rows]),
                median(took) if took else None,
                sum(r.lost for r in rows),
                sum(r.duplicated for r in rows),
                median([r.cpu_ms for r in rows]),
                median([r.db_cpu_ms for r in rows]),
                tuple(each),
                tuple(median(list(f)) for f in zip(*(r.crowd for r in rows), strict=True)),
            )
        )
    return out


def report(results: list[Result], args: argparse.Namespace) -> None:
    one = next((r for r in results if r.label.startswith("1 instance, Post")), None)
    print(
        f"{'':26} {'msg/s':>6} {'CPU ms/msg':>10} {'each instance':>24} {'db ms/msg':>9} "
        f"{'× one':>6} {f'{args.burst} users, LLM 1 s':>18} {'takeover':>9} {'lost':>4} {'dup':>4}"
    )
    for r in results:
        n = len(r.each_ms)
        took = f"{r.takeover_s:.1f} s" if r.takeover_s is not None else "-"
        db = f"{r.db_cpu_ms:.1f}" if r.db_cpu_ms else "-"
        each = " ".join(f"{ms:.1f}" for ms in r.each_ms) if n > 1 else "-"
        scale = f"{n * one.cpu_ms / r.cpu_ms:.2f}" if one and r.db_cpu_ms and r.cpu_ms else "-"
        print(
            f"{r.label:26} {r.per_s:6.0f} {r.cpu_ms:10.1f} {each:>24} {db:>9} {scale:>6} "
            f"{r.burst_s:16.2f} s {took:>9} {r.lost:4d} {r.duplicated:4d}"
        )
    if args.crowd:
        print(
            f"\n{args.crowd} users at once, LLM 1 s: all answered, p50, p99, CPU ms/msg, peak RSS"
        )
        for r in results:
            wall, p50, p99, cpu, peak = r.crowd
            print(
                f"{r.label:26} {wall:6.2f} s {p50:6.2f} s {p99:6.2f} s {cpu:6.1f} {peak:7.1f} MiB"
            )


async def main_async(args: argparse.Namespace) -> int:
    runs = []
    for number in range(args.repeat):
        runs.append(await table(args))
        if args.repeat > 1:
            print(f"run {number + 1} of {args.repeat}:")
            report(runs[-1], args)
    if args.repeat > 1:
        print(f"medians of {args.repeat} runs (lost and dup: the sums):")
    results = medians(runs)
    report(results, args)
    return 1 if any(r.lost or r.duplicated for r in results) else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=30)
    parser.add_argument("--messages", type=int, default=10, help="messages per user")
    parser.add_argument("--burst", type=int, default=100, help="users writing at once")
    parser.add_argument("--crowd", type=int, default=1000, help="more at once, later (0: none)")
    parser.add_argument("--instances", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--warmup", type=int, default=2, help="messages per user, not measured")
    parser.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only")
    parser.add_argument("--repeat", type=int, default=1, help="runs, medians reported")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
