"""A rig for crash tests: `relaybot run` as a subprocess that can be SIGKILLed at any moment, a
scripted model whose answers name the messages they answer, a plugin tool whose runs can be
counted (and one that allocates, to pass a memory limit), and a ledger of what the bot
delivered. Shared by benchmarks/soak.py and the crash and fault tests (tests/test_crash_*.py,
tests/test_faults_*.py); the faults themselves are in benchmarks/_faults.py.

The mapping from message to answer is exact, not guessed from timing: every user message
carries a token (``q000123``), and the model (:class:`TokenModel`) answers the user messages
that come after the last answer in the history it is sent, naming their tokens
(``answer: q000123 q000124 | wipe: wiped q000123``). A turn that folds several queued messages
names them all; an answer delivered twice names the same tokens twice; a message the model
never saw is named by no answer. Destructive runs are counted by the plugin tool itself: one
line per run in a file the daemon appends to, so a run is seen even when the daemon dies right
after it.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import enum
import json
import os
import re
import signal
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.models._alternate import NO_REPLY
from tests.fakes.openai_server import Reply, text, tool_call
from tests.fakes.telegram_server import Call, FakeTelegram

ROOT = Path(__file__).resolve().parent.parent
TOKEN = re.compile(r"\bq\d{6}\b")
PLUGIN = "crash_rig_tools"
APOLOGY = re.compile(
    r"(can.?t|cannot|could ?n.?t|unable to) reach the (language )?model"
    r"|language model is busy|language model refused|language model took too long"
    r"|language model's server failed",
    re.I,
)
# "it may or may not have completed", "it may have completed partly or fully": a report that does
# not know whether an action ran
UNCERTAIN = re.compile(r"\bmay (or may not )?have\b", re.I)


def token(n: int) -> str:
    return f"q{n:06d}"


# -- the daemon's files --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Files:
    """Everything one rig run keeps in its directory (`instance`: one of several daemons
    sharing a PostgreSQL store, each with its own config and log)."""

    directory: Path
    instance: str = ""
    store: Path | None = None  # the SQLite file, when not in `directory` (a small disk)

    @property
    def config(self) -> Path:
        return self.directory / f"config{self.instance}.toml"

    @property
    def db(self) -> Path:
        return self.store or self.directory / "relaybot.db"

    @property
    def log(self) -> Path:
        return self.directory / f"daemon{self.instance}.log"

    @property
    def runs(self) -> Path:
        """One line per run of the destructive tool: its target."""
        return self.directory / "runs.txt"

    @property
    def gate(self) -> Path:
        """While this file is missing, `hold_slot` keeps its tool slot."""
        return self.directory / "gate"

    def run_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        if self.runs.exists():
            for line in self.runs.read_text().split():
                counts[line] = counts.get(line, 0) + 1
        return counts


_PLUGIN_SOURCE = '''\
"""Tools for crash tests (written by benchmarks/_crash_rig.py)."""

import asyncio
from pathlib import Path

from tools import ToolContext, tool

RUNS = Path({runs!r})
GATE = Path({gate!r})
LOAD_MIB = {load_mib!r}


@tool(destructive=True, summary="Wipe {{target}}")
def wipe(target: str) -> str:
    """Wipe the named target for good (asks first)."""
    with RUNS.open("a") as f:  # the side effect the rig counts
        f.write(target + "\\n")
    return f"wiped {{target}}"


@tool(destructive=True, summary="Shred {{target}}")
async def shred(target: str, ctx: ToolContext) -> str:
    """Shred the named target for good (asks first); says so as it finishes."""
    with RUNS.open("a") as f:  # the side effect the rig counts
        f.write(target + "\\n")
    await ctx.send(f"shredding {{target}}: done")  # a fault test acts while this is on its way
    return f"shredded {{target}}"


@tool
async def hold_slot(target: str, ctx: ToolContext) -> str:
    """Occupy a tool slot until the gate opens."""
    await ctx.send(f"holding a slot for {{target}}")
    while not GATE.exists():
        await asyncio.sleep(0.01)
    return f"held a slot for {{target}}"


@tool
def load_archive(target: str) -> str:
    """Load the named archive into memory and say how big it is."""
    chunks = [bytearray(1 << 20) for _ in range(LOAD_MIB)]  # zero-filled: every page touched
    return f"loaded {{target}}: {{len(chunks)}} MiB"
'''


def write_files(
    directory: Path,
    tg: FakeTelegram,
    llm_url: str,
    *,
    llm_timeout_s: float = 5.0,
    llm_retries: int = 0,
    max_parallel_tools: int = 8,
    store_url: str | None = None,
    instance: str = "",
    lease_s: float = 5.0,
    extra: str = "",
    telegram: dict[str, str] | None = None,
    storage: str = "",
    confirmation_timeout_s: float = 3600,
    builtins: tuple[str, ...] = ("remind_me",),
    poll_timeout_s: float = 10,
    store_path: Path | None = None,
    load_mib: int = 1024,
) -> Files:
    """The plugin module and a config for the daemon: Telegram to `tg` (with the `telegram`
    keys added), the model at `llm_url`, the plugin's tools, confirmations that do not expire
    during a run; `storage` adds lines to its [storage] section. With `store_url`, the store is
    that PostgreSQL database and the daemon is `instance` of several (`extra`: more TOML, e.g.
    a [discord] section). `store_path` puts the SQLite file elsewhere (a small disk);
    `load_mib` is what the `load_archive` tool allocates (past a memory limit, to be killed)."""
    files = Files(directory, instance, store_path)
    where = f'url = "{store_url}"' if store_url else f'path = "{files.db}"'
    storage = f"{where}\n{storage}" if storage else where
    if store_url:
        storage += f'\n\n[instance]\nid = "{instance or "solo"}"\nlease_s = {lease_s}'
    more = "".join(f"\n            {k} = {json.dumps(v)}" for k, v in (telegram or {}).items())
    (directory / f"{PLUGIN}.py").write_text(
        _PLUGIN_SOURCE.format(runs=str(files.runs), gate=str(files.gate), load_mib=load_mib)
    )
    files.config.write_text(
        textwrap.dedent(
            f"""
            [llm]
            base_url = "{llm_url}"
            api_key = "sk-crash-rig-0123456789"
            model = "fake-model"
            max_retries = {llm_retries}
            request_timeout_s = {llm_timeout_s}

            [storage]
            {storage}

            [telegram]
            enabled = true
            token = "{tg.token}"
            api_base_url = "{tg.base_url}"
            allowed_users = ["*"]
            poll_timeout_s = {poll_timeout_s}{more}

            [tools]
            builtins = {json.dumps(list(builtins))}
            plugins = ["{PLUGIN}"]
            confirmation_timeout_s = {confirmation_timeout_s}

            [engine]
            max_parallel_tools = {max_parallel_tools}
            shutdown_grace_s = 20

            [limits]
            messages_per_minute = 100000  # crashes are measured here, not the rate limit

            [log]
            level = "INFO"
            """
        )
        + extra
    )
    return files


# -- the daemon ----------------------------------------------------------------------------------


@dataclass(slots=True)
class Life:
    """One run of the daemon, from spawn to death (loop times)."""

    started: float
    ended: float | None = None
    killed_at: float | None = None  # SIGKILL sent by the rig
    exit_code: int | None = None


class DaemonDied(RuntimeError):
    pass


class Daemon:
    """`relaybot run` as a subprocess, restarted as often as the rig likes."""

    def __init__(
        self,
        files: Files,
        tg: FakeTelegram,
        *,
        ready: str = "getUpdates",
        prefix: Sequence[str] = (),
    ) -> None:
        self.files = files
        self.tg = tg
        self.ready = ready  # the Bot API call that says it receives (setWebhook for a webhook)
        self.prefix = list(prefix)  # before the command (e.g. MemoryCage.prefix: into a cgroup)
        self.lives: list[Life] = []
        self._proc: asyncio.subprocess.Process | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    async def start(self, timeout: float = 30, *, polls: bool = True) -> None:
        """Spawn the daemon and return once it polls the Bot API or sets its webhook (or,
        `polls` False: an instance another one receives for, once it says it runs)."""
        loop = asyncio.get_running_loop()
        calls_before = len(self.tg.calls_of(self.ready))
        env = {**os.environ, "PYTHONPATH": f"{self.files.directory}{os.pathsep}{ROOT}"}
        with self.files.log.open("ab") as log:
            self._proc = await asyncio.create_subprocess_exec(
                *self.prefix,
                sys.executable,
                "-m",
                "bot",
                "run",
                "-c",
                str(self.files.config),
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=log,
                stdin=asyncio.subprocess.DEVNULL,
            )
        self.lives.append(Life(loop.time()))
        polling = asyncio.ensure_future(
            self.tg.wait_for_call(self.ready, count=calls_before + 1, timeout=timeout)
            if polls
            else wait_for_log(self.files.log, " running (", timeout, len(self.lives))
        )
        died = asyncio.ensure_future(self._proc.wait())
        try:
            await asyncio.wait({polling, died}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            polling.cancel()
            died.cancel()
        if not self.running:
            self._ended()
            raise DaemonDied(f"the daemon exited at start-up:\n{self.log_tail()}")
        if polling.cancelled() or polling.exception() is not None:
            raise DaemonDied(f"the daemon did not poll within {timeout} s:\n{self.log_tail()}")

    def kill_now(self) -> None:
        """SIGKILL, synchronously (callable from a fake's hook)."""
        if self.running and self.lives[-1].killed_at is None:
            assert self._proc is not None
            os.kill(self._proc.pid, signal.SIGKILL)
            self.lives[-1].killed_at = asyncio.get_running_loop().time()

    async def wait_dead(self) -> Life:
        assert self._proc is not None
        await self._proc.wait()
        return self._ended()

    async def terminate(self, timeout: float = 40) -> int:
        """SIGTERM (running turns finish) and wait; returns the exit code."""
        assert self._proc is not None
        if self.running:
            self._proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(self._proc.wait(), timeout)
        return self._ended().exit_code or 0

    def _ended(self) -> Life:
        life = self.lives[-1]
        if life.ended is None:
            life.ended = asyncio.get_running_loop().time()
            life.exit_code = self._proc.returncode if self._proc is not None else None
        return life

    def life_at(self, at: float) -> int:
        """Index of the life that was running at loop time `at`."""
        return max(bisect.bisect_right([life.started for life in self.lives], at) - 1, 0)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text_ = self.files.log.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text_.splitlines()[-lines:])


