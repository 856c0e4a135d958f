"""Soak: `relaybot run` killed with SIGKILL at random moments, cycle after cycle, while people
write in many Telegram chats; then every message and every approved action is accounted for.

    .venv/bin/python benchmarks/soak.py                      # 100 cycles over 20 chats
    .venv/bin/python benchmarks/soak.py --llm-faults 0.3     # and 30 % of model requests fail
    .venv/bin/python benchmarks/soak.py --bot-api-faults     # and sends get 429 / 502
    .venv/bin/python benchmarks/soak.py --long               # 100,000 messages, no restarts
    .venv/bin/python benchmarks/soak.py --faults all         # and a sick machine, as root

The daemon is a subprocess; the fake Bot API and the fake model run in this script's event loop
on 127.0.0.1 (benchmarks/_crash_rig.py holds the daemon, the scripted model, the plugin tool and
the ledger). Each cycle sends a burst of messages to random chats (some ask for a destructive
tool; the script presses Confirm, sometimes Cancel, as the requesting user), kills the daemon at
one of the moments below, writes more messages while it is down, and starts it again. Then it
drains (every message answered, bounded), stops the daemon with SIGTERM and counts, per
message: answered once, duplicated, apologised for, reported, lost, out of order within its
chat; per approved action: ran once, twice, never, or without approval.

A duplicate lies in the window no design closes when the platform took its first copy and the
daemon died before it could record that. When the store records deliveries (a `deliveries` table
with the platform's message id in `ref` and the time in `sent_at`), that is exact: the first copy
was never recorded; the window itself is measured too, from the Bot API taking an answer to the
store recording it. Without such a record, a first copy taken at most --window-ms before the
kill that ended its daemon (or while it was dead) counts as inside. Duplicates inside the window
are printed separately and do not fail the run (unless --strict); every other duplicate, any
loss, any answer out of order and any unapproved or repeated action makes the exit status 1.

--faults adds the faults of a sick machine as parts of the run, every other cycle in turn:
disk-full, store-locked, model-hang, oom (benchmarks/_soak_faults.py says how each is made).
Each is reported in the same terms (its messages: lost, out of order, twice) with its verdict.
They need root (a tmpfs, a memory cgroup).

--long is the other soak: one daemon, never restarted, answering --messages (100,000) over
--chats (10,000) private chats from an instant model, at most --in-flight unanswered at a time.
The store keeps history and settled rows for --keep-minutes (its [storage] keep_days and
retention_days), so pruning runs during the run; --rate paces the messages (the retained window,
and so the database, then has one size). Every --every (10,000) messages it prints the daemon's
RSS, the database's and the WAL's size and the messages stored. All three sizes must level off:
the last reading may exceed the one at half-way by at most 10 % plus 2 MiB (RSS, database), and
the WAL must stay under its limit ([storage] wal_limit_mb, 16). A message not answered within
--drain-s fails it too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import enum
import itertools
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._crash_rig import (  # noqa: E402
    UNCERTAIN,
    Daemon,
    DaemonDied,
    Decision,
    Delivery,
    Files,
    Kind,
    Ledger,
    TokenModel,
    classify,
    delivery_records,
    open_tokens,
    token,
    write_files,
)
from benchmarks._faults import Unavailable  # noqa: E402
from benchmarks._soak_faults import Parts  # noqa: E402
from benchmarks._soak_faults import parse as parse_faults  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, Fault, LLMFaults  # noqa: E402
from tests.fakes.telegram_server import Call, FakeTelegram, Hold, SendFaults  # noqa: E402

FIRST_CHAT = 700_001  # private chats: the chat id is the user's id


class Moment(enum.StrEnum):
    """When a cycle's SIGKILL lands."""

    TIMER = "at a random time in the burst"
    BATCH = "right after a getUpdates batch"
    LLM_REQUEST = "during a model request"
    LLM_REPLY = "right after a model reply"
    SEND_HELD = "during a send (not delivered)"
    SEND_TAKEN = "during a send (delivered)"
    SEND_ANSWERED = "right after a send was answered"
    PRESS = "right after a button press"
    PRESS_ANSWERED = "right after a press was answered"
    FALLBACK = "fallback timer (moment missed)"
    OOM = "by the kernel, past the memory limit (--faults oom)"


# -- the people ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Said:
    token: str
    chat: int
    message_id: int
    at: float
    action: bool  # asks for the destructive tool


@dataclass(slots=True)
class Press:
    target: str
    confirm: bool
    query_id: str


