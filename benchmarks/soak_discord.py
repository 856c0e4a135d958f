"""Soak on Discord: `relaybot run` killed with SIGKILL in the send window, cycle after cycle, while
people write in several channels of a server; then every message is accounted for.

    .venv/bin/python benchmarks/soak_discord.py                  # 40 cycles over 6 channels
    .venv/bin/python benchmarks/soak_discord.py --cycles 100 --burst 12

The send window is the moment no design closes without the platform's help: Discord has created
the answer and the daemon dies before it hears so, so its store still holds the answer as not
delivered, and the restart sends it again. relaybot sends every message with a nonce derived from
its delivery record and ``enforce_nonce`` (issue 44), and Discord answers a second create with
the same nonce (within a few minutes) with the first message: the restart's send returns it and
nothing is shown twice. This soak measures that on the fake Discord, which keeps Discord's nonce
rule and lets the script act between creating a message and answering the request
(``on_created``): each cycle sends a burst of messages (random channels, random pauses) and kills
the daemon from inside the create of one of the burst's answers (the n-th, n drawn at random;
after --fallback-s without it, at once), writes --down more while it is dead, and starts it
again.
The daemon is a subprocess (benchmarks/_crash_rig.py: the scripted model answers every open
message naming its token; a fake Telegram runs beside because the rig's config has one).

Then it drains (every token answered, bounded) and stops the daemon with SIGTERM. Per token:
shown once, shown twice or more (a duplicate: two messages naming it), lost (none). A message
written while the daemon is dead (--down; the burst stops at the kill) is counted apart, and
reported only: the restart resumes the gateway session (on SQLite from the store's
``receivers`` row, engine/work/_resuming.py; on PostgreSQL as the instance that takes the
gateway over, engine/work/_receivers.py), from before the oldest message not yet stored
(channels/discord/_unstored.py), so Discord sends those again as long as it keeps the session
(minutes); the default --down 0 writes none. Per start: whether it resumed the session or
started a new one. Per kill: whether the answer being created was created again after the
restart (a POST with the same nonce) and whether Discord returned the first message for it. Any
duplicate or loss makes the exit status 1. A lost message is shown with how long before the kill
it was written (before resuming: up to 170 ms, a message the gateway delivered and the daemon had
not stored yet).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._crash_rig import (  # noqa: E402
    TOKEN,
    Daemon,
    TokenModel,
    delivery_records,
    token,
    write_files,
)
from tests.fakes.discord_server import FakeDiscord  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI  # noqa: E402
from tests.fakes.telegram_server import FakeTelegram  # noqa: E402
from tests.postgres import PostgresServer  # noqa: E402

GUILD = 1001
USER = 4001
POSTS = r"/channels/\d+/messages"


class Soak:
    """One run: the fakes, the daemon, what was said and what was shown."""

    def __init__(self, args: argparse.Namespace, dc: FakeDiscord, daemon: Daemon) -> None:
        self.args = args
        self.dc = dc
        self.daemon = daemon
        self.rng = random.Random(args.seed)
        self.channels = [2001 + i for i in range(args.channels)]
        self.said: list[str] = []
        self.said_at: dict[str, tuple[float, int]] = {}  # token → (loop time, daemon life)
        self.while_down: set[str] = set()  # said while the daemon was dead: see the docstring
        self.kills = Counter[str]()
        self.victims: list[str] = []  # the nonce of each answer being created at a kill
        self._created_this_life = 0
        self._kill_at = 0
        self._killed = asyncio.Event()
        self.sessions = Counter[str]()  # how each start opened its gateway session
        self.opened: list[str] = []  # the same, start by start

    async def on_created(self, message: dict[str, Any]) -> None:
        """Discord has made the message; the daemon has not heard so yet: the send window."""
        if message["author"]["id"] != str(self.dc.bot_id) or not TOKEN.search(message["content"]):
            return
        self._created_this_life += 1
        if self._kill_at and self._created_this_life == self._kill_at:
            self.victims.append(str(message.get("nonce")))
            self.kills["in the send window"] += 1
            self.daemon.kill_now()
            self._killed.set()
            await self.daemon.wait_dead()  # the answer never reaches the daemon

    async def start(self) -> None:
        """Start the daemon; return once its gateway session is open: a new one (IDENTIFY) or,
        on PostgreSQL, the dead one's resumed (RESUME)."""
        after = len(self.dc.gateway_ops)
        self._created_this_life, self._kill_at = 0, 0
        self._killed.clear()
        await self.daemon.start(timeout=60)
        waits = [
            asyncio.ensure_future(self.dc.wait_for_gateway_op(op, timeout=60, after=after))
            for op in (2, 6)
        ]
        done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        (first,) = done
        kind = "resumed" if first.result()["op"] == 6 else "new"
        self.sessions[kind] += 1
        self.opened.append(kind)

    async def say(self, n: int, *, until_killed: bool = False) -> None:
        for _ in range(n):
            if until_killed and self._killed.is_set():
                return  # the rest of the burst is not written to a dead daemon
            tok = token(len(self.said) + 1)
            self.said.append(tok)
            if not self.daemon.running or self.daemon.lives[-1].killed_at is not None:
                self.while_down.add(tok)
            self.said_at[tok] = (asyncio.get_running_loop().time(), len(self.daemon.lives) - 1)
            channel = self.rng.choice(self.channels)
            await self.dc.inject_message(channel, USER, f"{tok} please", GUILD)
            await asyncio.sleep(self.rng.uniform(0, self.args.burst_ms / 1000 / n))  # pacing

    async def cycle(self) -> None:
        await self.start()
        self._kill_at = self.rng.randint(1, self.args.burst)
        await self.say(self.args.burst, until_killed=True)
        try:
            await asyncio.wait_for(self._killed.wait(), self.args.fallback_s)
        except TimeoutError:
            self.kills["fallback timer (no create in time)"] += 1
            self.daemon.kill_now()
        await self.daemon.wait_dead()
        await self.say(self.args.down)  # while it is down

    def shown(self) -> dict[str, list[str]]:
        """Token → ids of the bot's messages naming it."""
        out: dict[str, list[str]] = {tok: [] for tok in self.said}
        for msg in self.dc.messages.values():
            if msg["author"]["id"] == str(self.dc.bot_id):
                for tok in TOKEN.findall(msg["content"]):
                    out.setdefault(tok, []).append(msg["id"])
        return out

    async def drain(self) -> bool:
        deadline = time.monotonic() + self.args.drain_s
        while time.monotonic() < deadline:
            if all(ids for tok, ids in self.shown().items() if tok not in self.while_down):
                return True
            await asyncio.sleep(0.2)  # polling the fake's record, not synchronising the daemon
        return False