@contextlib.asynccontextmanager
async def reaped(daemons: Sequence[Daemon]) -> AsyncIterator[None]:
    """Whatever happens inside, no daemon outlives the block (one still running: SIGKILL)."""
    try:
        yield
    finally:
        for d in daemons:
            if d.running:
                d.kill_now()
                await d.wait_dead()


# -- the model -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Decision:
    """What the model answers to one request, and the tokens its answer names."""

    reply: Reply
    tokens: tuple[str, ...]


# (word in the user's message, tool); remind_me (a built-in) is asked for a reminder in 3 s
ACTIONS = (
    ("wipe", "wipe"),
    ("shred", "shred"),
    ("hold", "hold_slot"),
    ("remind", "remind_me"),
    ("archive", "load_archive"),
)
REMIND_IN_S = 3.0


def _arguments(tool: str, tok: str) -> dict[str, Any]:
    if tool == "remind_me":
        return {"text": f"reminder for {tok}", "in_seconds": REMIND_IN_S}
    return {"target": tok}


def decide(body: dict[str, Any]) -> Decision:
    """The scripted model: call the tool a message asks for (once per message over the whole
    history), else answer every user message after the last answer, naming their tokens."""
    messages: list[dict[str, Any]] = body.get("messages") or []
    open_ = messages[_after_last_answer(messages) :]
    called = {
        (call["function"]["name"], tok)
        for msg in messages
        for call in msg.get("tool_calls") or ()
        for tok in TOKEN.findall(call["function"].get("arguments") or "")
    }
    offered = {t["function"]["name"] for t in body.get("tools") or () if "function" in t}
    for msg in open_:
        # messages queued together reach the model as one, their texts joined by a blank line
        said = _content(msg).split("\n\n") if msg.get("role") == "user" else []
        for content in said:
            for tok in TOKEN.findall(content):
                for word, tool in ACTIONS:
                    if word in content and tool in offered and (tool, tok) not in called:
                        return Decision(tool_call(tool, _arguments(tool, tok)), ())
    tokens = open_tokens(body)
    results = [_clip(_content(m), 80) for m in open_ if m.get("role") == "tool"]
    answer = "answer: " + (" ".join(tokens) or "(nothing new)")
    if results:
        answer += " | " + "; ".join(results)
    return Decision(text(answer), tokens)


