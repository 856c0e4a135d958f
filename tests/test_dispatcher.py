"""The dispatcher through the real App: store, loop, fake LLM, and a recording channel."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from bot.app import App
from bot.config import Config
from engine import Choice, Command, DecisionStatus, MessageRef, Press, Untrusted
from engine.loop import ConversationKey
from engine.store import ConfirmationState, SqliteStore
from engine.work import Notice
from tests.fakes.openai_server import FakeOpenAI, error, hold, text, tool_call
from tests.fakes.recording_channel import RecordingChannel
from tools import ToolContext, tool
from tools.errors import StoreError

deleted: list[str] = []
gates: dict[str, asyncio.Event] = {}


@tool(destructive=True, summary="Delete the item {name}")
async def delete_item(name: str) -> str:
    """Delete an item for good."""
    deleted.append(name)
    return f"deleted {name}"


@tool(background=True)
async def slow_report(topic: str) -> str:
    """Prepare a report in the background."""
    await gates["job"].wait()
    return f"report on {topic}: all good"


@tool
async def whoami(ctx: ToolContext) -> str:
    """Say who is asking."""
    return f"{ctx.channel}/{ctx.chat_id}/{ctx.user_id}"


@tool(background=True)
async def gated_report(topic: str) -> str:
    """Prepare a report in the background (asks first: [tools] confirm makes it destructive,
    on this object, so no other test shares it)."""
    await gates["job"].wait()
    return f"report on {topic}: all good"


TOOLS = (delete_item, slow_report, whoami)


@pytest.fixture(autouse=True)
async def _reset() -> None:
    deleted.clear()
    gates["job"] = asyncio.Event()


@pytest.fixture
def config(make_config: Callable[..., Config]) -> Config:
    return make_config()


@asynccontextmanager
async def running(
    config: Config, channel: RecordingChannel | None = None
) -> AsyncIterator[tuple[App, RecordingChannel]]:
    channel = channel or RecordingChannel()
    app = App(config, channels=[channel], extra_tools=TOOLS)
    async with app:
        app.dispatcher.settings.allowed_users["test"] = {"u1", "u2"}
        yield app, channel


def press(confirmation_id: str, user_id: str, choice: Choice, chat_id: str = "c1") -> Press:
    """A press on the recording channel's chat, as an adapter would report it."""
    return Press("test", chat_id, user_id, confirmation_id, choice)


def db_rows(path: Path, sql: str) -> list[Any]:
    with sqlite3.connect(path) as db:
        return db.execute(sql).fetchall()


async def test_reply_in_the_same_chat(config: Config, llm: FakeOpenAI) -> None:
    llm.script(text("hello Alice"))
    async with running(config) as (app, ch):
        await app.dispatcher.handle_inbound(ch.message("hi", message_id="m1"))
        sent = await ch.wait_for("send")
    assert sent[0].text == "hello Alice" and sent[0].reply_to == "m1" and sent[0].chat_id == "c1"
    assert llm.requests[0]["messages"][0]["role"] == "system"


async def test_message_persisted_before_the_llm_call(config: Config, llm: FakeOpenAI) -> None:
    release = asyncio.Event()
    llm.script(hold(release, text("late answer")))
    path = config.storage.resolved_path()
    async with running(config) as (app, ch):
        await app.dispatcher.handle_inbound(ch.message("remember me", message_id="m1"))
        await llm.wait_requests(1)
        # The LLM has the request in hand; the message is already on disk.
        assert db_rows(path, "SELECT text FROM inbox") == [("remember me",)]
        assert ("user", "remember me") in db_rows(path, "SELECT role, content FROM messages")
        release.set()
        await ch.wait_for("send")