async def run(args: argparse.Namespace, directory: Path, pg: PostgresServer | None) -> int:
    model = TokenModel()
    async with (
        FakeTelegram() as tg,
        FakeDiscord(guilds={GUILD: [2001 + i for i in range(args.channels)]}) as dc,
        FakeOpenAI(default=model) as llm,
    ):
        discord = (
            f'\n[discord]\nenabled = true\ntoken = "{dc.token}"\n'
            f'api_base_url = "{dc.api_base_url}"\nallowed_users = ["*"]\n'
            'respond_in_guilds = "all"\n'
        )
        url = None if pg is None else pg.new_database()  # one instance, "solo"
        files = write_files(directory, tg, llm.base_url, extra=discord, store_url=url)
        daemon = Daemon(files, tg)
        soak = Soak(args, dc, daemon)
        dc.on_created = soak.on_created
        started = time.monotonic()
        try:
            for i in range(args.cycles):
                await soak.cycle()
                if args.progress and (i + 1) % 10 == 0:
                    print(f"  cycle {i + 1}: {len(soak.said)} messages", flush=True)
            await soak.start()
            drained = await soak.drain()
            exit_code = await daemon.terminate()
        finally:
            daemon.kill_now()
        return report(args, soak, drained, exit_code, time.monotonic() - started, files.db)