def open_tokens(body: dict[str, Any]) -> tuple[str, ...]:
    """The tokens of the user messages a request's turn answers: those after the last answer."""
    messages: list[dict[str, Any]] = body.get("messages") or []
    tokens: list[str] = []
    for msg in messages[_after_last_answer(messages) :]:
        if msg.get("role") == "user":
            tokens += [t for t in TOKEN.findall(_content(msg)) if t not in tokens]
    return tuple(tokens)


def _after_last_answer(messages: list[dict[str, Any]]) -> int:
    start = 0
    for i, msg in enumerate(messages):
        if (
            msg.get("role") == "assistant"
            and msg.get("content")
            and msg.get("content") != NO_REPLY  # roles kept alternating: not an answer
            and not msg.get("tool_calls")
        ):
            start = i + 1
    return start


def _content(msg: dict[str, Any]) -> str:
    content = msg.get("content")
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[:n] + "…"


class TokenModel:
    """FakeOpenAI's `default`: :func:`decide`, after an optional random delay.

    `gate` holds every request while it is clear. Listeners are told as each request arrives
    (`on_request(body)`) and as its reply is chosen (`on_reply(body, decision)`)."""

    def __init__(self, *, delay_s: tuple[float, float] = (0.0, 0.0), rng: Any = None) -> None:
        self.delay_s = delay_s
        self.rng = rng
        self.gate = asyncio.Event()
        self.gate.set()
        self.on_request: list[Callable[[dict[str, Any]], None]] = []
        self.on_reply: list[Callable[[dict[str, Any], Decision], None]] = []

    async def __call__(self, body: dict[str, Any]) -> Reply:
        for listener in list(self.on_request):
            listener(body)
        await self.gate.wait()
        low, high = self.delay_s
        if high > 0:
            await asyncio.sleep(self.rng.uniform(low, high) if self.rng else high)
        decision = decide(body)
        for listener in list(self.on_reply):
            listener(body, decision)
        return decision.reply