async def test_order_within_a_chat_and_concurrency_across_chats(
    config: Config, llm: FakeOpenAI
) -> None:
    release_a = asyncio.Event()
    llm.script(hold(release_a, text("answer A1")))
    async with running(config) as (app, ch):
        d = app.dispatcher
        await d.handle_inbound(ch.message("A1", chat_id="a", message_id="a1"))
        await llm.wait_requests(1)
        await d.handle_inbound(ch.message("A2", chat_id="a", message_id="a2"))
        await d.handle_inbound(ch.message("A3", chat_id="a", message_id="a3"))
        # Chat B is answered while chat A's turn is still waiting for the model.
        await d.handle_inbound(ch.message("B1", chat_id="b", message_id="b1"))
        b = await ch.wait_for("send", chat_id="b")
        assert b[0].text == "echo: B1"
        assert ch.texts(chat_id="a") == []
        release_a.set()
        a = await ch.wait_for("send", 2, chat_id="a")
    assert [s.text for s in a] == ["answer A1", "echo: A2\n\nA3"]
    assert a[1].reply_to == "a3"
    # The queued messages were folded into one turn (one user message: roles alternate), after
    # A1's answer, in order.
    follow = next(r for r in llm.requests if "A2" in str(r["messages"]))["messages"]
    roles = [(m["role"], m.get("content")) for m in follow[1:]]
    assert roles == [("user", "A1"), ("assistant", "answer A1"), ("user", "A2\n\nA3")]


async def test_duplicate_delivery_answered_once(config: Config, llm: FakeOpenAI) -> None:
    async with running(config) as (app, ch):
        msg = ch.message("once", message_id="same")
        await app.dispatcher.handle_inbound(msg)
        await app.dispatcher.handle_inbound(msg)
        await ch.wait_for("send")
        await app.dispatcher.wait_idle("test", "c1")
    assert len(llm.requests) == 1 and ch.texts() == ["echo: once"]


async def test_refused_user_gets_their_id_and_no_llm_call(config: Config, llm: FakeOpenAI) -> None:
    async with running(config) as (app, ch):
        await app.dispatcher.handle_inbound(ch.message("let me in", user_id="stranger"))
        sent = await ch.wait_for("send")
    assert "not allowed" in sent[0].text and "stranger" in sent[0].text
    assert llm.requests == []


async def test_tool_gets_its_own_chat_identity(config: Config, llm: FakeOpenAI) -> None:
    llm.script(tool_call("whoami", {}), text("done"))
    async with running(config) as (app, ch):
        await app.dispatcher.handle_inbound(ch.message("who?", chat_id="c9", user_id="u2"))
        await ch.wait_for("send")
    assert llm.requests[1]["messages"][-1]["content"] == "test/c9/u2"


async def _ask_delete(app: App, ch: RecordingChannel, llm: FakeOpenAI) -> str:
    llm.script(tool_call("delete_item", {"name": "report.txt"}), text("Deleted it."))
    await app.dispatcher.handle_inbound(ch.message("delete report.txt"))
    shown = await ch.wait_for("confirm")
    assert shown[-1].text == "Delete the item report.txt"
    assert shown[-1].prompt is not None
    return shown[-1].prompt.id


async def test_confirmation_by_requester_runs_once(config: Config, llm: FakeOpenAI) -> None:
    async with running(config) as (app, ch):
        cid = await _ask_delete(app, ch, llm)
        assert deleted == []
        first = await app.dispatcher.handle_press(press(cid, "u1", Choice.ONCE))
        second = await app.dispatcher.handle_press(press(cid, "u1", Choice.ONCE))
        assert first.status is DecisionStatus.APPROVED
        assert second.status is DecisionStatus.ALREADY_DECIDED
        await ch.wait_for("send")
        resolved = await ch.wait_for("resolve", 2)
    assert deleted == ["report.txt"]
    assert ch.texts() == ["Deleted it."]
    assert resolved[-1].text.startswith("✅ Done")


async def test_confirmation_by_another_user_runs_nothing(config: Config, llm: FakeOpenAI) -> None:
    async with running(config) as (app, ch):
        cid = await _ask_delete(app, ch, llm)
        d = await app.dispatcher.handle_press(press(cid, "u2", Choice.ONCE))
        assert d.status is DecisionStatus.NOT_YOURS and "Only user-u1" in d.message
        assert deleted == []
        d = await app.dispatcher.handle_press(press(cid, "u1", Choice.CANCEL))
        assert d.status is DecisionStatus.DECLINED
        await ch.wait_for("send")
        resolved = await ch.wait_for("resolve")
    assert deleted == [] and resolved[0].text.startswith("✖️ Cancelled")
    assert "declined" in llm.requests[-1]["messages"][-1]["content"]


