"""Forget means forgotten everywhere, and a revoke is in force within two seconds (issue 39): what
a user said, the summary covering it and their memory never reach a model request again after
/forget_me, after any number of reloads, or after `relaybot forget` run while the daemon runs;
`relaybot users revoke` run meanwhile stops the daemon answering that user. The real App over a
real SQLite file and a real PostgreSQL server, the fake OpenAI server recording every request,
the command line's own functions opening their own connection to the store (as its process
would)."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator, Callable

import pytest

from bot._operate import forget
from bot._reload import Reloader
from bot._users import users
from bot.app import App
from bot.config import Config
from engine import Action
from engine.store import Summary
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.recording_channel import RecordingChannel
from tests.postgres import PostgresServer
from tools.builtins import user_owner

SECRETS = ("SECRET-SAID", "SECRET-SUMMARY", "SECRET-MEMORY")
Backend = Callable[..., Config]


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, make_config: Callable[..., Config]) -> Backend:
    """A config maker for the daemon and the command line, on one store of either backend."""
    if request.param == "sqlite":
        return make_config
    server: PostgresServer = request.getfixturevalue("postgres")
    url = server.new_database()
    return lambda **more: make_config(storage={"url": url}, instance={"id": "a"}, **more)


async def within(seconds: float, check: Callable[[], bool]) -> None:
    """Wait until `check()` holds, failing after `seconds` (what the daemon promises)."""
    async with asyncio.timeout(seconds):
        while not check():  # noqa: ASYNC110 (what the daemon's own tasks make true)
            await asyncio.sleep(0.02)


def since(llm: FakeOpenAI, mark: int) -> str:
    return "\n".join(json.dumps(r) for r in llm.requests[mark:])


@pytest.fixture
async def daemon(backend: Backend) -> AsyncIterator[tuple[App, RecordingChannel]]:
    channel = RecordingChannel(name="telegram")
    async with App(backend(), channels=[channel]) as app:
        app.dispatcher.settings.allowed_users["telegram"] = {"u1", "u2"}
        yield app, channel


async def seed(app: App, channel: RecordingChannel, llm: FakeOpenAI) -> None:
    """u1 says something in group g, a summary covers it, u1 has a memory; a turn of u2 in the
    group and one of u1 in private then show all of it reaches the model (and is kept in memory
    where it can be)."""
    mark = len(llm.requests)
    await turn(app, channel, "u1", "SECRET-SAID: I live at 5 Elm St")
    conv = await app.store.conversations.active("telegram", "g", is_private=False)
    [said, answer] = [i for i, _ in await app.store.context.messages_after(conv.id, 0, 10)]
    await app.store.context.save_summary(Summary(conv.id, "SECRET-SUMMARY", said, answer))
    await app.store.memory.add(user_owner("telegram", "u1"), "SECRET-MEMORY")
    await turn(app, channel, "u2", "what do you know?")
    await turn(app, channel, "u1", "and about me?", private=True)
    assert [s for s in SECRETS if s not in since(llm, mark)] == []


async def turn(
    app: App, channel: RecordingChannel, user: str, said: str, *, private: bool = False
) -> None:
    """`user` says something in group g, or in their private chat with the bot."""
    chat = f"dm-{user}" if private else "g"
    answered = len([s for s in channel.log if s.kind == "send" and s.chat_id == chat])
    msg = channel.message(said, chat_id=chat, user_id=user, is_private=private)
    await app.dispatcher.handle_inbound(msg)  # a refusal is decided here, before any queue
    if app.dispatcher.allowed("telegram", user):
        await channel.wait_for("send", answered + 1, chat_id=chat, timeout=10)
        await app.dispatcher.wait_idle("telegram", chat)  # the turn stored what it said


async def reload(app: App, backend: Backend, n: int) -> None:
    """A reload that builds a new model and tools (and a new context budget with them)."""
    config = backend(llm={"system_prompt": f"prompt {n}"}, memory={"max_tokens": 500 + n})
    assert await Reloader(app, None).apply(config)
    app.dispatcher.settings.allowed_users["telegram"] = {"u1", "u2"}


async def test_forget_me_after_reloads_reaches_no_model_request_again(
    daemon: tuple[App, RecordingChannel], backend: Backend, llm: FakeOpenAI
) -> None:
    app, channel = daemon
    await seed(app, channel, llm)
    for n in range(2):
        await reload(app, backend, n)
    await turn(app, channel, "u2", "still there?")  # read by the new tooling
    done = await app.dispatcher.handle_action(Action("telegram", "g", "u1", "forget:yes:u1"))
    assert done is not None and "1 conversation summary" in done.text
    mark = len(llm.requests)
    for n in range(2, 5):
        await turn(app, channel, "u2", f"what was said? {n}")
        await turn(app, channel, "u1", f"what do you know about me? {n}", private=True)
        await reload(app, backend, n)
    assert len(llm.requests) - mark == 6
    assert not any(s in since(llm, mark) for s in SECRETS)
    conv = await app.store.conversations.active("telegram", "g", is_private=False)
    kept = await app.store.context.summary(conv.id)
    assert kept is None or "SECRET" not in kept.text  # not written back either


async def test_the_command_line_forgets_and_revokes_while_the_daemon_runs(
    daemon: tuple[App, RecordingChannel], backend: Backend, llm: FakeOpenAI
) -> None:
    app, channel = daemon
    d = app.dispatcher
    cli = backend()
    out = io.StringIO()
    assert await users(cli, "allow", "telegram:u3", out) == 0
    await seed(app, channel, llm)
    await turn(app, channel, "u3", "I am let in")
    assert "I am let in" in channel.texts(chat_id="g")[-1]
    assert d.allowed("telegram", "u3")

    assert await forget(cli, "telegram:u1", True, out) == 0
    assert await users(cli, "revoke", "telegram:u3", out) == 0
    await within(2.0, lambda: not d.allowed("telegram", "u3"))

    mark, shown = len(llm.requests), len(channel.log)
    await turn(app, channel, "u3", "am I still answered?")
    assert len(llm.requests) == mark  # no model request for a revoked user
    assert not any("still answered" in s.text for s in channel.log[shown:])
    await turn(app, channel, "u2", "what was said before?")
    await turn(app, channel, "u1", "what do you know about me?", private=True)
    assert len(llm.requests) - mark == 2
    assert not any(s in since(llm, mark) for s in SECRETS)
    assert "Deleted" in out.getvalue() and "no longer let in" in out.getvalue()
