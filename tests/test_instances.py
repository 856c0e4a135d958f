"""Several instances on one PostgreSQL store (issue 20): real `relaybot run` processes against
the fake Bot API and the fake model, killed with SIGKILL, held to the same guarantees one
process has across a restart: every message answered exactly once and in order per chat, a
confirmation pressed while the instance that asked is dead resumes once and the action runs
once, a reminder due while its instance is dead fires once, and the receiving side moves to a
live instance within 10 s.

The rig is the crash tests' (benchmarks/_crash_rig.py): answers name the tokens of the messages
they answer, so "exactly once" is counted, not guessed. The instances' leases last 4 s here
(5 s by default), so a takeover takes about 5 s. Synchronisation is on the fakes' recorded calls,
on the ledger and on the database, never on sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from benchmarks._crash_rig import (
    REMIND_IN_S,
    Daemon,
    Kind,
    Ledger,
    TokenModel,
    token,
    wait_for_log,
    write_files,
)
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.postgres import PostgresServer

CHATS = tuple(range(7001, 7025))
LEASE_S = 4.0  # short enough for quick takeovers, long enough for a loaded 2-core machine
TAKEOVER_S = 10.0  # the bound for a dead instance's chats and receiving side
WAIT_S = 30.0


@dataclass
class Cluster:
    pg: PostgresServer
    database: str
    tg: FakeTelegram
    llm: FakeOpenAI
    model: TokenModel
    ledger: Ledger
    daemons: dict[str, Daemon]
    said: dict[int, list[str]] = field(default_factory=dict)
    _numbers: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def sql(self, query: str) -> str:
        return self.pg.psql(query, self.database)

    def say(self, chat: int, words: str = "hello") -> str:
        tok = token(next(self._numbers))
        self.tg.inject_message(chat, chat, f"{tok} {words}")
        self.said.setdefault(chat, []).append(tok)
        return tok

    def holding(self, name: str) -> int:
        """How many chats the live instance `name` holds now."""
        return int(
            self.sql(
                "SELECT count(*) FROM chat_leases l JOIN instances i ON i.id = l.instance "
                f"WHERE i.name = '{name}'"
            )
        )

    def receiver(self) -> str:
        return self.sql(
            "SELECT i.name FROM receivers r JOIN instances i ON i.id = r.instance "
            "WHERE r.channel = 'telegram'"
        )

    async def until(self, condition: Callable[[], bool], timeout: float = WAIT_S) -> None:
        try:
            await self.ledger.wait_until(condition, timeout)
        except TimeoutError:
            logs = "\n".join(f"--- {n}\n{d.log_tail(15)}" for n, d in self.daemons.items())
            pytest.fail(f"nothing more happened\n{self.transcript()}\n{logs}")

    async def until_db(self, condition: Callable[[], bool], timeout: float = WAIT_S) -> None:
        """Poll the database (other processes write it: there is no event to wait on)."""
        async with asyncio.timeout(timeout):
            while not await asyncio.to_thread(condition):  # noqa: ASYNC110
                await asyncio.sleep(0.05)

    async def recorded(self, *, quiet: bool = False) -> None:
        """Wait until every answer sent so far has its delivery recorded: a kill before that is
        the one window no design closes (the answer is sent again), not what is tested here."""
        await wait_recorded(self.pg, self.database, quiet=quiet)

    async def kill(self, name: str) -> float:
        daemon = self.daemons[name]
        daemon.kill_now()
        await daemon.wait_dead()
        return asyncio.get_running_loop().time()

    async def stop_all(self) -> None:
        for name, daemon in self.daemons.items():
            if daemon.running:
                assert await daemon.terminate() == 0, f"{name}\n{daemon.log_tail()}"

    def assert_each_answered_once_in_order(self) -> None:
        tokens = [t for chat in self.said.values() for t in chat]
        wrong = {t: n for t in tokens if (n := len(self.ledger.answers(t))) != 1}
        assert not wrong, f"answers per message (want 1): {wrong}\n{self.transcript()}"
        for chat, toks in self.said.items():
            firsts = [self.ledger.answers(t)[0].accepted_at for t in toks]
            assert firsts == sorted(firsts), f"out of order in {chat}\n{self.transcript()}"

    def transcript(self) -> str:
        return "\n".join(
            f"  {d.chat} #{d.message_id} {d.kind}: {d.text[:90]}" for d in self.ledger.deliveries
        )


async def wait_session_recorded(pg: PostgresServer, database: str) -> None:
    """The Discord gateway session is in the store for the next holder to resume (recorded a
    tick after it is opened: a kill before that leaves nothing to resume from)."""
    recorded = "SELECT count(*) FROM receivers WHERE channel LIKE 'discord%' AND resume IS NOT NULL"
    async with asyncio.timeout(WAIT_S):
        while await asyncio.to_thread(pg.psql, recorded, database) == "0":  # noqa: ASYNC110
            await asyncio.sleep(0.05)  # another process writes it: no event to wait on


async def wait_recorded(pg: PostgresServer, database: str, *, quiet: bool = False) -> None:
    """Every answer sent has its delivery recorded (`quiet`: and every message is answered,
    every prompt shown is recorded as shown)."""
    pending = "SELECT (SELECT count(*) FROM deliveries WHERE state = 'pending')"
    if quiet:
        pending += (
            " + (SELECT count(*) FROM inbox WHERE state <> 'answered') + (SELECT count(*) "
            "FROM confirmations WHERE state = 'pending' AND message_ref IS NULL)"
        )
    async with asyncio.timeout(WAIT_S):
        while await asyncio.to_thread(pg.psql, pending, database) != "0":  # noqa: ASYNC110
            await asyncio.sleep(0.05)  # another process writes it: no event to wait on


async def wait_resumable(pg: PostgresServer, database: str, part: str) -> None:
    """The receiving part's holder has left what its next holder resumes from."""
    query = f"SELECT count(*) FROM receivers WHERE channel = '{part}' AND resume IS NOT NULL"
    async with asyncio.timeout(WAIT_S):
        while await asyncio.to_thread(pg.psql, query, database) != "1":  # noqa: ASYNC110
            await asyncio.sleep(0.05)  # another process writes it: no event to wait on


