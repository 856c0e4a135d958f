"""Benchmark the Telegram channel: `relaybot run` against the fake Bot API and the fake LLM.

    .venv/bin/python benchmarks/bench_telegram.py

The fakes run in this script's event loop; the daemon is a subprocess, so its CPU and memory
are its own (read from /proc). Prints start-up time to the first getUpdates, idle RSS, the wall
time for 100 users writing at once to a model that takes 1 s, messages per second, CPU per
message and store round trips per message (RELAYBOT_STORE_TRIPS, engine/store/sqlite/_trips.py)
for 30 users × 10 messages with an instant model, then (--crowd) 1,000 users writing at once to
the 1 s model: wall time, p50/p99 latency, CPU per message and peak RSS; and how many messages
got no answer.

relaybot's bytecode is compiled first, as an installed relaybot has it (pip compiles it at
install). A checkout run with PYTHONDONTWRITEBYTECODE=1 has none, and every start would then
compile relaybot's ~1 MB of source again (~0.1 s) before anything else: --from-source measures
that.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.openai_server import FakeOpenAI  # noqa: E402
from tests.fakes.telegram_server import Call, FakeTelegram  # noqa: E402

TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def write_config(directory: Path, tg: FakeTelegram, llm: FakeOpenAI) -> Path:
    path = directory / "config.toml"
    path.write_text(
        f"""
[llm]
base_url = "{llm.base_url}"
api_key = "sk-bench-0123456789"
model = "fake-model"
max_retries = 0

[storage]
path = "{directory / "relaybot.db"}"

[telegram]
enabled = true
token = "{tg.token}"
api_base_url = "{tg.base_url}"
allowed_users = ["*"]
poll_timeout_s = 10

[tools]
builtins = []

[log]
level = "INFO"
""",
        encoding="utf-8",
    )
    return path


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_S  # utime + stime


async def settled_rss(pid: int) -> int:
    """RSS once two readings half a second apart differ by less than 1 %."""
    previous = rss_kib(pid)
    for _ in range(20):
        await asyncio.sleep(0.5)  # a measurement interval, not a synchronisation
        current = rss_kib(pid)
        if abs(current - previous) < previous / 100:
            return current
        previous = current
    return previous


class Trips:
    """The daemon's store round trips (hand-offs to the SQLite thread) so far: it counts them
    when RELAYBOT_STORE_TRIPS names a file, and appends the count to it on SIGUSR2."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pid = 0

    def env(self) -> dict[str, str]:
        return {**os.environ, "RELAYBOT_STORE_TRIPS": str(self.path)}

    async def now(self) -> int | None:
        """The count so far; None from a daemon that does not count (an older relaybot)."""
        if not (ROOT / "engine" / "store" / "sqlite" / "_trips.py").exists():
            return None  # SIGUSR2 would end it
        lines = self._lines()
        os.kill(self.pid, signal.SIGUSR2)
        for _ in range(200):  # the daemon writes the line as soon as its main thread runs
            if len(self._lines()) > len(lines):
                return int(self._lines()[-1])
            await asyncio.sleep(0.01)
        return None

    def _lines(self) -> list[str]:
        try:
            return self.path.read_text().splitlines()
        except FileNotFoundError:
            return []


class Users:
    """Simulated Telegram users; every message waits for the reply that answers it (told by the
    fake Bot API as it answers a sendMessage, so a thousand waiting cost nothing)."""

    def __init__(self, tg: FakeTelegram) -> None:
        self.tg = tg
        self.sent = 0
        self.unanswered = 0
        self.latencies: list[float] = []
        self._waiting: dict[int, asyncio.Future[None]] = {}
        tg.answer_listeners.append(self._answered)

    def _answered(self, call: Call, result: object) -> None:
        if call.method != "sendMessage" or call.status != 200:
            return
        replied = (call.params.get("reply_parameters") or {}).get("message_id")
        waiting = self._waiting.pop(int(replied), None) if replied is not None else None
        if waiting is not None and not waiting.done():
            waiting.set_result(None)

    async def say(self, user: int, text: str, timeout: float = 30) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        update = self.tg.inject_message(user, user, text)
        self.sent += 1
        answered = self._waiting[update["message"]["message_id"]] = loop.create_future()
        try:
            await asyncio.wait_for(answered, timeout)
            self.latencies.append(loop.time() - started)
        except TimeoutError:
            self.unanswered += 1

    async def converse(self, user: int, messages: int) -> None:
        for i in range(messages):
            await self.say(user, f"message {i} from {user}")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM")


async def crowd(users: Users, pid: int, n: int, first_user: int, label: str) -> float:
    """`n` users writing at once (each their first message), the model taking 1 s: wall time,
    latency, CPU per message and peak RSS; returns the wall time."""
    loop = asyncio.get_running_loop()
    users.latencies.clear()
    unanswered, cpu0, t0 = users.unanswered, cpu_s(pid), loop.time()
    await asyncio.gather(*(users.say(first_user + u, "hello", timeout=60) for u in range(n)))
    wall, cpu = loop.time() - t0, cpu_s(pid) - cpu0
    lat = users.latencies
    print(
        f"{label}: {wall:.2f} s until all answered, latency p50 {percentile(lat, 0.5):.2f} s "
        f"p99 {percentile(lat, 0.99):.2f} s, daemon CPU {cpu / n * 1000:.1f} ms/message, "
        f"peak RSS {peak_rss_kib(pid) / 1024:.1f} MiB, unanswered "
        f"{users.unanswered - unanswered} of {n}"
    )
    return wall