# -- what the bot delivered ----------------------------------------------------------------------


class Kind(enum.StrEnum):
    ANSWER = "answer"  # the model's answer, naming the tokens it answers
    APOLOGY = "apology"  # the engine says it cannot reach the model
    PROMPT = "prompt"  # a confirmation with buttons
    NOTICE = "notice"  # anything else (restart notices, a tool's own messages)


@dataclass(frozen=True, slots=True)
class Delivery:
    """One message the Bot API accepted from the bot."""

    chat: int
    message_id: int
    text: str  # as the user sees it
    kind: Kind
    tokens: tuple[str, ...]  # named as answered (ANSWER) or mentioned (other kinds)
    reply_to: int | None
    sent_at: float  # loop time the request arrived
    accepted_at: float  # loop time the answer was written back
    buttons: tuple[str, ...] = ()  # callback data of a prompt's buttons
    accepted_wall: float = 0.0  # the same moment in wall-clock time (to compare with the store)


def classify(visible: str, has_buttons: bool) -> tuple[Kind, tuple[str, ...]]:
    if has_buttons:
        return Kind.PROMPT, tuple(TOKEN.findall(visible))
    if visible.startswith("answer:"):
        return Kind.ANSWER, tuple(TOKEN.findall(visible.split(" | ", 1)[0]))
    if APOLOGY.search(visible):
        return Kind.APOLOGY, ()
    return Kind.NOTICE, tuple(TOKEN.findall(visible))