class People:
    """Users in private chats: they write, and press a button on every prompt they see."""

    def __init__(self, tg: FakeTelegram, rng: random.Random, args: argparse.Namespace) -> None:
        self.tg = tg
        self.rng = rng
        self.chats = [FIRST_CHAT + i for i in range(args.chats)]
        self.action_share = args.action_share
        self.cancel_share = args.cancel_share
        self.said: list[Said] = []
        self.chat_of: dict[str, int] = {}
        self.intent: dict[str, bool] = {}  # target → pressed Confirm (True) or Cancel
        self.presses: list[Press] = []
        self.on_press: list[Callable[[Press], None]] = []
        self._numbers = iter(range(1, 10**6))

    def say(self, words: str | None = None) -> Said:
        chat = self.rng.choice(self.chats)
        tok = token(next(self._numbers))
        action = words is None and self.rng.random() < self.action_share
        words = words or ("please wipe it" if action else "hello there")
        update = self.tg.inject_message(chat, chat, f"{tok} {words}")
        said = Said(tok, chat, update["message"]["message_id"], _now(), action)
        self.said.append(said)
        self.chat_of[tok] = chat
        return said

    async def burst(self, n: int, span_s: float) -> None:
        for _ in range(n):
            self.say()
            await asyncio.sleep(self.rng.uniform(0, 2 * span_s / max(n, 1)))  # typing pace

    def see(self, delivery: Delivery) -> None:
        """A prompt: press a button on it a moment later (the daemon may be dead by then; the
        press then waits at the Bot API like any update)."""
        if delivery.kind is Kind.PROMPT and delivery.tokens:
            delay = self.rng.uniform(0.0, 0.08)
            asyncio.get_running_loop().call_later(delay, self._press, delivery)

    def _press(self, prompt: Delivery) -> None:
        target = prompt.tokens[0]
        confirm = self.intent.setdefault(target, self.rng.random() >= self.cancel_share)
        suffix = ":y" if confirm else ":n"
        data = next((b for b in prompt.buttons if b.endswith(suffix)), None)
        if data is None:
            return
        update = self.tg.inject_callback(prompt.chat, prompt.chat, prompt.message_id, data)
        press = Press(target, confirm, update["callback_query"]["id"])
        self.presses.append(press)
        for listener in list(self.on_press):
            listener(press)


def _now() -> float:
    return asyncio.get_running_loop().time()


# -- the kill switch -----------------------------------------------------------------------------


class KillSwitch:
    """Kills the daemon at the moment a cycle chose, watching the fakes as things happen."""

    def __init__(
        self, daemon: Daemon, tg: FakeTelegram, model: TokenModel, people: People, ledger: Ledger
    ) -> None:
        self.daemon, self.tg, self.rng = daemon, tg, people.rng
        self.moment: Moment | None = None
        self.countdown = 0
        self.fired: Counter[Moment] = Counter()
        self._hold: Hold | None = None
        self._waiter: asyncio.Task[None] | None = None
        tg.answer_listeners.append(self._on_answer)
        ledger.listeners.append(self._on_delivery)
        model.on_request.append(lambda _: self._event(Moment.LLM_REQUEST))
        model.on_reply.append(self._on_reply)
        people.on_press.append(lambda _: self._event(Moment.PRESS, delay=0.03))

    def arm(self, moment: Moment, nth: int) -> None:
        self.moment, self.countdown = moment, nth
        if moment in (Moment.SEND_HELD, Moment.SEND_TAKEN):
            self._hold = self.tg.hold(
                "sendMessage", _is_answer, carried_out=moment is Moment.SEND_TAKEN
            )
            self._waiter = asyncio.ensure_future(self._fire_when_held(self._hold))

    def fire(self, moment: Moment) -> None:
        if self.moment is None:
            return
        self.fired[moment] += 1
        self.moment = None
        self.daemon.kill_now()

    def after_kill(self) -> None:
        """Release a held send: lost on the way, or taken by the platform after the death."""
        if self._waiter is not None:
            self._waiter.cancel()
        if self._hold is not None:
            self.tg.unhold(self._hold, deliver=self._hold.carried_out)
        self._hold = self._waiter = None

    async def _fire_when_held(self, hold: Hold) -> None:
        await hold.arrived.wait()
        self.fire(Moment.SEND_TAKEN if hold.carried_out else Moment.SEND_HELD)

    def _event(self, moment: Moment, delay: float = 0.0) -> None:
        if self.moment is not moment:
            return
        self.countdown -= 1
        if self.countdown > 0:
            return
        if delay:
            asyncio.get_running_loop().call_later(self.rng.uniform(0, delay), self.fire, moment)
        else:
            self.fire(moment)

    def _on_answer(self, call: Call, result: Any) -> None:
        if call.method == "getUpdates" and result:
            self._event(Moment.BATCH, delay=0.005)
        elif call.method == "answerCallbackQuery" and result is not None:
            self._event(Moment.PRESS_ANSWERED)

    def _on_delivery(self, delivery: Delivery) -> None:
        if delivery.kind is Kind.ANSWER:
            self._event(Moment.SEND_ANSWERED)

    def _on_reply(self, _: dict[str, Any], decision: Decision) -> None:
        self._event(Moment.LLM_REPLY, delay=0.01)


def _is_answer(params: dict[str, Any]) -> bool:
    return str(params.get("text", "")).startswith("answer:")


# -- what a delivery accounts for ----------------------------------------------------------------