@pytest.fixture
async def cluster(postgres: PostgresServer, tmp_path: Path) -> AsyncIterator[Cluster]:
    url = postgres.new_database(migrated=False)  # the instances migrate it, together
    async with running_cluster(postgres, url, tmp_path) as rig:
        yield rig


@contextlib.asynccontextmanager
async def running_cluster(pg: PostgresServer, url: str, tmp_path: Path) -> AsyncIterator[Cluster]:
    """Three instances (not started) on the database at `url` of `pg`, the fakes they talk to,
    and the ledger of what they answered; any instance still running at the end is killed."""
    database = url.split("/")[3].split("?")[0]
    async with FakeTelegram() as tg:
        model = TokenModel()
        async with FakeOpenAI(default=model) as llm:
            ledger = Ledger()
            tg.answer_listeners.append(ledger.see)
            daemons = {
                name: Daemon(
                    write_files(
                        tmp_path,
                        tg,
                        llm.base_url,
                        store_url=url,
                        instance=name,
                        lease_s=LEASE_S,
                        llm_timeout_s=WAIT_S,  # turns wait at the model's gate during takeovers
                    ),
                    tg,
                )
                for name in ("a", "b", "c")
            }
            rig = Cluster(pg, database, tg, llm, model, ledger, daemons)
            try:
                yield rig
            finally:
                for daemon in daemons.values():
                    if daemon.running:
                        daemon.kill_now()
                        await daemon.wait_dead()


async def test_a_burst_survives_two_instances_killed_one_after_the_other(cluster: Cluster) -> None:
    """Three instances; a burst over many chats with every turn waiting for the model; SIGKILL
    one instance that holds chats, then the one receiving from Telegram, each mid-burst. Every
    message is answered exactly once, in order per chat, and polling moves within 10 s."""
    await cluster.daemons["a"].start()  # the first one receives
    await asyncio.gather(*(cluster.daemons[n].start(polls=False) for n in ("b", "c")))
    assert cluster.receiver() == "a"
    cluster.model.gate.clear()
    for chat in CHATS:
        cluster.say(chat)
    await cluster.llm.wait_requests(len(CHATS), timeout=WAIT_S)
    # which of b and c claims more chats is a race (the less busy first): kill that one
    victim, survivor = sorted(("b", "c"), key=cluster.holding, reverse=True)
    assert cluster.holding(victim) > 0, "neither b nor c holds a chat: the work is not spread"
    await cluster.recorded()
    await cluster.kill(victim)  # its turns were waiting for the model
    for chat in CHATS:
        cluster.say(chat)  # queued behind the dead instance's turns
    cluster.model.gate.set()
    first = [toks[-1] for toks in cluster.said.values()]
    await cluster.until(lambda: cluster.ledger.answered(first))

    cluster.model.gate.clear()
    before = len(cluster.llm.requests)
    for chat in CHATS:
        cluster.say(chat)
    await cluster.llm.wait_requests(before + len(CHATS), timeout=WAIT_S)
    polls = len(cluster.tg.calls_of("getUpdates"))
    await cluster.recorded()
    killed_at = await cluster.kill("a")  # the receiver, mid-burst
    for chat in CHATS[:8]:
        cluster.say(chat)  # waits at Telegram until c polls
    moved = await cluster.tg.wait_for_call("getUpdates", count=polls + 1, timeout=TAKEOVER_S + 5)
    assert moved.at - killed_at <= TAKEOVER_S
    cluster.model.gate.set()
    last = [toks[-1] for toks in cluster.said.values()]
    await cluster.until(lambda: cluster.ledger.answered(last))
    assert cluster.receiver() == survivor
    await cluster.stop_all()
    cluster.assert_each_answered_once_in_order()