@dataclass(slots=True)
class Ledger:
    """Every message the Bot API accepted from the bot, as it is accepted (attach it with
    `tg.answer_listeners.append(ledger.see)`); `listeners` are told of each delivery;
    `wait_until` blocks until a condition holds."""

    deliveries: list[Delivery] = field(default_factory=list)
    presses: list[tuple[Call, str]] = field(default_factory=list)  # answerCallbackQuery, text
    listeners: list[Callable[[Delivery], None]] = field(default_factory=list)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def see(self, call: Call, result: Any) -> None:
        if result is None:
            return
        if call.method == "answerCallbackQuery":
            self.presses.append((call, str(call.params.get("text", ""))))
        elif call.method == "sendMessage":
            markup = call.params.get("reply_markup") or {}
            buttons = tuple(
                b.get("callback_data", "") for row in markup.get("inline_keyboard", ()) for b in row
            )
            kind, tokens = classify(result["text"], bool(buttons))
            reply = (call.params.get("reply_parameters") or {}).get("message_id")
            delivery = Delivery(
                int(call.params["chat_id"]),
                int(result["message_id"]),
                result["text"],
                kind,
                tokens,
                int(reply) if reply is not None else None,
                call.at,
                asyncio.get_running_loop().time(),
                buttons,
                time.time(),
            )
            self.deliveries.append(delivery)
            for listener in list(self.listeners):
                listener(delivery)
        else:
            return
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_until(self, condition: Callable[[], bool], timeout: float) -> None:
        async with asyncio.timeout(timeout):
            while not condition():
                await self._changed.wait()

    async def expect(
        self, condition: Callable[[], bool], timeout: float, log: Callable[[], str]
    ) -> None:
        """:meth:`wait_until`, failing with what was delivered and `log()` (the daemon's)."""
        try:
            await self.wait_until(condition, timeout)
        except TimeoutError:
            raise AssertionError(f"nothing more happened\n{self.transcript()}\n{log()}") from None

    def transcript(self, chats: set[int] | None = None) -> str:
        """What the bot delivered (to `chats`, else everywhere), in order."""
        return "\n".join(
            f"  {d.chat} #{d.message_id} {d.kind}: {d.text[:100]}"
            for d in self.deliveries
            if chats is None or d.chat in chats
        )

    def of(self, kind: Kind, chat: int | None = None) -> list[Delivery]:
        return [d for d in self.deliveries if d.kind is kind and chat in (None, d.chat)]

    def answers(self, tok: str) -> list[Delivery]:
        return [d for d in self.of(Kind.ANSWER) if tok in d.tokens]

    def answered(self, tokens: Iterable[str]) -> bool:
        named = {t for d in self.of(Kind.ANSWER) for t in d.tokens}
        return all(t in named for t in tokens)

    def mentioning(self, text_: str) -> list[Delivery]:
        return [d for d in self.deliveries if text_ in d.text]


def db_contains(path: Path, needle: str) -> bool:
    """True when any text column of any table in the SQLite file at `path` contains `needle`
    (whatever the schema: the rig must not depend on the store's layout)."""
    import sqlite3

    if not path.exists():
        return False
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            columns = [r[1] for r in db.execute(f"PRAGMA table_info({json.dumps(table)})")]
            for column in columns:
                sql = (
                    f"SELECT 1 FROM {json.dumps(table)} WHERE typeof({json.dumps(column)})='text' "
                    f"AND instr({json.dumps(column)}, ?) > 0 LIMIT 1"
                )
                if db.execute(sql, (needle,)).fetchone():
                    return True
    return False


def delivery_records(path: Path) -> dict[tuple[int, int], float] | None:
    """(chat, platform message id) → wall time the daemon recorded that it delivered the
    message there, from the store's `deliveries` table (chat_id, ref, sent_at); None when the
    store keeps no such record."""
    import sqlite3

    if not path.exists():
        return None
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)) as db:
        columns = {r[1] for r in db.execute("PRAGMA table_info(deliveries)")}
        if not {"chat_id", "ref", "sent_at"} <= columns:
            return None
        rows = db.execute(
            "SELECT chat_id, ref, sent_at FROM deliveries WHERE ref IS NOT NULL AND sent_at "
            "IS NOT NULL"
        )
        return {(int(chat), int(ref)): float(at) for chat, ref, at in rows if str(ref).isdigit()}


async def wait_for_log(path: Path, needle: str, timeout: float, count: int = 1) -> None:
    """Poll a daemon's log until `needle` appears `count` times (another process writes it:
    there is no event to wait on)."""
    async with asyncio.timeout(timeout):
        while True:
            text_ = path.read_text(errors="replace") if path.exists() else ""  # noqa: ASYNC240
            if text_.count(needle) >= count:
                return
            await asyncio.sleep(0.05)


async def wait_for_db(path: Path, needle: str, timeout: float) -> None:
    """Poll the SQLite file until `needle` is stored (a condition, not a guessed delay)."""
    async with asyncio.timeout(timeout):
        # another process writes the file: there is no event to wait on
        while not await asyncio.to_thread(db_contains, path, needle):  # noqa: ASYNC110
            await asyncio.sleep(0.02)