class Failures:
    """Model requests that failed on purpose (500, 429, stalls), with the messages their turn
    was answering: an apology accounts for exactly those."""

    FATAL = frozenset({Fault.SERVER_ERROR, Fault.RATE_LIMITED, Fault.TIMEOUT})

    def __init__(self, people: People) -> None:
        self.people = people
        self.failed: list[tuple[float, tuple[str, ...]]] = []

    def observe(self, body: dict[str, Any], fault: Fault | None) -> None:
        if fault in self.FATAL and (tokens := open_tokens(body)):
            self.failed.append((_now(), tokens))

    def apologised(self, apology: Delivery) -> tuple[str, ...]:
        """The messages of the last failed turn in the apology's chat before it was sent."""
        chat_of = self.people.chat_of
        for at, tokens in reversed(self.failed):
            if at <= apology.sent_at and chat_of.get(tokens[0]) == apology.chat:
                return tokens
        return ()


def covered_by(d: Delivery, failures: Failures) -> tuple[str, ...]:
    """The messages a delivery accounts for: an answer or a notice the ones it names, an
    apology the ones of the turn whose model requests failed."""
    if d.kind is Kind.APOLOGY:
        return failures.apologised(d)
    if d.kind in (Kind.ANSWER, Kind.NOTICE):
        return d.tokens
    return ()


class Coverage:
    """Which messages have had an answer, an apology or a report yet (for the drain)."""

    def __init__(self, people: People, failures: Failures) -> None:
        self.people, self.failures = people, failures
        self.covered: set[str] = set()

    def see(self, d: Delivery) -> None:
        self.covered.update(covered_by(d, self.failures))

    def done(self) -> bool:
        return len(self.covered) >= len(self.people.said) and all(
            s.token in self.covered for s in self.people.said
        )


# -- the figures ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Figures:
    messages: int = 0
    once: int = 0
    duplicated: int = 0
    window_gaps_ms: list[float] = field(default_factory=list)
    exact_window: bool = False  # the store records deliveries: inside = never recorded
    window_ms: list[float] = field(default_factory=list)  # platform took it → daemon recorded it
    unrecorded: int = 0  # answers the platform took that the daemon never recorded
    answers: int = 0  # answer messages delivered
    repeated_answers: int = 0  # answer messages naming nothing that was not answered before
    apologised: int = 0
    reported: int = 0
    lost: list[str] = field(default_factory=list)
    duplicated_outside: list[str] = field(default_factory=list)
    duplicated_inside: list[str] = field(default_factory=list)
    out_of_order: list[str] = field(default_factory=list)
    empty_answers: int = 0
    requested: int = 0
    confirmed: int = 0
    cancelled: int = 0
    ran_once: int = 0
    ran_twice: list[str] = field(default_factory=list)
    unapproved: list[str] = field(default_factory=list)
    never: int = 0
    never_after_accepted: int = 0
    uncertain_never_ran: int = 0
    kills_in_window: int = 0

    def failed(self, strict: bool) -> bool:
        return bool(
            self.lost
            or self.duplicated_outside
            or (strict and self.duplicated_inside)
            or self.out_of_order
            or self.ran_twice
            or self.unapproved
        )