async def test_a_confirmation_pressed_while_the_instance_that_asked_is_dead(
    cluster: Cluster,
) -> None:
    """The instance that showed the prompt is killed; the press reaches the receiving instance
    (or its successor), the action runs exactly once, and the turn is answered once."""
    await cluster.daemons["a"].start()
    await cluster.daemons["b"].start(polls=False)
    chat = CHATS[0]
    wanted = cluster.say(chat, "please wipe")
    await cluster.until(lambda: bool(cluster.ledger.of(Kind.PROMPT, chat)))
    prompt = cluster.ledger.of(Kind.PROMPT, chat)[0]

    def asker() -> str | None:
        for name, daemon in cluster.daemons.items():
            if daemon.files.log.exists() and "waiting for a confirmation" in (
                daemon.files.log.read_text(errors="replace")
            ):
                return name
        return None

    await cluster.until_db(lambda: asker() is not None)  # its log says so once it asked
    asked = asker()
    assert asked is not None
    await cluster.recorded(quiet=True)
    await cluster.kill(asked)
    confirm = next(data for data in prompt.buttons if data.endswith(":y"))
    cluster.tg.inject_callback(chat, chat, prompt.message_id, confirm)
    await cluster.until(lambda: cluster.ledger.answered([wanted]), WAIT_S)
    await cluster.stop_all()
    assert cluster.daemons["a"].files.run_counts() == {wanted: 1}, cluster.transcript()
    told = cluster.ledger.answers(wanted)
    assert len(told) == 1 and f"wiped {wanted}" in told[0].text, cluster.transcript()


async def test_a_reminder_due_while_its_instance_is_dead_fires_once(cluster: Cluster) -> None:
    """remind_me runs as a job on the instance that ran the turn; that instance is killed
    before the reminder is due; another one adopts the job and the reminder comes, once."""
    await cluster.daemons["a"].start()
    await cluster.daemons["b"].start(polls=False)
    chat = CHATS[1]
    wanted = cluster.say(chat, "please remind me")
    await cluster.until(lambda: cluster.ledger.answered([wanted]))
    runner = cluster.sql("SELECT i.name FROM jobs j JOIN instances i ON i.id = j.instance")
    assert runner in ("a", "b")
    await cluster.recorded()
    await cluster.kill(runner)
    reminder = f"reminder for {wanted}"
    await cluster.until(lambda: bool(cluster.ledger.mentioning(reminder)), REMIND_IN_S + WAIT_S)
    await cluster.until_db(
        lambda: cluster.sql("SELECT state FROM jobs") == "delivered", timeout=WAIT_S
    )
    await cluster.stop_all()
    assert len(cluster.ledger.mentioning(reminder)) == 1, cluster.transcript()