async def test_expired_confirmation_never_runs(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    config = make_config(tools={"confirmation_timeout_s": 1e-9})  # below float resolution
    async with running(config) as (app, ch):
        cid = await _ask_delete(app, ch, llm)
        d = await app.dispatcher.handle_press(press(cid, "u1", Choice.ONCE))
        assert d.status is DecisionStatus.EXPIRED
        resolved = await ch.wait_for("resolve")
        await ch.wait_for("send")
    assert deleted == [] and resolved[0].text.startswith("⌛ Expired")
    assert "expired" in llm.requests[-1]["messages"][-1]["content"]


async def test_confirmation_survives_restart(config: Config, llm: FakeOpenAI) -> None:
    async with running(config) as (app, ch):
        cid = await _ask_delete(app, ch, llm)
    async with running(config) as (app, ch2):
        d = await app.dispatcher.handle_press(press(cid, "u1", Choice.ONCE))
        assert d.status is DecisionStatus.APPROVED
        await ch2.wait_for("send")
    assert deleted == ["report.txt"] and ch2.texts() == ["Deleted it."]


async def test_a_press_while_stopping_is_not_taken_and_works_after_the_restart(
    config: Config, llm: FakeOpenAI
) -> None:
    """Stopping, the engine cannot resume a turn any more: a press then (Cancel included) is
    answered "press again", the buttons stay, and the confirmation is still open after it."""
    gates["turn"] = asyncio.Event()

    @tool
    async def long_task() -> str:
        """Work for a while."""
        await gates["turn"].wait()
        return "finished"

    def by_chat(body: dict[str, Any]) -> Any:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return text("Deleted it." if "deleted" in last["content"] else "Done with it.")
        return tool_call("long_task", {}) if last["content"] == "work" else text("?")

    llm.default = by_chat
    channel = RecordingChannel()
    async with App(config, channels=[channel], extra_tools=(*TOOLS, long_task)) as app:
        d = app.dispatcher
        d.settings.allowed_users["test"] = {"u1"}
        llm.script(tool_call("delete_item", {"name": "report.txt"}))
        await d.handle_inbound(channel.message("delete report.txt"))
        [shown] = await channel.wait_for("confirm")
        assert shown.prompt is not None
        cid = shown.prompt.id
        await d.handle_inbound(channel.message("work", chat_id="c2"))
        await llm.wait_requests(2)  # the other chat's turn runs its tool now
        closing = asyncio.create_task(d.queues.aclose(30))  # as a SIGTERM would
        await asyncio.sleep(0)  # let it begin
        for choice in (Choice.CANCEL, Choice.ONCE):
            decision = await d.handle_press(press(cid, "u1", choice))
            assert decision.status is DecisionStatus.NOT_NOW and not decision.accepted
            assert "Press again" in decision.message
        rows = db_rows(config.storage.resolved_path(), "SELECT state FROM confirmations")
        assert rows == [("pending",)]
        gates["turn"].set()
        await closing
    assert deleted == []
    async with running(config) as (app, ch2):
        decision = await app.dispatcher.handle_press(press(cid, "u1", Choice.ONCE))
        assert decision.status is DecisionStatus.APPROVED
        await ch2.wait_for("send")
    assert deleted == ["report.txt"]


async def test_new_message_cancels_pending_confirmation(config: Config, llm: FakeOpenAI) -> None:
    async with running(config) as (app, ch):
        cid = await _ask_delete(app, ch, llm)
        llm.script(text("ok, never mind"))
        await app.dispatcher.handle_inbound(ch.message("actually, don't"))
        await ch.wait_for("send")
        resolved = await ch.wait_for("resolve")
        late = await app.dispatcher.handle_press(press(cid, "u1", Choice.ONCE))
    assert late.status is DecisionStatus.ALREADY_DECIDED
    assert deleted == [] and "Cancelled" in resolved[0].text
    sent = llm.requests[-1]["messages"]
    tool_msg = next(m for m in sent if m["role"] == "tool")
    assert tool_msg["content"].startswith("cancelled: the user sent a new message")
    assert sent[-1] == {"role": "user", "content": "actually, don't"}


async def test_background_result_is_tool_data_in_its_own_chat(
    config: Config, llm: FakeOpenAI
) -> None:
    llm.script(tool_call("slow_report", {"topic": "sales"}), text("Working on it."))
    async with running(config) as (app, ch):
        await app.dispatcher.handle_inbound(ch.message("report please", chat_id="r1"))
        await ch.wait_for("send", chat_id="r1")
        llm.script(text("Your report: all good."))
        gates["job"].set()
        sent = await ch.wait_for("send", 2, chat_id="r1")
    assert sent[1].text == "Your report: all good."
    follow = llm.requests[-1]["messages"]
    assert follow[-2]["role"] == "assistant" and follow[-2]["tool_calls"]
    assert follow[-1]["role"] == "tool" and "report on sales: all good" in follow[-1]["content"]
    assert not any(m["role"] == "user" and "report on" in str(m["content"]) for m in follow)


async def test_an_approved_background_tool_starts_its_job_and_the_turn_answers(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    """A background tool that asks first (here by [tools] confirm; after untrusted content by
    containment: remind_me, delegate) runs as a job once approved: the turn does not wait for
    it (it did, until the job ended: a reminder held its chat until it was due)."""
    config = make_config(tools={"confirm": ["gated_report"]})
    llm.script(tool_call("gated_report", {"topic": "q4"}), text("Started it."))
    ch = RecordingChannel()
    async with App(config, channels=[ch], extra_tools=(gated_report,)) as app:
        app.dispatcher.settings.allowed_users["test"] = {"u1"}
        await app.dispatcher.handle_inbound(ch.message("report please", chat_id="r2"))
        prompt = (await ch.wait_for("confirm", chat_id="r2"))[0].prompt
        assert prompt is not None
        await app.dispatcher.handle_press(press(prompt.id, "u1", Choice.ONCE, chat_id="r2"))
        sent = await ch.wait_for("send", chat_id="r2")  # the job still waits on its gate
        assert sent[0].text == "Started it."
        llm.script(text("Your report: all good."))
        gates["job"].set()
        sent = await ch.wait_for("send", 2, chat_id="r2")
    assert sent[1].text == "Your report: all good."


async def test_interrupted_job_reported_after_restart(config: Config, llm: FakeOpenAI) -> None:
    llm.script(tool_call("slow_report", {"topic": "q3"}), text("Started."))
    async with running(config) as (app, ch):
        await app.dispatcher.handle_inbound(ch.message("report"))
        await ch.wait_for("send")
    async with running(config) as (app, ch2):
        sent = await ch2.wait_for("send")
    assert "interrupted by a restart" in sent[0].text
    async with running(config) as (app, ch3):  # told once, not at every start
        await app.dispatcher.wait_idle("test", "c1")
    assert ch3.texts() == []


async def test_llm_outage_gives_a_clear_message(
    config: Config, llm: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    llm.default = lambda body: error(503, "upstream overloaded at 10.0.0.7:8000")
    async with running(config) as (app, ch):
        await app.dispatcher.handle_inbound(ch.message("hello?"))
        sent = await ch.wait_for("send")
    assert "server failed on this request" in sent[0].text and "saved" in sent[0].text
    # The provider's words and addresses go to the log, never into the chat.
    assert "overloaded" not in sent[0].text and "10.0.0.7" not in sent[0].text
    assert "upstream overloaded at 10.0.0.7:8000" in caplog.text


async def test_stop_cancels_running_turn_and_no_later_request_carries_it(
    config: Config, llm: FakeOpenAI
) -> None:
    started = asyncio.Event()
    never = asyncio.Event()

    @tool
    async def forever() -> str:
        started.set()
        await never.wait()
        return "never"

    app_tools = (*TOOLS, forever)
    llm.script(tool_call("forever", {}))
    channel = RecordingChannel()
    app = App(config, channels=[channel], extra_tools=app_tools)
    async with app:
        app.dispatcher.settings.allowed_users["test"] = {"u1"}
        await app.dispatcher.handle_inbound(channel.message("go"))
        await started.wait()
        reply = (await app.dispatcher.handle_command(channel.message("/stop"), Command.STOP)).text
        assert reply == "Stopped."
        await app.dispatcher.wait_idle("test", "c1")
        llm.script(text("fresh"))
        await app.dispatcher.handle_inbound(channel.message("next"))
        await channel.wait_for("send")
    sent = llm.requests[-1]["messages"]
    assert [(m["role"], m["content"]) for m in sent[1:]] == [("user", "next")]  # "go": stopped


async def test_reset_starts_fresh_conversation(config: Config, llm: FakeOpenAI) -> None:
    async with running(config) as (app, ch):
        await app.dispatcher.handle_inbound(ch.message("first"))
        await ch.wait_for("send")
        reply = (await app.dispatcher.handle_command(ch.message("/reset"), Command.RESET)).text
        assert reply == "Started a fresh conversation."
        await app.dispatcher.handle_inbound(ch.message("second"))
        await ch.wait_for("send", 2)
    assert [m["content"] for m in llm.requests[-1]["messages"][1:]] == ["second"]


async def test_history_survives_restart(config: Config, llm: FakeOpenAI) -> None:
    async with running(config) as (app, ch):
        await app.dispatcher.handle_inbound(ch.message("my name is Bob"))
        await ch.wait_for("send")
    async with running(config) as (app, ch2):
        await app.dispatcher.handle_inbound(ch2.message("what is my name?"))
        await ch2.wait_for("send")
    contents = [m["content"] for m in llm.requests[-1]["messages"]]
    assert "my name is Bob" in contents and "echo: my name is Bob" in contents


async def test_store_migrates_an_older_file(tmp_path: Path) -> None:
    from engine.store import MIGRATIONS

    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:  # a file written by the first schema version
        db.executescript(MIGRATIONS[0])
        db.execute("PRAGMA user_version = 1")
        db.execute("INSERT INTO conversations(channel, chat_id, created_at) VALUES ('t','c',0)")
    async with SqliteStore(path) as store:
        assert await store.schema_version() == len(MIGRATIONS)
        assert (await store.conversations.active("t", "c")).id == 1
        note = await store.memory.add("t:u", "likes tea")
        assert [(i.id, i.text) for i in await store.memory.items("t:u")] == [(note, "likes tea")]
    async with SqliteStore(tmp_path / "fresh.db") as store:
        assert await store.schema_version() == len(MIGRATIONS)
    with sqlite3.connect(path) as db:  # a newer relaybot's, whose last migration contracts
        db.execute("PRAGMA user_version = 99")
        db.execute("UPDATE schema_compat SET readable_from = 99")
    with pytest.raises(StoreError, match="newer than this relaybot knows"):
        async with SqliteStore(path):
            pass


async def test_approved_action_cut_off_by_restart_is_never_rerun(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    config = make_config(engine={"shutdown_grace_s": 0})
    started = asyncio.Event()
    runs: list[str] = []

    @tool(destructive=True)
    async def wipe_disk(disk: str) -> str:
        """Wipe a disk."""
        runs.append(disk)
        started.set()
        await asyncio.Event().wait()  # still running when the daemon goes down
        return "wiped"

    channel = RecordingChannel()
    llm.script(tool_call("wipe_disk", {"disk": "sdb"}))
    async with App(config, channels=[channel], extra_tools=(wipe_disk,)) as app:
        app.dispatcher.settings.allowed_users["test"] = {"u1"}
        await app.dispatcher.handle_inbound(channel.message("wipe sdb"))
        shown = await channel.wait_for("confirm")
        assert shown[0].prompt is not None
        await app.dispatcher.handle_press(press(shown[0].prompt.id, "u1", Choice.ONCE))
        await started.wait()
    channel2 = RecordingChannel()
    async with App(config, channels=[channel2], extra_tools=(wipe_disk,)) as app:
        told = await channel2.wait_for("send")
        await app.dispatcher.wait_idle("test", "c1")
    assert runs == ["sdb"]  # ran once, before the restart; never again without a new yes
    assert "may have completed" in told[0].text and "may or may not" not in told[0].text
    resolved = await channel2.wait_for("resolve")
    assert resolved[0].text.startswith("⚠️ Interrupted by a restart")


def test_config_lookup_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.config import find_config

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RELAYBOT_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert find_config() == tmp_path / "xdg" / "relaybot" / "config.toml"
    (tmp_path / "config.toml").write_text("")
    assert find_config() == Path("config.toml")
    monkeypatch.setenv("RELAYBOT_CONFIG", "/etc/relaybot/config.toml")
    assert find_config() == Path("/etc/relaybot/config.toml")
    assert find_config("explicit.toml") == Path("explicit.toml")


async def test_stop_cancels_a_pending_confirmation(config: Config, llm: FakeOpenAI) -> None:
    async with running(config) as (app, ch):
        cid = await _ask_delete(app, ch, llm)
        reply = (await app.dispatcher.handle_command(ch.message("/stop"), Command.STOP)).text
        assert reply == "Stopped."
        resolved = await ch.wait_for("resolve")
        late = await app.dispatcher.handle_press(press(cid, "u1", Choice.ONCE))
        await app.dispatcher.wait_idle("test", "c1")
    assert "Cancelled" in resolved[0].text
    assert late.status is DecisionStatus.ALREADY_DECIDED and deleted == []


async def test_a_press_counts_only_from_the_requests_platform_chat_and_allowed_user(
    config: Config, llm: FakeOpenAI
) -> None:
    async with running(config) as (app, ch):
        cid = await _ask_delete(app, ch, llm)
        # the same user id on another platform (a Discord user who is not allowlisted)
        other_platform = Press("discord", "c1", "u1", cid, Choice.ONCE)
        assert (await app.dispatcher.handle_press(other_platform)).status is DecisionStatus.UNKNOWN
        # the requester, but from another chat (a forged payload)
        elsewhere = press(cid, "u1", Choice.ONCE, chat_id="c2")
        assert (await app.dispatcher.handle_press(elsewhere)).status is DecisionStatus.UNKNOWN
        # the requester, removed from allowed_users meanwhile
        app.dispatcher.settings.allowed_users["test"] = {"u2"}
        removed = await app.dispatcher.handle_press(press(cid, "u1", Choice.ONCE))
        assert removed.status is DecisionStatus.NOT_YOURS
        app.dispatcher.settings.allowed_users["test"] = {"u1"}
        ok = await app.dispatcher.handle_press(press(cid, "u1", Choice.ONCE))
        assert ok.status is DecisionStatus.APPROVED
        await ch.wait_for("send")
    assert deleted == ["report.txt"]


async def test_an_overlong_message_gets_a_short_reply_and_reaches_no_model(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    config = make_config(access={"max_message_chars": 1000})
    async with running(config) as (app, ch):
        await app.dispatcher.handle_inbound(ch.message("x" * 100_000))
        sent = await ch.wait_for("send")
    assert "too long" in sent[0].text and "1,000" in sent[0].text
    assert llm.requests == []
    assert db_rows(config.storage.resolved_path(), "SELECT COUNT(*) FROM inbox") == [(0,)]


async def test_retry_replaces_the_last_answer_and_undo_forgets_the_exchange(
    config: Config, llm: FakeOpenAI
) -> None:
    llm.script(text("first try"), text("second try"), text("third"))
    async with running(config) as (app, ch):
        await app.dispatcher.handle_inbound(ch.message("a riddle"))
        await ch.wait_for("send")
        reply = (await app.dispatcher.handle_command(ch.message("/retry"), Command.RETRY)).text
        assert reply == "Asking again…"
        await ch.wait_for("send", 2)
        again = [m["content"] for m in llm.requests[1]["messages"] if m["role"] != "system"]
        assert again == ["a riddle"]  # the question again, without the replaced answer
        await app.dispatcher.handle_inbound(ch.message("another"))
        await ch.wait_for("send", 3)
        assert (await app.dispatcher.handle_command(ch.message("/undo"), Command.UNDO)).text == (
            "Forgot your last message and my answer."
        )
        conv = await app.store.conversations.active("test", "c1")
        kept = [m.text for m in await app.store.conversations.history(conv.id)]
    assert ch.texts() == ["first try", "second try", "third"]
    assert kept == ["a riddle", "second try"]


async def test_a_press_made_while_a_message_waits_in_the_queue_runs_first(
    config: Config, llm: FakeOpenAI
) -> None:
    """The chat is busy (a notice on its way) when a new message arrives, then the user presses
    Confirm: the message's turn runs the approved action first, so its result is recorded
    before the message; /stop during the action stops that turn (no later request carries
    it) and still leaves the message answered."""
    on_its_way, release = asyncio.Event(), asyncio.Event()
    shredding, never = asyncio.Event(), asyncio.Event()

    class Busy(RecordingChannel):
        async def send(
            self,
            chat_id: str,
            text: str,
            *,
            reply_to: str | None = None,
            formatted: bool = True,
            once: str | None = None,
            untrusted: Untrusted | None = None,
        ) -> MessageRef:
            if text == "one moment":
                on_its_way.set()
                await release.wait()
            return await super().send(chat_id, text, reply_to=reply_to, formatted=formatted)

    @tool(destructive=True, summary="Shred {name}")
    async def shred(name: str) -> str:
        """Shred an item for good."""
        shredding.set()
        await never.wait()
        return f"shredded {name}"

    llm.script(tool_call("shred", {"name": "x"}))
    channel = Busy()
    async with App(config, channels=[channel], extra_tools=(*TOOLS, shred)) as app:
        app.dispatcher.settings.allowed_users["test"] = {"u1"}
        await app.dispatcher.handle_inbound(channel.message("shred x"))
        (shown,) = await channel.wait_for("confirm")
        assert shown.prompt is not None
        app.dispatcher.queues.put(ConversationKey("test", "c1"), Notice("one moment"))
        await on_its_way.wait()
        await app.dispatcher.handle_inbound(channel.message("and then?"))  # queued first
        decision = await app.dispatcher.handle_press(press(shown.prompt.id, "u1", Choice.ONCE))
        assert decision.status is DecisionStatus.APPROVED
        llm.script(text("here is what came next"))
        release.set()
        await shredding.wait()  # before the message's turn
        assert len(llm.requests) == 1
        stopped = await app.dispatcher.handle_command(channel.message("/stop"), Command.STOP)
        assert stopped.text == "Stopped."
        await channel.wait_for("send", 2)
    assert channel.texts()[-1] == "here is what came next"
    sent = llm.requests[-1]["messages"]
    assert [(m["role"], m["content"]) for m in sent[1:]] == [("user", "and then?")]


async def test_a_decline_whose_answer_died_with_the_process_is_given_after_the_restart(
    config: Config, llm: FakeOpenAI
) -> None:
    """A SIGKILL right after a press on Cancel leaves the confirmation declined and its call
    without a result (the Decided item died with the process; found by the soak). The restart
    records the refusal and finishes that turn by itself, before anything new in the chat: the
    user hears back without writing again, the model never reads "No result was recorded", and
    every call keeps its result before the next message."""
    async with running(config) as (app, ch):
        cid = await _ask_delete(app, ch, llm)
        # what the press commits before its Decided item runs (the process dies there)
        assert await app.dispatcher.store.confirmations.transition(
            cid, ConfirmationState.PENDING, ConfirmationState.DECLINED
        )
    llm.script(text("Hello again."))  # after "Deleted it.", still scripted for the first turn
    async with running(config) as (app, ch):
        await ch.wait_for("send")  # nobody wrote since the restart
        await app.dispatcher.handle_inbound(ch.message("hello"))
        await ch.wait_for("send", 2)
        await app.dispatcher.wait_idle("test", "c1")
    assert ch.texts() == ["Deleted it.", "Hello again."]
    assert deleted == []
    sent = llm.requests[-1]["messages"]
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[3]["content"] == "The user declined this action; it was not run."


async def test_a_turn_stopped_while_its_approved_action_ran_stays_stopped_after_a_restart(
    config: Config, llm: FakeOpenAI
) -> None:
    """/stop while an approved action runs ends its turn (the confirmation is recorded as
    interrupted, the turn as stopped). A restart finishes what a crash cut off, not this:
    nothing is said until the user writes again, and then once, without the stopped turn."""
    started, release = asyncio.Event(), asyncio.Event()

    @tool(destructive=True, summary="Shred the item {name}")
    async def shred(name: str) -> str:
        """Shred an item for good."""
        started.set()
        await release.wait()
        return f"shredded {name}"

    llm.script(tool_call("shred", {"name": "x"}))
    async with App(config, channels=[RecordingChannel()], extra_tools=(*TOOLS, shred)) as app:
        ch = app.dispatcher.channels["test"]
        assert isinstance(ch, RecordingChannel)
        app.dispatcher.settings.allowed_users["test"] = {"u1"}
        await app.dispatcher.handle_inbound(ch.message("shred x"))
        (shown,) = await ch.wait_for("confirm")
        assert shown.prompt is not None
        decision = await app.dispatcher.handle_press(press(shown.prompt.id, "u1", Choice.ONCE))
        assert decision.status is DecisionStatus.APPROVED
        await started.wait()
        stopped = await app.dispatcher.handle_command(ch.message("/stop"), Command.STOP)
        assert stopped.text == "Stopped."
        await app.dispatcher.wait_idle("test", "c1")
    llm.script(text("Hello again."))
    async with App(config, channels=[RecordingChannel()], extra_tools=(*TOOLS, shred)) as app:
        ch = app.dispatcher.channels["test"]
        assert isinstance(ch, RecordingChannel)
        app.dispatcher.settings.allowed_users["test"] = {"u1"}
        await app.dispatcher.handle_inbound(ch.message("hello"))
        await ch.wait_for("send")
        await app.dispatcher.wait_idle("test", "c1")
        assert ch.texts() == ["Hello again."]
    assert len(llm.requests) == 2
    sent = llm.requests[-1]["messages"]
    assert [(m["role"], m["content"]) for m in sent[1:]] == [("user", "hello")]


async def test_a_turn_waiting_on_its_second_prompt_after_a_decline_still_waits_after_a_restart(
    config: Config, llm: FakeOpenAI
) -> None:
    """The user declined the turn's first action and the model asked for a second one, whose
    prompt waits. That turn is not cut off: a restart leaves it waiting (it does not finish it
    as a crash's), and the press after the restart runs the second action once."""
    llm.script(
        tool_call("delete_item", {"name": "a"}),
        tool_call("delete_item", {"name": "b"}),
        text("Deleted b, kept a."),
    )
    async with running(config) as (app, ch):
        await app.dispatcher.handle_inbound(ch.message("delete a and b"))
        (first,) = await ch.wait_for("confirm")
        assert first.prompt is not None
        await app.dispatcher.handle_press(press(first.prompt.id, "u1", Choice.CANCEL))
        second = (await ch.wait_for("confirm", 2))[-1]
        assert second.prompt is not None and second.text == "Delete the item b"
        await app.dispatcher.wait_idle("test", "c1")
    async with running(config) as (app, ch):
        decision = await app.dispatcher.handle_press(press(second.prompt.id, "u1", Choice.ONCE))
        assert decision.status is DecisionStatus.APPROVED
        await ch.wait_for("send")
        await app.dispatcher.wait_idle("test", "c1")
        assert ch.texts() == ["Deleted b, kept a."]
    assert deleted == ["b"]
    sent = llm.requests[-1]["messages"]
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "tool", "assistant", "tool"]
    assert sent[3]["content"] == "The user declined this action; it was not run."
    assert sent[5]["content"] == "deleted b"