def analyse(
    people: People,
    ledger: Ledger,
    failures: Failures,
    daemon: Daemon,
    files: Files,
    window_s: float,
) -> Figures:
    f = Figures(messages=len(people.said))
    answers: dict[str, list[Delivery]] = {}
    for d in sorted(ledger.of(Kind.ANSWER), key=lambda d: d.accepted_at):
        f.answers += 1
        if not d.tokens:
            f.empty_answers += 1
        elif all(tok in answers for tok in d.tokens):
            f.repeated_answers += 1
        for tok in d.tokens:
            answers.setdefault(tok, []).append(d)
    covered_at: dict[str, int] = {}  # token → position of its first answer or apology
    per_chat: dict[int, int] = Counter()
    for d in sorted(ledger.deliveries, key=lambda d: d.accepted_at):
        if d.kind not in (Kind.ANSWER, Kind.APOLOGY):
            continue  # prompts and notices are about actions, not answers to messages
        per_chat[d.chat] += 1
        for tok in covered_by(d, failures):
            covered_at.setdefault(tok, per_chat[d.chat])
    apologised = {t for d in ledger.of(Kind.APOLOGY) for t in failures.apologised(d)}
    reported = {t for d in ledger.of(Kind.NOTICE) for t in d.tokens}

    records = delivery_records(files.db)
    f.exact_window = records is not None
    if records is not None:
        for d in ledger.of(Kind.ANSWER):
            at = records.get((d.chat, d.message_id))
            if at is None:
                f.unrecorded += 1
            else:
                f.window_ms.append((at - d.accepted_wall) * 1000)

    def in_window(a: Delivery, b: Delivery) -> float | None:
        gap = _window_gap(daemon, a, b, window_s if records is None else float("inf"))
        if records is not None and (a.chat, a.message_id) in records:
            return None  # recorded as delivered, and sent again all the same
        return gap

    for s in people.said:
        copies = answers.get(s.token, [])
        if len(copies) == 1:
            f.once += 1
        elif len(copies) > 1:
            f.duplicated += 1
            gaps = [in_window(a, b) for a, b in itertools.pairwise(copies)]
            if all(g is not None for g in gaps):
                f.duplicated_inside.append(s.token)
                f.window_gaps_ms += [g * 1000 for g in gaps if g is not None]
            else:
                f.duplicated_outside.append(s.token)
        elif s.token in apologised:
            f.apologised += 1
        elif s.token in reported:
            f.reported += 1
        else:
            f.lost.append(s.token)

    last_seen: dict[int, int] = {}
    for s in people.said:
        pos = covered_at.get(s.token)
        if pos is None:
            continue
        if pos < last_seen.get(s.chat, 0):
            f.out_of_order.append(s.token)
        last_seen[s.chat] = max(pos, last_seen.get(s.chat, 0))

    runs = files.run_counts()
    accepted = {p.target for p in people.presses if _press_text(ledger, p).startswith("Confirm")}
    f.requested = sum(1 for s in people.said if s.action)
    f.confirmed = sum(1 for ok in people.intent.values() if ok)
    f.cancelled = sum(1 for ok in people.intent.values() if not ok)
    for target, ok in people.intent.items():
        n = runs.get(target, 0)
        if ok and n == 1:
            f.ran_once += 1
        elif ok and n == 0:
            f.never += 1
            f.never_after_accepted += target in accepted
    f.ran_twice = sorted(t for t, n in runs.items() if n > 1)
    f.unapproved = sorted(t for t in runs if not people.intent.get(t))
    f.uncertain_never_ran = sum(
        1
        for d in ledger.of(Kind.NOTICE)
        if UNCERTAIN.search(d.text) and d.tokens and not runs.get(d.tokens[0])
    )
    taken_last: dict[int, float] = {}  # life → when the Bot API last took a message from it
    for d in ledger.deliveries:
        life = daemon.life_at(d.sent_at)
        taken_last[life] = max(taken_last.get(life, d.accepted_at), d.accepted_at)
    f.kills_in_window = sum(
        1
        for i, life in enumerate(daemon.lives)
        if life.killed_at is not None and taken_last.get(i, -1e9) >= life.killed_at - window_s
    )
    return f


def _window_gap(daemon: Daemon, first: Delivery, again: Delivery, window_s: float) -> float | None:
    """Seconds from the platform taking `first` to the kill that ended its daemon, when that
    lies in the unavoidable window (negative: taken after the death); None otherwise."""
    life = daemon.life_at(first.sent_at)
    killed = daemon.lives[life].killed_at
    if killed is None or daemon.life_at(again.sent_at) <= life:
        return None
    gap = killed - first.accepted_at
    return gap if gap <= window_s else None


def _press_text(ledger: Ledger, press: Press) -> str:
    for call, said in ledger.presses:
        if str(call.params.get("callback_query_id")) == press.query_id:
            return said
    return ""


# -- the run -------------------------------------------------------------------------------------


@dataclass(slots=True)
class Run:
    cycles: int = 0
    kills: int = 0
    own_exits: int = 0  # the daemon died without being killed
    drained: bool = False
    exit_code: int | None = None
    wall_s: float = 0.0
    restart_s: list[float] = field(default_factory=list)


async def soak(args: argparse.Namespace, directory: Path) -> int:
    if not args.faults:
        return await soak_with(args, directory, None)
    try:
        async with Parts.made(args.faults, directory, keep=args.keep) as parts:
            return await soak_with(args, directory, parts)
    except Unavailable as exc:
        print(f"soak stopped: --faults {','.join(args.faults)}: {exc}", file=sys.stderr)
        return 2