async def test_an_unreachable_database_loses_nothing_and_is_logged_once(
    tmp_path: Path,
) -> None:
    """The database goes away under a running instance, for longer than its lease: a message
    that arrives meanwhile is not confirmed to Telegram (it could not be recorded), the instance
    stops working on its chats and receiving (another one may be taking over), the outage is
    logged once, not per retry, and once the database is back the instance joins again and the
    message is answered, once."""
    pg = PostgresServer()  # its own server: this test stops it
    pg.start()
    daemon: Daemon | None = None
    try:
        async with FakeTelegram() as tg, FakeOpenAI(default=TokenModel()) as llm:
            ledger = Ledger()
            tg.answer_listeners.append(ledger.see)
            url = pg.new_database()
            files = write_files(tmp_path, tg, llm.base_url, store_url=url, instance="a", lease_s=2)
            daemon = Daemon(files, tg)
            await daemon.start()
            first = token(1)
            tg.inject_message(7101, 7101, f"{first} hello")
            await ledger.wait_until(lambda: ledger.answered([first]), WAIT_S)
            await wait_recorded(pg, url.split("/")[3].split("?")[0])
            await asyncio.to_thread(pg.halt)
            second = token(2)
            update = tg.inject_message(7101, 7101, f"{second} hello")
            # the poller fetches it and cannot record it; the instance's lease runs out
            await wait_for_log(files.log, "stops working on its chats", WAIT_S)
            offsets = [c.params.get("offset") or 0 for c in tg.calls_of("getUpdates")]
            assert max(offsets) <= update["update_id"], "confirmed without being recorded"
            await asyncio.to_thread(pg.resume)
            await ledger.wait_until(lambda: ledger.answered([second]), WAIT_S + 10)
            assert await daemon.terminate() == 0, daemon.log_tail()
            log = files.log.read_text()
            assert log.count("the database is unreachable") == 1, daemon.log_tail(60)
            assert log.count("joined as instance a") == 2, daemon.log_tail(60)
            assert len(ledger.answers(first)) == len(ledger.answers(second)) == 1
    finally:
        if daemon is not None and daemon.running:
            daemon.kill_now()
            await daemon.wait_dead()
        pg.stop()


DM, ALICE = 3001, 4001


async def test_two_instances_answer_telegram_and_discord_and_hand_the_gateway_over(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    """Two instances with both channels: one holds the Telegram polling and the Discord
    gateway, both answer; when that one is killed (once its gateway session is recorded), the
    other resumes that session, so a message written while nobody received is answered too,
    once."""
    url = postgres.new_database()
    async with (
        FakeTelegram() as tg,
        FakeDiscord(users={ALICE: "Alice"}) as dc,
        FakeOpenAI(default=TokenModel()) as llm,
    ):
        ledger = Ledger()
        tg.answer_listeners.append(ledger.see)
        discord = (
            f'\n[discord]\nenabled = true\ntoken = "{dc.token}"\n'
            f'api_base_url = "{dc.api_base_url}"\nallowed_users = ["*"]\n'
        )
        daemons = {
            name: Daemon(
                write_files(
                    tmp_path,
                    tg,
                    llm.base_url,
                    store_url=url,
                    instance=name,
                    lease_s=LEASE_S,
                    extra=discord,
                ),
                tg,
            )
            for name in ("a", "b")
        }
        try:
            await daemons["a"].start()
            await daemons["b"].start(polls=False)
            await dc.wait_for_gateway_op(2, timeout=WAIT_S)  # a identified
            identified = len(dc.gateway_ops)

            async def discord_answer(tok: str) -> None:
                await dc.wait_for_call(
                    "POST",
                    rf"/channels/{DM}/messages",
                    lambda c: f"answer: {tok}" in str((c.json or {}).get("content")),
                    timeout=WAIT_S,
                )

            first = token(1)
            await dc.inject_message(DM, ALICE, f"{first} hello")
            await discord_answer(first)
            tg_tok = token(2)
            tg.inject_message(7201, 7201, f"{tg_tok} hello")
            await ledger.wait_until(lambda: ledger.answered([tg_tok]), WAIT_S)
            database = url.split("/")[3].split("?")[0]
            await wait_recorded(postgres, database)
            # a keeps its gateway session in the store a tick after it starts: kill it once
            # there is one to resume (a kill before that is a new session, not this test)
            await wait_resumable(postgres, database, "discord")
            daemons["a"].kill_now()
            await daemons["a"].wait_dead()
            second = token(3)
            await dc.inject_message(DM, ALICE, f"{second} while nobody receives")
            # how soon b takes over depends on the machine: benchmarks measure it, this waits
            await dc.wait_for_gateway_op(6, timeout=WAIT_S, after=identified)
            await discord_answer(second)
            assert dc.identified() == [(0, 1)]  # resumed: no new session
            assert await daemons["b"].terminate() == 0, daemons["b"].log_tail()
            answers = [
                str((c.json or {}).get("content"))
                for c in dc.calls_to("POST", rf"/channels/{DM}/messages")
            ]
            assert sum(f"answer: {first}" in a for a in answers) == 1, answers
            assert sum(f"answer: {second}" in a for a in answers) == 1, answers
            assert len(ledger.answers(tg_tok)) == 1
        finally:
            for daemon in daemons.values():
                if daemon.running:
                    daemon.kill_now()
                    await daemon.wait_dead()