async def run(args: argparse.Namespace) -> int:
    loop = asyncio.get_running_loop()
    async with FakeTelegram() as tg, FakeOpenAI() as llm:
        with tempfile.TemporaryDirectory() as tmp:
            config = write_config(Path(tmp), tg, llm)
            log_path = Path(tmp) / "daemon.log"
            with log_path.open("wb") as log:
                started = loop.time()
                profile = ["-m", "cProfile", "-o", args.profile] if args.profile else []
                trips = Trips(Path(tmp) / "trips")
                proc = await asyncio.create_subprocess_exec(
                    sys.executable,
                    *profile,
                    "-m",
                    "bot",
                    "run",
                    "-c",
                    str(config),
                    cwd=ROOT,
                    stdout=log,
                    stderr=log,
                    env=trips.env(),
                )
                trips.pid = proc.pid
                try:
                    code = await measure(args, tg, llm, proc.pid, started, trips)
                finally:
                    if proc.returncode is None:
                        stopping = loop.time()
                        proc.send_signal(signal.SIGTERM)
                        status = await asyncio.wait_for(proc.wait(), 30)
                        print(
                            f"shutdown on SIGTERM:          {loop.time() - stopping:.2f} s "
                            f"(exit code {status})"
                        )
            text = log_path.read_text(errors="replace")
            print(f"bot token in the daemon's log: {'YES' if tg.token in text else 'no'}")
            if args.show_log:
                print(text)
    return code


async def measure(
    args: argparse.Namespace,
    tg: FakeTelegram,
    llm: FakeOpenAI,
    pid: int,
    started: float,
    trips: Trips,
) -> int:
    first_poll = await tg.wait_for_call("getUpdates", timeout=60)
    print(f"start to first getUpdates:    {first_poll.at - started:.2f} s (target <= 0.5 s)")
    print(f"idle RSS:                     {await settled_rss(pid) / 1024:.1f} MiB (target <= 72)")

    users = Users(tg)
    llm.delay_s = 1.0
    t0 = asyncio.get_running_loop().time()
    await asyncio.gather(*(users.say(10_000 + u, "hello") for u in range(args.burst)))
    burst = asyncio.get_running_loop().time() - t0
    print(
        f"{args.burst} users at once, LLM 1 s:    {burst:.2f} s until all answered "
        f"(target <= 1.3 s)"
    )

    llm.delay_s = 0.0
    trips0 = await trips.now()
    cpu0, own0, t0 = cpu_s(pid), time.process_time(), asyncio.get_running_loop().time()
    sent0 = users.sent
    await asyncio.gather(*(users.converse(20_000 + u, args.messages) for u in range(args.users)))
    elapsed = asyncio.get_running_loop().time() - t0
    cpu, own = cpu_s(pid) - cpu0, time.process_time() - own0
    n = users.sent - sent0
    print(
        f"{args.users} users x {args.messages} messages, instant LLM: "
        f"{n / elapsed:.0f} messages/s (target >= 100), "
        f"daemon CPU {cpu / n * 1000:.1f} ms/message (target <= 3)"
    )
    print(f"  (this script, with both fakes: {own / n * 1000:.1f} ms CPU/message)")
    if (trips1 := await trips.now()) is not None and trips0 is not None:
        print(f"store round trips per message: {(trips1 - trips0) / n:.1f} (target <= 6)")
    if args.crowd:
        llm.delay_s = 1.0
        label = f"{args.crowd} users at once, LLM 1 s (target <= 4 s)"
        await crowd(users, pid, args.crowd, 100_000, label)
    print(f"messages without an answer:   {users.unanswered} of {users.sent} (must be 0)")
    print(f"RSS after the load:           {rss_kib(pid) / 1024:.1f} MiB")
    return 1 if users.unanswered else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=int, default=100, help="users writing at once")
    parser.add_argument("--users", type=int, default=30)
    parser.add_argument("--messages", type=int, default=10, help="messages per user")
    parser.add_argument("--crowd", type=int, default=1000, help="users at once, last (0: none)")
    parser.add_argument("--show-log", action="store_true", help="print the daemon's log")
    parser.add_argument(
        "--from-source", action="store_true", help="do not compile relaybot's bytecode first"
    )
    parser.add_argument("--profile", metavar="PATH", help="run the daemon under cProfile")
    args = parser.parse_args()
    if not args.from_source:  # as installed (see the module's docstring)
        packages = ("bot", "channels", "engine", "tools")
        subprocess.run([sys.executable, "-m", "compileall", "-q", *packages], cwd=ROOT, check=True)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