async def soak_with(args: argparse.Namespace, directory: Path, parts: Parts | None) -> int:
    rng = random.Random(args.seed)
    started = time.monotonic()
    model = TokenModel(delay_s=(0.005, args.llm_delay_ms / 1000), rng=random.Random(args.seed + 1))
    endpoint = (
        model if parts is None else parts.model(model, lambda b: failures.observe(b, Fault.TIMEOUT))
    )
    async with FakeTelegram() as tg, FakeOpenAI(default=endpoint) as llm:
        if args.llm_faults:
            llm.faults = LLMFaults(args.llm_faults, seed=args.seed, stall_s=1.5)
        if args.bot_api_faults:
            tg.send_faults = SendFaults(args.bot_api_faults, seed=args.seed)
        faulty = bool(args.llm_faults)
        timeout_s = 1.0 if faulty else 10.0
        options = parts.write_options(timeout_s) if parts else {"llm_timeout_s": timeout_s}
        files = write_files(directory, tg, llm.base_url, llm_retries=1 if faulty else 0, **options)
        ledger = Ledger()
        tg.answer_listeners.append(ledger.see)
        people = People(tg, rng, args)
        ledger.listeners.append(people.see)
        failures = Failures(people)
        if llm.faults is not None:
            llm.faults.observer = failures.observe
        coverage = Coverage(people, failures)
        ledger.listeners.append(coverage.see)
        activity = Activity()
        tg.answer_listeners.append(activity.on_call)
        model.on_request.append(activity.on_request)
        daemon = Daemon(files, tg, prefix=parts.prefix() if parts else ())
        switch = KillSwitch(daemon, tg, model, people, ledger)
        run = Run()
        try:
            await daemon.start()
            for cycle in range(args.cycles):
                fault = parts.pick(cycle) if parts else None
                if parts is None or fault is None:
                    await one_cycle(args, rng, daemon, people, switch, run)
                else:
                    span = args.burst_ms / 1000
                    killed = await parts.inject(
                        fault, people, daemon, ledger, coverage, args.burst, span
                    )
                    if killed is not None:  # the kernel's kill is this cycle's
                        run.kills += 1
                        switch.fired[Moment.OOM] += 1
                        await restart(args, daemon, people, run)
                    parts.close(fault, people)
                    if killed is None:
                        await one_cycle(args, rng, daemon, people, switch, run)
                run.cycles = cycle + 1
                if args.progress and run.cycles % 10 == 0:
                    print(f"  cycle {run.cycles}: {len(people.said)} messages", flush=True)
            run.drained = await drain(args, ledger, coverage, activity)
            run.exit_code = await daemon.terminate()
        except DaemonDied as exc:
            print(f"soak stopped: {exc}", file=sys.stderr)
            return 2
        run.wall_s = time.monotonic() - started
        figures = analyse(people, ledger, failures, daemon, files, args.window_ms / 1000)
        rows = parts.rows(figures, people, ledger, failures) if parts else []
        faults_failed = bool(parts and parts.any_failed(figures, people))
        report(args, run, switch, figures, llm, tg, len(llm.requests), rows, faults_failed)
        if args.explain:
            explain(args.explain, figures, people, ledger, failures, daemon)
        if args.show_log:
            print(files.log.read_text(errors="replace"))
        failed = figures.failed(args.strict) or run.own_exits or run.exit_code != 0
        return 1 if failed or faults_failed else 0


class Activity:
    """When the daemon last did something (a Bot API call other than polling, a model request)."""

    def __init__(self) -> None:
        self.last = 0.0

    def on_call(self, call: Call, _: Any) -> None:
        if call.method != "getUpdates":
            self.last = _now()

    def on_request(self, _: dict[str, Any]) -> None:
        self.last = _now()