def report(
    args: argparse.Namespace, soak: Soak, drained: bool, exit_code: int, wall: float, db: Path
) -> int:
    shown = soak.shown()
    once = [t for t, ids in shown.items() if len(set(ids)) == 1]
    twice = [t for t, ids in shown.items() if len(set(ids)) > 1]
    lost = [t for t, ids in shown.items() if not ids and t not in soak.while_down]
    unheard = [t for t, ids in shown.items() if not ids and t in soak.while_down]
    posts = soak.dc.calls_to("POST", POSTS)
    by_nonce = Counter(nonce(c) for c in posts)
    resent = [n for n in soak.victims if by_nonce[n] > 1]
    ids = {n: {str((c.response or {}).get("id")) for c in posts if nonce(c) == n} for n in resent}
    returned = sum(1 for n in resent if len(ids[n]) == 1)  # every create answered the first
    ours = [m for m in soak.dc.messages.values() if m["author"]["id"] == str(soak.dc.bot_id)]
    records = None if args.postgres else delivery_records(db)
    unrecorded = [m for m in ours if (int(m["channel_id"]), int(m["id"])) not in (records or {})]
    before_kill = sorted(
        killed - at
        for tok in lost
        for at, life in [soak.said_at[tok]]
        if (killed := soak.daemon.lives[life].killed_at) is not None
    )
    without_nonce = [c for c in posts if not (c.json or {}).get("nonce")]
    rows = [
        ("cycles / channels / seed", f"{args.cycles} / {args.channels} / {args.seed}"),
        ("store", "PostgreSQL (one instance)" if args.postgres else "SQLite"),
        ("wall time", f"{wall:.1f} s"),
        ("messages", str(len(soak.said))),
        ("kills (SIGKILL)", str(sum(soak.kills.values()))),
        *((f"  {k}", str(v)) for k, v in soak.kills.items()),
        ("answer creates (POST)", f"{len(posts)} ({len(without_nonce)} without a nonce)"),
        ("answers created at a kill", str(len(soak.victims))),
        ("  sent again after the restart", str(len(resent))),
        ("  Discord returned the first message", str(returned)),
        ("answered exactly once", str(len(once))),
        ("shown twice or more (duplicates)", str(len(twice)) + (f" {twice[:5]}" if twice else "")),
        ("lost", str(len(lost)) + (f" {lost[:5]}" if lost else "")),
        ("  said this long before the kill", _spread(before_kill) if before_kill else "-"),
        ("gateway sessions at start", ", ".join(f"{v} {k}" for k, v in soak.sessions.items())),
        ("said while it was dead", f"{len(soak.while_down)} ({len(unheard)} never answered)"),
        *((f"  {tok}: the start after it", _next_start(soak, tok)) for tok in unheard[:5]),
        ("bot messages not recorded delivered", "-" if records is None else str(len(unrecorded))),
        ("drained", "yes" if drained else f"no (after {args.drain_s:g} s)"),
        ("exit code on SIGTERM", str(exit_code)),
    ]
    failed = bool(twice or lost or not drained or exit_code)  # while_down: reported only
    rows.append(("verdict", "FAIL" if failed else "ok"))
    width = max(len(k) for k, _ in rows)
    print("\nsoak of relaybot on Discord, SIGKILL in the send window")
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 1 if failed else 0


def _next_start(soak: Soak, tok: str) -> str:
    """How the gateway session was opened by the start after the life `tok` was said in."""
    life = soak.said_at[tok][1]
    return soak.opened[life + 1] if life + 1 < len(soak.opened) else "-"


def _spread(seconds: list[float]) -> str:
    ms = [s * 1000 for s in seconds]
    return f"{min(ms):.0f} to {max(ms):.0f} ms (median {ms[len(ms) // 2]:.0f} ms)"


def nonce(call: Any) -> str:
    return str((call.json or {}).get("nonce"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=40, help="kill/restart cycles")
    parser.add_argument("--channels", type=int, default=6)
    parser.add_argument("--burst", type=int, default=8, help="messages per cycle")
    parser.add_argument("--burst-ms", type=float, default=800, help="how long a burst lasts")
    parser.add_argument("--down", type=int, default=0, help="messages while the daemon is down")
    parser.add_argument("--fallback-s", type=float, default=20, help="kill anyway after this")
    parser.add_argument("--drain-s", type=float, default=120, help="longest wait at the end")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--progress", action="store_true", help="a line every 10 cycles")
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="the store in PostgreSQL (tests/postgres.py), where a restart resumes the gateway",
    )
    args = parser.parse_args()
    pg = PostgresServer() if args.postgres else None
    if pg is not None:
        pg.start()
    try:
        with tempfile.TemporaryDirectory(prefix="relaybot-soak-discord-") as directory:
            return asyncio.run(run(args, Path(directory), pg))
    finally:
        if pg is not None:
            pg.stop()


if __name__ == "__main__":
    sys.exit(main())
