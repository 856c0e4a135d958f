"""Discord loses no message at a restart: the restart resumes the gateway session the last
process had, from before the oldest message it had not stored yet, and Discord sends again what
came after (channels/discord/_unstored.py; engine/work/_resuming.py keeps where to resume from).

In process (the App on a SQLite store, real discord.py, the fake Discord): a graceful restart
resumes, and what was written while relaybot was down is answered; a session Discord forgot or
let expire gives way to a new one, with one log line; a session saved with another token is not
resumed. As a subprocess (benchmarks/_crash_rig.py): SIGKILL while a message is received and
not stored, and later events already stored; after the restart it is answered once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from benchmarks._crash_rig import Daemon, TokenModel, token, wait_for_db, write_files
from bot.app import App
from bot.config import Config
from channels import _discord_shards as shards
from channels.discord import DiscordChannel
from tests.fakes.discord_server import Call, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

GUILD, CHANNEL, DM = 1001, 2001, 3001
ALICE = 4001
WAIT_S = 30.0
EXPIRED = "the saved gateway session had expired"

MakeConfig = Callable[..., Config]


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(guilds={GUILD: [CHANNEL]}, users={ALICE: "Alice"}) as server:
        yield server


@pytest.fixture
def start(fake: FakeDiscord, make_config: MakeConfig) -> Callable[..., Any]:
    """``async with start(**discord_keys)``: relaybot with only Discord, on one SQLite store."""

    @contextlib.asynccontextmanager
    async def run(**discord: Any) -> AsyncIterator[App]:
        section = {
            "enabled": True,
            "token": fake.token,
            "api_base_url": fake.api_base_url,
            "allowed_users": [ALICE],
        }
        config = make_config(discord=section | discord)
        async with App(config, channels=[DiscordChannel(config.discord)]) as app:
            yield app

    return run


def echoed(text: str) -> Callable[[Call], bool]:
    return lambda call: call.json.get("content") == f"echo: [Alice] {text}"


def ops(fake: FakeDiscord) -> list[int]:
    return [p["op"] for p in fake.gateway_ops]


async def test_what_was_written_while_relaybot_was_stopped_is_answered_after_the_restart(
    start: Callable[..., Any], fake: FakeDiscord
) -> None:
    async with start():
        pass  # stopped: the connection closed with 4000, so Discord keeps the session
    await fake.inject_message(CHANNEL, ALICE, "while you were away", GUILD, mentions_bot=True)
    async with start():
        await fake.wait_for_call("POST", r"/channels/\d+/messages", echoed("while you were away"))
        await fake.inject_message(CHANNEL, ALICE, "and now", GUILD, mentions_bot=True)
        await fake.wait_for_call("POST", r"/channels/\d+/messages", echoed("and now"))
    assert fake.connections == ["/gateway", "/gateway/resume"]
    assert ops(fake).count(2) == 1  # one IDENTIFY, then a RESUME
    answers = [m for m in fake.messages.values() if "while you were away" in m["content"]]
    assert len(answers) == 2  # the message and one answer


async def test_threads_go_on_after_a_resume(start: Callable[..., Any], fake: FakeDiscord) -> None:
    """A resumed session gets no GUILD_CREATE: the channels are fetched to tell a text channel
    (a mention starts a thread) from a thread the bot started (every message is for it)."""
    async with start(reply_in_thread=True):
        first = await fake.inject_message(CHANNEL, ALICE, "first", GUILD, mentions_bot=True)
        thread = int(first["id"])  # a thread started on a message has its id
        await fake.wait_for_call("POST", rf"/channels/{thread}/messages", echoed("first"))
    async with start(reply_in_thread=True):
        await fake.inject_message(thread, ALICE, "in the thread", GUILD)  # no mention
        await fake.wait_for_call("POST", rf"/channels/{thread}/messages", echoed("in the thread"))
        second = await fake.inject_message(CHANNEL, ALICE, "second", GUILD, mentions_bot=True)
        await fake.wait_for_call("POST", rf"/channels/{second['id']}/messages", echoed("second"))
    assert fake.connections == ["/gateway", "/gateway/resume"]


@pytest.mark.parametrize("how", ["forgotten", "expired"])
async def test_a_session_discord_no_longer_keeps_gives_way_to_a_new_one(
    start: Callable[..., Any], fake: FakeDiscord, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    caplog.set_level(logging.INFO)
    async with start():
        pass
    if how == "forgotten":
        fake.end_sessions()
    else:
        fake.session_ttl_s = 0.0
    async with start():
        await fake.inject_message(CHANNEL, ALICE, "hello again", GUILD, mentions_bot=True)
        await fake.wait_for_call("POST", r"/channels/\d+/messages", echoed("hello again"))
    assert ops(fake).count(6) == 1  # RESUME tried, refused (op 9) …
    assert ops(fake).count(2) == 2  # … and a new session identified
    assert caplog.text.count(EXPIRED) == 1
    assert fake.token not in caplog.text


async def test_the_point_kept_stays_before_a_message_not_stored_yet(
    start: Callable[..., Any], fake: FakeDiscord
) -> None:
    """The rule itself: what the store keeps to resume from passes a message only once it is
    stored, though later events are received and stored before it."""
    arrived, release = asyncio.Event(), asyncio.Event()

    async def hold_the_thread_start(call: Call) -> None:
        if call.method == "POST" and call.path.endswith("/threads"):
            arrived.set()  # the mention is received; it is stored after its thread starts
            await release.wait()

    async def kept(app: App) -> int:
        await app.dispatcher.resuming.keep()  # keep now, as every 0.25 s
        (session,) = shards.decode((await app.store.ops.resume_points())["discord"]).values()
        assert session.sequence is not None
        return session.sequence

    async with start(reply_in_thread=True) as app:
        fake.on_request = hold_the_thread_start
        first = await fake.inject_message(CHANNEL, ALICE, "first", GUILD, mentions_bot=True)
        await asyncio.wait_for(arrived.wait(), WAIT_S)
        later = await fake.inject_message(DM, ALICE, "later")
        await fake.wait_for_call(
            "POST", rf"/channels/{DM}/messages", lambda c: "later" in str(c.json)
        )
        assert await kept(app) < fake.sequence_of(first["id"])
        release.set()
        await fake.wait_for_call("POST", r"/channels/\d+/messages", echoed("first"))
        assert await kept(app) >= fake.sequence_of(later["id"])


async def test_a_session_saved_with_another_token_is_not_resumed(
    start: Callable[..., Any], fake: FakeDiscord
) -> None:
    async with start():
        pass
    fake.token = "another-bot-token"  # the config's token changed between the two runs
    async with start(token=fake.token):
        await fake.inject_message(CHANNEL, ALICE, "new token", GUILD, mentions_bot=True)
        await fake.wait_for_call("POST", r"/channels/\d+/messages", echoed("new token"))
    assert ops(fake).count(6) == 0  # never offered to Discord
    assert ops(fake).count(2) == 2


async def test_a_message_received_and_not_stored_when_killed_is_answered_once(
    tmp_path: Path,
) -> None:
    """The daemon is SIGKILLed while it works on a mention (starting its thread, before the
    message is stored), after it has received and stored a later message (a DM): the point
    kept to resume from must stay before the first, though the later one is past it."""
    model = TokenModel()
    async with (
        FakeTelegram() as tg,
        FakeDiscord(guilds={GUILD: [CHANNEL]}, users={ALICE: "Alice"}) as dc,
        FakeOpenAI(default=model) as llm,
    ):
        discord = (
            f'\n[discord]\nenabled = true\ntoken = "{dc.token}"\n'
            f'api_base_url = "{dc.api_base_url}"\nallowed_users = ["*"]\n'
            "reply_in_thread = true\n"
        )
        files = write_files(tmp_path, tg, llm.base_url, extra=discord)
        daemon = Daemon(files, tg)
        first, later, after = token(1), token(2), token(3)

        def answer_to(tok: str) -> Callable[[Call], bool]:
            return lambda c: f"answer: {tok}" in str((c.json or {}).get("content"))

        async def die_starting_the_thread(call: Call) -> None:
            if call.method != "POST" or not call.path.endswith("/threads"):
                return
            dc.on_request = None
            await dc.inject_message(DM, ALICE, f"{later} meanwhile")
            await dc.wait_for_call("POST", rf"/channels/{DM}/messages", answer_to(later), WAIT_S)
            daemon.kill_now()  # the mention is received, not stored; the DM is answered
            await daemon.wait_dead()

        try:
            await daemon.start()
            await dc.wait_for_gateway_op(2, timeout=WAIT_S)
            session = dc.session_id()
            assert session is not None
            await wait_for_db(files.db, session, WAIT_S)  # the session is kept to resume
            dc.on_request = die_starting_the_thread
            await dc.inject_message(CHANNEL, ALICE, f"{first} please", GUILD, mentions_bot=True)
            await daemon.wait_dead()
            resumes = ops(dc).count(6)
            await daemon.start()
            await dc.wait_for_call("POST", r"/channels/\d+/messages", answer_to(first), WAIT_S)
            await dc.inject_message(CHANNEL, ALICE, f"{after} next", GUILD, mentions_bot=True)
            await dc.wait_for_call("POST", r"/channels/\d+/messages", answer_to(after), WAIT_S)
            assert await daemon.terminate() == 0, daemon.log_tail()
        finally:
            daemon.kill_now()
    assert ops(dc).count(6) == resumes + 1, daemon.log_tail()  # the restart resumed
    ours = [m for m in dc.messages.values() if m["author"]["id"] == str(dc.bot_id)]
    for tok in (first, later, after):
        assert sum(m["content"].count(tok) for m in ours) == 1, (tok, daemon.log_tail())