async def drain(
    args: argparse.Namespace, ledger: Ledger, coverage: Coverage, activity: Activity
) -> bool:
    """Wait until every message is accounted for; give up after --drain-s, or once the daemon
    has done nothing for --quiet-s (a lost message would otherwise cost the whole wait)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + args.drain_s
    while not coverage.done():
        now = loop.time()
        if now >= deadline or now - activity.last >= args.quiet_s:
            return False
        with contextlib.suppress(TimeoutError):
            await ledger.wait_until(coverage.done, 0.5)
    return True


async def one_cycle(
    args: argparse.Namespace,
    rng: random.Random,
    daemon: Daemon,
    people: People,
    switch: KillSwitch,
    run: Run,
) -> None:
    moment = rng.choice([m for m in Moment if m not in (Moment.FALLBACK, Moment.OOM)])
    switch.arm(moment, nth=rng.randint(1, 3))
    loop = asyncio.get_running_loop()
    span = args.burst_ms / 1000
    # After a restart the first model request comes ~0.7 s later (the SDK's import): the
    # moments tied to requests and sends need that long, and more on a loaded machine.
    fallback = loop.call_later(span + 3.0, switch.fire, Moment.FALLBACK)
    timer = loop.call_later(rng.uniform(0, span + 1.5), switch.fire, Moment.TIMER)
    if moment is not Moment.TIMER:
        timer.cancel()
    burst = asyncio.ensure_future(people.burst(args.burst, span))
    life = await daemon.wait_dead()
    fallback.cancel()
    timer.cancel()
    switch.moment = None
    if life.killed_at is None:
        run.own_exits += 1
        print(f"the daemon exited on its own (code {life.exit_code})", file=sys.stderr)
    else:
        run.kills += 1
    switch.after_kill()
    await burst  # what is left of the burst arrives while the daemon is down
    await restart(args, daemon, people, run)


async def restart(args: argparse.Namespace, daemon: Daemon, people: People, run: Run) -> None:
    """More messages while the daemon is down, then start it again."""
    for _ in range(args.down):
        people.say()
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await daemon.start()
    run.restart_s.append(loop.time() - t0)


def report(
    args: argparse.Namespace,
    run: Run,
    switch: KillSwitch,
    f: Figures,
    llm: FakeOpenAI,
    tg: FakeTelegram,
    requests: int,
    fault_rows: list[tuple[str, str]],
    faults_failed: bool,
) -> None:
    faults = []
    if llm.faults is not None:
        faults.append(f"model {args.llm_faults:.0%}")
    if tg.send_faults is not None:
        faults.append(f"Bot API {args.bot_api_faults:.0%}")
    faults += args.faults  # the parts, reported below
    rows: list[tuple[str, str]] = [
        ("cycles / chats / seed", f"{run.cycles} / {args.chats} / {args.seed}"),
        ("faults", ", ".join(faults) or "none"),
        (
            "wall time",
            f"{run.wall_s:.1f} s (restart to first poll: median "
            f"{statistics.median(run.restart_s or [0]):.2f} s)",
        ),
        ("messages", str(f.messages)),
        ("kills (SIGKILL)", str(run.kills)),
    ]
    rows += [(f"  {m.value}", str(n)) for m, n in sorted(switch.fired.items())]
    rows += [
        ("daemon exited on its own", str(run.own_exits)),
        ("model requests", str(requests)),
    ]
    if llm.faults is not None:
        rows.append(("  failed on purpose", _counts(llm.faults.injected)))
    if tg.send_faults is not None:
        rows.append(("Bot API sends failed on purpose", _counts(tg.send_faults.injected)))
    gaps = f.window_gaps_ms
    rows += [
        ("answered exactly once", str(f.once)),
        ("answer messages sent", f"{f.answers} ({f.repeated_answers} of them again)"),
        ("answered twice or more", str(f.duplicated)),
        ("  inside the send window", f"{len(f.duplicated_inside)}{_gaps(gaps, f, args)}"),
        ("  outside it", _some(f.duplicated_outside)),
        ("apologised for (model unreachable)", str(f.apologised)),
        ("reported (action notice only)", str(f.reported)),
        ("lost", _some(f.lost)),
        ("out of order in their chat", _some(f.out_of_order)),
        ("answers naming no open message", str(f.empty_answers)),
        ("send window (taken → recorded)", _window(f)),
        ("kills with a send in its window", f"{f.kills_in_window} of {run.kills}"),
        ("actions asked for", str(f.requested)),
        ("  pressed Confirm / Cancel", f"{f.confirmed} / {f.cancelled}"),
        ("  approved: ran once", str(f.ran_once)),
        ("  approved: ran twice or more", _some(f.ran_twice)),
        ("  approved: never ran", f"{f.never} ({f.never_after_accepted} after 'Confirmed.')"),
        ("  ran without approval", _some(f.unapproved)),
        ("  'may have run' for one that never ran", str(f.uncertain_never_ran)),
        (
            "drained",
            "yes"
            if run.drained
            else f"no (nothing happened for {args.quiet_s:g} s, or {args.drain_s:g} s passed)",
        ),
        ("exit code on SIGTERM", str(run.exit_code)),
        *fault_rows,
    ]
    width = max(len(k) for k, _ in rows)
    print(f"\nsoak of relaybot with SIGKILL ({'strict' if args.strict else 'default'})")
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    failed = f.failed(args.strict) or run.own_exits or run.exit_code or faults_failed
    verdict = "FAIL" if failed else "ok"
    print(f"{'verdict':<{width}}  {verdict}")


def explain(
    n: int, f: Figures, people: People, ledger: Ledger, failures: Failures, daemon: Daemon
) -> None:
    """The chat transcripts behind the first `n` problems of each kind: what was said and what
    the bot sent, in the order the Bot API saw it, with the daemon's lives and kills."""
    kinds = {
        "lost": f.lost,
        "out of order": f.out_of_order,
        "duplicated outside the window": f.duplicated_outside,
        "duplicated inside the window": f.duplicated_inside,
    }
    problems = [(what, tok) for what, tokens in kinds.items() for tok in tokens[:n]]
    t0 = daemon.lives[0].started
    for what, tok in problems:
        chat = people.chat_of[tok]
        events = [
            (s.at, f"user    {s.token} {'(wipe)' if s.action else ''}")
            for s in people.said
            if s.chat == chat
        ]
        events += [
            (d.accepted_at, f"bot     {d.kind:<7} {_shown(d, failures)}")
            for d in ledger.deliveries
            if d.chat == chat
        ]
        events += [(life.killed_at, "--- SIGKILL") for life in daemon.lives if life.killed_at]
        events += [(life.started, "--- start") for life in daemon.lives[1:]]
        print(f"\n{tok} {what} (chat {chat}):")
        for at, line in sorted(events):
            mark = " <" if tok in line else ""
            print(f"  {at - t0:8.3f}  {line}{mark}")


def _shown(d: Delivery, failures: Failures) -> str:
    if d.kind is Kind.APOLOGY:
        return f"(for {' '.join(failures.apologised(d)) or 'nothing known'}) {d.text[:40]}"
    return d.text[:70]


def _gaps(gaps_ms: list[float], f: Figures, args: argparse.Namespace) -> str:
    if not gaps_ms:
        return ""
    taken = f"taken {min(gaps_ms):.1f} to {max(gaps_ms):.1f} ms before the kill"
    if f.exact_window:
        return f" ({taken}; never recorded by the daemon)"
    return f" ({taken}; window taken as {args.window_ms:g} ms)"


def _window(f: Figures) -> str:
    if not f.exact_window:
        return "not recorded by the store (no deliveries table)"
    if not f.window_ms:
        return "no answer recorded"
    ms = sorted(f.window_ms)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return (
        f"median {statistics.median(ms):.1f} ms, p99 {p99:.1f} ms, max {ms[-1]:.1f} ms "
        f"({len(ms)} answers; {f.unrecorded} taken but never recorded)"
    )


def _counts(counter: Counter[Any]) -> str:
    return ", ".join(f"{k}: {n}" for k, n in sorted(counter.items(), key=str)) or "0"


def _some(items: list[str]) -> str:
    if not items:
        return "0"
    shown = " ".join(items[:6]) + (" …" if len(items) > 6 else "")
    return f"{len(items)} ({shown})"


# -- the long run (--long) -----------------------------------------------------------------------

WAL_LIMIT_MIB = 16.0  # [storage] wal_limit_mb's default


@dataclass(slots=True)
class Reading:
    messages: int
    seconds: float
    rss_mib: float
    db_mib: float
    wal_mib: float
    stored: int  # messages in the store (the retained window)


async def long_run(args: argparse.Namespace, directory: Path) -> int:
    """One daemon, --messages over --chats, sizes printed every --every messages."""
    rng = random.Random(args.seed)
    keep_days = args.keep_minutes / 1440
    async with FakeTelegram() as tg, FakeOpenAI(default=TokenModel()) as llm:
        files = write_files(
            directory,
            tg,
            llm.base_url,
            storage=f"keep_days = {keep_days:.6f}\nretention_days = {keep_days:.6f}",
        )
        open_: dict[str, float] = {}  # token → loop time it was sent
        slots = asyncio.Semaphore(args.in_flight)
        answered = 0
        latencies: list[float] = []
        drained = asyncio.Event()  # set when nothing sent is unanswered

        def see(call: Call, result: Any) -> None:
            nonlocal answered
            if call.method != "sendMessage" or result is None:
                return
            kind, tokens = classify(result["text"], False)
            if kind is not Kind.ANSWER:
                return
            for tok in tokens:
                sent = open_.pop(tok, None)
                if sent is not None:
                    answered += 1
                    latencies.append(_now() - sent)
                    slots.release()
            if not open_:
                drained.set()

        tg.answer_listeners.append(see)
        daemon = Daemon(files, tg)
        chats = [FIRST_CHAT + i for i in range(args.chats)]
        readings: list[Reading] = []
        started = time.monotonic()
        try:
            await daemon.start()
            assert daemon.pid is not None
            print(
                f"long soak: {args.messages} messages over {args.chats} chats, at most "
                f"{args.in_flight} unanswered, history and settled rows kept "
                f"{args.keep_minutes:g} min",
                flush=True,
            )
            print(
                f"{'messages':>9} {'time':>7} {'msg/s':>6} {'RSS MiB':>8} {'db MiB':>7} "
                f"{'WAL MiB':>8} {'stored':>7} {'p50 ms':>7} {'p99 ms':>7}",
                flush=True,
            )
            window_start, since = time.monotonic(), 0
            pace = asyncio.get_running_loop().time()
            for n in range(1, args.messages + 1):
                if args.rate:  # a steady load: the retained window is then the same size
                    pace += 1 / args.rate
                    await asyncio.sleep(max(0.0, pace - asyncio.get_running_loop().time()))
                await slots.acquire()
                chat = rng.choice(chats)
                tok = token(n)
                open_[tok] = _now()
                tg.inject_message(chat, chat, f"{tok} hello there")
                if n % args.every == 0:
                    await _settle(open_, drained, args.drain_s)
                    reading = _reading(n, started, daemon.pid, files.db)
                    readings.append(reading)
                    rate = (n - since) / (time.monotonic() - window_start)
                    _print_reading(reading, rate, latencies)
                    latencies.clear()
                    # the fakes' own records: this script needs none of them
                    tg.calls.clear()
                    tg.messages.clear()
                    for kept in (llm.requests, llm.prompt_counts, llm.auth_headers):
                        kept.clear()
                    window_start, since = time.monotonic(), n
            await _settle(open_, drained, args.drain_s)
            code = await daemon.terminate()
        except DaemonDied as exc:
            print(f"soak stopped: {exc}", file=sys.stderr)
            return 2
        except TimeoutError:
            print(f"{len(open_)} messages not answered within {args.drain_s:g} s", file=sys.stderr)
            if args.show_log:
                print(files.log.read_text(errors="replace"))
            return 1
        if args.show_log:
            print(files.log.read_text(errors="replace"))
        return _long_verdict(readings, answered, args.messages, code, time.monotonic() - started)


async def _settle(open_: dict[str, float], drained: asyncio.Event, timeout: float) -> None:
    """Wait until every message sent so far is answered (a checkpoint for the readings)."""
    if open_:
        drained.clear()
        await asyncio.wait_for(drained.wait(), timeout)


def _reading(n: int, started: float, pid: int, db: Path) -> Reading:
    def mib(path: Path) -> float:
        return path.stat().st_size / 2**20 if path.exists() else 0.0

    wal = db.with_name(db.name + "-wal")
    rss = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)) as c:
        stored = c.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
    return Reading(n, time.monotonic() - started, rss, mib(db), mib(wal), stored)


def _print_reading(r: Reading, rate: float, latencies: list[float]) -> None:
    ms = sorted(x * 1000 for x in latencies) or [0.0]
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    print(
        f"{r.messages:>9} {r.seconds:>6.0f}s {rate:>6.0f} {r.rss_mib:>8.1f} {r.db_mib:>7.1f} "
        f"{r.wal_mib:>8.2f} {r.stored:>7} {statistics.median(ms):>7.1f} {p99:>7.1f}",
        flush=True,
    )


def _long_verdict(
    readings: list[Reading], answered: int, messages: int, exit_code: int, wall_s: float
) -> int:
    half = readings[len(readings) // 2 - 1] if len(readings) >= 2 else readings[0]
    last = readings[-1]

    def levels(name: str, a: float, b: float) -> bool:
        ok = b <= a * 1.10 + 2.0
        verdict = "levelled off" if ok else "STILL GROWING"
        print(f"{name}: {a:.1f} MiB at {half.messages}, {b:.1f} MiB at {last.messages} ({verdict})")
        return ok

    print(
        f"\nanswered {answered} of {messages} in {wall_s / 60:.1f} min "
        f"({answered / wall_s:.0f} messages/s); exit code {exit_code}"
    )
    ok = levels("RSS", half.rss_mib, last.rss_mib)
    ok &= levels("database", half.db_mib, last.db_mib)
    wal_max = max(r.wal_mib for r in readings)
    wal_ok = wal_max <= WAL_LIMIT_MIB
    print(f"WAL: at most {wal_max:.2f} MiB (limit {WAL_LIMIT_MIB:g})")
    ok &= wal_ok and answered == messages and exit_code == 0
    print(f"verdict: {'ok' if ok else 'FAIL'}")
    return 0 if ok else 1


def _faults_arg(text: str) -> list[str]:
    try:
        return parse_faults(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=100, help="kill/restart cycles")
    parser.add_argument("--chats", type=int, help="20; with --long 10,000")
    parser.add_argument("--burst", type=int, default=16, help="messages per burst")
    parser.add_argument("--burst-ms", type=float, default=300, help="how long a burst lasts")
    parser.add_argument("--down", type=int, default=6, help="messages while the daemon is down")
    parser.add_argument(
        "--action-share", type=float, default=0.15, help="messages asking for the destructive tool"
    )
    parser.add_argument(
        "--cancel-share", type=float, default=0.25, help="prompts answered with Cancel"
    )
    parser.add_argument("--llm-delay-ms", type=float, default=60, help="longest model delay")
    parser.add_argument(
        "--llm-faults",
        type=float,
        nargs="?",
        const=0.3,
        default=0.0,
        metavar="SHARE",
        help="share of model requests that fail (0.3)",
    )
    parser.add_argument(
        "--bot-api-faults",
        type=float,
        nargs="?",
        const=0.1,
        default=0.0,
        metavar="SHARE",
        help="share of sends answered 429 or 502 (0.1)",
    )
    parser.add_argument(
        "--window-ms",
        type=float,
        default=50,
        help="a duplicate whose first "
        "copy was taken this close before the kill is in the unavoidable "
        "window",
    )
    parser.add_argument(
        "--strict", action="store_true", help="fail on duplicates in the window too"
    )
    parser.add_argument("--drain-s", type=float, default=60, help="longest wait at the end")
    parser.add_argument(
        "--quiet-s",
        type=float,
        default=10,
        help="stop draining after this long without any activity of the daemon",
    )
    parser.add_argument(
        "--faults",
        type=_faults_arg,
        default=[],
        metavar="LIST",
        help="fault parts, every other cycle in turn: disk-full,store-locked,model-hang,oom or "
        "all (root)",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument(
        "--explain",
        type=int,
        default=0,
        metavar="N",
        help="print the chat transcripts behind the first N problems",
    )
    parser.add_argument("--show-log", action="store_true", help="print the daemon's log")
    parser.add_argument("--progress", action="store_true", help="a line every 10 cycles")
    long = parser.add_argument_group("the long run")
    long.add_argument("--long", action="store_true", help="one daemon, no restarts, sizes")
    long.add_argument("--messages", type=int, default=100_000)
    long.add_argument("--every", type=int, default=10_000, help="messages between readings")
    long.add_argument("--in-flight", type=int, default=200, help="unanswered messages at most")
    long.add_argument("--rate", type=float, default=0, help="messages per second (0: no pace)")
    long.add_argument(
        "--keep-minutes", type=float, default=2.0, help="[storage] keep_days and retention_days"
    )
    args = parser.parse_args()
    if args.long and args.faults:
        parser.error("--faults are parts of the kill cycles; --long has none")
    if args.chats is None:
        args.chats = 10_000 if args.long else 20
    directory = Path(tempfile.mkdtemp(prefix="relaybot-soak-"))
    try:
        return asyncio.run(long_run(args, directory) if args.long else soak(args, directory))
    finally:
        if args.keep:
            print(f"work directory kept: {directory}")
        else:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
