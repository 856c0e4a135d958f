"""Operating relaybot as its owner does: /metrics scraped while it works, `relaybot status` while
it runs, `relaybot backup` during a burst of writes (and the restore), forgetting a user with
/forget_me and with `relaybot forget`. The daemon is the real App (with the real Telegram adapter
against the fake Bot API where the platform matters); the commands run as subprocesses."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import sqlite3
import sys
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot._lock import StoreLock
from bot.app import App
from bot.config import Config
from engine import Action, Command
from engine.models import Message
from engine.store import SqliteStore, Summary
from tests.fakes.openai_server import FakeOpenAI, error, hold, text, tool_call
from tests.fakes.recording_channel import RecordingChannel
from tests.fakes.telegram_server import FakeTelegram
from tests.ports import free_port
from tools import ToolContext, tool
from tools.errors import ConfigError

DM = 4242
gate: dict[str, asyncio.Event] = {}


@tool
async def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


@tool(destructive=True, summary="Wipe {target}")
async def wipe(target: str) -> str:
    """Wipe a target for good."""
    return f"wiped {target}"


@tool(background=True)
async def slow_job(topic: str, ctx: ToolContext) -> str:
    """Prepare a report in the background."""
    await gate["job"].wait()
    return f"report on {topic}"


@pytest.fixture(autouse=True)
def _gate() -> None:
    gate["job"] = asyncio.Event()


async def scrape(port: int) -> str:
    async with httpx.AsyncClient() as client:
        response = await client.get(f"http://127.0.0.1:{port}/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return response.text


def value(exposition: str, name: str, **labels: str) -> float:
    """The sum of the samples called `name` whose labels include `labels`."""
    return sum(
        s.value
        for family in text_string_to_metric_families(exposition)
        for s in family.samples
        if s.name == name and labels.items() <= s.labels.items()
    )


def cli_config(tmp_path: Path, config: Config) -> Path:
    """A config file for the commands, naming the daemon's store."""
    path = tmp_path / "cli.toml"
    path.write_text(
        f'[llm]\napi_key = "sk-cli-0123456789"\n\n[storage]\npath = "{config.storage.path}"\n'
    )
    return path


async def relaybot(
    *args: str, stdin: bytes = b"", env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


# -- metrics ---------------------------------------------------------------------------------


async def test_a_scrape_after_a_turn_shows_the_bot_figures_without_ids(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    port = free_port()
    async with FakeTelegram() as tg:
        config = make_config(
            metrics={"listen": f"127.0.0.1:{port}"},
            telegram={
                "enabled": True,
                "token": tg.token,
                "api_base_url": tg.base_url,
                "allowed_users": [str(DM)],
                "poll_timeout_s": 5,
            },
        )
        async with App(config, extra_tools=(lookup,)) as app:
            before = await scrape(port)
            llm.script(tool_call("lookup", {"q": "tea"}), text("Found tea."))
            tg.inject_message(DM, DM, "look up tea")
            await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "Found tea.")
            await app.dispatcher.wait_idle("telegram", str(DM))
            tg.inject_message(777, 777, "let me in")  # not on allowed_users
            await tg.wait_for_call("sendMessage", lambda p: "not allowed" in p.get("text", ""))
            tg.fail_next("sendMessage", 403, retry_after=None)
            llm.script(text("Nobody sees this."))
            tg.inject_message(DM, DM, "again")
            await tg.wait_for_call("sendMessage", status=403)
            await app.dispatcher.wait_idle("telegram", str(DM))
            after = await scrape(port)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("relaybot_messages_received_total", channel="telegram") == 2
    assert moved("relaybot_messages_refused_total", channel="telegram", reason="not_allowed") == 1
    assert moved("relaybot_messages_answered_total", channel="telegram") == 2
    assert moved("relaybot_turn_duration_seconds_count", outcome="answered") == 2
    assert moved("relaybot_llm_request_duration_seconds_count", model="fake-model") == 3
    assert moved("relaybot_llm_prompt_tokens_total", model="fake-model") > 0
    assert moved("relaybot_llm_completion_tokens_total", model="fake-model") > 0
    assert moved("relaybot_tool_calls_total", tool="lookup", outcome="ok") == 1
    assert moved("relaybot_platform_api_errors_total", channel="telegram") == 1
    assert moved("relaybot_store_operation_duration_seconds_count", operation="write") > 0
    assert value(after, "process_resident_memory_bytes") > 0
    assert value(after, "relaybot_store_size_bytes", file="db") > 0
    labels = {
        v
        for family in text_string_to_metric_families(after)
        for s in family.samples
        for v in s.labels.values()
    }
    assert not [v for v in labels if str(DM) in v or "777" in v or tg.token in v]
    assert {"telegram", "fake-model", "lookup", "not_allowed"} <= labels


async def test_the_state_gauges_show_what_waits(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    port = free_port()
    channel = RecordingChannel()
    config = make_config(metrics={"listen": f"127.0.0.1:{port}"})
    async with App(config, channels=[channel], extra_tools=(wipe, slow_job)) as app:
        app.dispatcher.settings.allowed_users["test"] = {"u1"}
        llm.script(tool_call("wipe", {"target": "db"}))
        await app.dispatcher.handle_inbound(channel.message("wipe the db", chat_id="a"))
        await channel.wait_for("confirm", 1)
        llm.script(tool_call("slow_job", {"topic": "sales"}), text("Started."))
        await app.dispatcher.handle_inbound(channel.message("report please", chat_id="b"))
        await channel.wait_for("send", 1, chat_id="b")
        release, started = asyncio.Event(), asyncio.Event()
        llm.script(hold(release, text("at last"), started=started), text("and the next"))
        await app.dispatcher.handle_inbound(channel.message("first", chat_id="c"))
        await started.wait()
        await app.dispatcher.handle_inbound(channel.message("second", chat_id="c"))
        scraped = await scrape(port)
        release.set()
        gate["job"].set()
    assert value(scraped, "relaybot_confirmations_pending") == 1
    assert value(scraped, "relaybot_jobs_running") == 1
    assert value(scraped, "relaybot_turns_running") == 1
    assert value(scraped, "relaybot_chat_queue_depth_max") == 1
    assert value(scraped, "relaybot_chat_queue_depth_sum") == 1


async def test_a_metrics_port_in_use_is_a_config_error(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    with closing(socket.socket()) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = make_config(metrics={"listen": f"127.0.0.1:{port}"})
        with pytest.raises(ConfigError, match=r"metrics\.listen: cannot listen on .*in use"):
            async with App(config, channels=[RecordingChannel()]):
                pass


# -- status ----------------------------------------------------------------------------------


async def test_status_while_the_daemon_runs_shows_its_work(
    make_config: Callable[..., Config], llm: FakeOpenAI, tmp_path: Path
) -> None:
    channel = RecordingChannel()
    config = make_config(llm={"request_timeout_s": 10})
    cli = cli_config(tmp_path, config)
    lock = StoreLock(config.storage.resolved_path())  # as `relaybot run` holds it
    release = asyncio.Event()
    try:
        async with App(config, channels=[channel], extra_tools=(wipe, slow_job)) as app:
            app.dispatcher.settings.allowed_users["test"] = {"u1"}
            llm.script(tool_call("wipe", {"target": "db"}))
            await app.dispatcher.handle_inbound(channel.message("wipe the db", chat_id="a"))
            await channel.wait_for("confirm", 1)
            llm.script(tool_call("slow_job", {"topic": "sales"}), text("Started."))
            await app.dispatcher.handle_inbound(channel.message("report please", chat_id="b"))
            await channel.wait_for("send", 1, chat_id="b")
            llm.script(error(500, "the model is down"))
            await app.dispatcher.handle_inbound(channel.message("hello?", chat_id="d"))
            await channel.wait_for("send", 1, chat_id="d")
            started = asyncio.Event()
            llm.script(hold(release, text("at last"), started=started))
            await app.dispatcher.handle_inbound(channel.message("first", chat_id="c"))
            await started.wait()
            await app.dispatcher.handle_inbound(channel.message("second", chat_id="c"))
            await app.dispatcher.housekeeping.flush()  # the last errors reach the store

            code, shown, err = await relaybot("status", "-c", str(cli))
            assert code == 0, err
            code, raw, err = await relaybot("status", "--json", "-c", str(cli))
            assert code == 0, err
            release.set()
            gate["job"].set()
    finally:
        lock.release()
    assert f"daemon: running (pid {os.getpid()})" in shown
    assert "chats with queued messages: 1\n  test:c  1 message" in shown
    assert "running: 1\n  test:c  answering 1 message, for" in shown
    assert "confirmations pending: 1\n  test:a  user u1: Wipe db (wipe), expires in" in shown
    assert "background jobs: 1\n  test:b  slow_job for user u1, running since" in shown
    assert "last error per channel: 1\n  llm  " in shown and "the model is down" in shown
    status = json.loads(raw)
    assert status["daemon_pid"] == os.getpid()
    assert [(q["chat_id"], q["messages"]) for q in status["queued"]] == [("c", 1)]
    assert [c["tool"] for c in status["confirmations"]] == ["wipe"]
    assert [(j["tool"], j["state"]) for j in status["jobs"]] == [("slow_job", "running")]
    assert [r["chat_id"] for r in status["running"]] == ["c"]


async def test_status_without_a_store_says_where_it_looked(tmp_path: Path) -> None:
    cli = tmp_path / "cli.toml"
    cli.write_text(f'[llm]\napi_key = "sk-cli-0123456789"\n[storage]\npath = "{tmp_path}/no.db"\n')
    code, _, err = await relaybot("status", "-c", str(cli))
    assert code == 1 and f"there is no store at {tmp_path}/no.db" in err
    assert not (tmp_path / "no.db").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root reads a store another user owns")
async def test_reading_as_root_leaves_the_store_usable_by_its_owner(tmp_path: Path) -> None:
    db = tmp_path / "relaybot.db"
    async with SqliteStore(db):
        pass  # a store the daemon closed cleanly: no -wal, no -shm beside it
    os.chown(db, 4321, 4321)  # the daemon's own user (systemd's DynamicUser)
    cli = tmp_path / "cli.toml"
    cli.write_text(f'[llm]\napi_key = "sk-cli-0123456789"\n[storage]\npath = "{db}"\n')
    for command in (["status"], ["backup", str(tmp_path / "copy.db")]):
        code, _, err = await relaybot(*command, "-c", str(cli))
        assert code == 0, err
    assert owners_beside(db) == {"relaybot.db-shm": 4321, "relaybot.db-wal": 4321}


def owners_beside(db: Path) -> dict[str, int]:
    return {p.name: p.stat().st_uid for p in db.parent.glob(f"{db.name}-*")}


# -- backup ----------------------------------------------------------------------------------


async def test_a_backup_during_a_burst_holds_every_message_committed_before_it(
    tmp_path: Path,
) -> None:
    db = tmp_path / "relaybot.db"
    cli = tmp_path / "cli.toml"
    cli.write_text(f'[llm]\napi_key = "sk-cli-0123456789"\n[storage]\npath = "{db}"\n')
    target = tmp_path / "backups"
    target.mkdir()
    committed: list[int] = []
    async with SqliteStore(db) as store:
        conv = await store.conversations.active("t", "c1")
        enough = asyncio.Event()

        async def burst() -> None:
            n = 0
            while not done.is_set():
                n += 1
                committed.append(
                    await store.conversations.append(conv.id, Message.user(f"message {n}"))
                )
                if n == 300:
                    enough.set()

        done = asyncio.Event()
        writer = asyncio.create_task(burst())
        await enough.wait()
        before = len(committed)
        code, out, err = await relaybot("backup", str(target), "-c", str(cli))
        done.set()
        await writer
    assert code == 0, err
    [copy] = list(target.iterdir())
    assert copy.name.startswith("relaybot-") and f"backed up to {copy}" in out
    assert copy.stat().st_mode & 0o777 == 0o600
    with closing(sqlite3.connect(copy)) as backup:
        assert backup.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        ids = [r[0] for r in backup.execute("SELECT id FROM messages ORDER BY id")]
    assert len(ids) >= before  # everything committed before the backup began
    assert ids == committed[: len(ids)]  # and a moment's state: no gaps, nothing half-written

    code, _, err = await relaybot("backup", str(copy), "-c", str(cli))
    assert code == 1 and "exists already" in err

    # The restore as documented: the daemon stopped, the copy put in place, the old WAL gone.
    shutil.copyfile(copy, db)
    for stale in ("relaybot.db-wal", "relaybot.db-shm"):
        (tmp_path / stale).unlink(missing_ok=True)
    async with SqliteStore(db) as restored:
        history = await restored.conversations.history(conv.id, limit=100_000)
    assert len(history) == len(ids)


# -- forgetting ------------------------------------------------------------------------------


async def test_forget_me_asks_then_deletes_only_the_asker(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    channel = RecordingChannel()
    config = make_config(tools={"builtins": ["remember", "recall"]})
    async with App(config, channels=[channel], extra_tools=(slow_job,)) as app:
        d = app.dispatcher
        d.settings.allowed_users["test"] = {"u1", "u2"}
        for user in ("u1", "u2"):
            llm.script(tool_call("remember", {"text": f"{user} likes tea"}), text("Noted."))
            await d.handle_inbound(
                channel.message("remember tea", chat_id=f"dm-{user}", user_id=user)
            )
            await channel.wait_for("send", 1, chat_id=f"dm-{user}")
            await d.wait_idle("test", f"dm-{user}")
        llm.script(tool_call("slow_job", {"topic": "mine"}), text("Started."))
        await d.handle_inbound(channel.message("report", chat_id="dm-u1", user_id="u1"))
        await channel.wait_for("send", 2, chat_id="dm-u1")
        [job] = d.background.runner.running

        asked = await d.handle_command(
            channel.message("/forget_me", chat_id="dm-u1"), Command.FORGET_ME
        )
        assert "2 remembered facts" not in asked.text and "1 remembered fact" in asked.text
        assert [b.label for b in asked.buttons] == ["Delete everything", "Keep it"]
        yes = asked.buttons[0].action
        other = await d.handle_action(Action("test", "dm-u1", "u2", yes))
        assert other.text.startswith("Only the person who sent /forget_me")
        assert await app.store.memory.items("test:u1")

        done = await d.handle_action(Action("test", "dm-u1", "u1", yes))
        assert done.text.startswith("Done: I deleted") and not done.buttons
        assert await app.store.memory.items("test:u1") == []
        assert job not in d.background.runner.running  # the reminder or report never comes
        conv = await app.store.conversations.active("test", "dm-u1")
        assert await app.store.conversations.history(conv.id) == []
        assert [n.text for n in await app.store.memory.items("test:u2")] == ["u2 likes tea"]
        again = await d.handle_command(
            channel.message("/forget_me", chat_id="dm-u1"), Command.FORGET_ME
        )
        assert again.text == "I have nothing stored about you." and not again.buttons
        llm.script(text("Hello again."))  # the chat goes on, in a conversation of its own
        await d.handle_inbound(channel.message("hi", chat_id="dm-u1", user_id="u1"))
        await channel.wait_for("send", 3, chat_id="dm-u1")
        await d.wait_idle("test", "dm-u1")
        conv = await app.store.conversations.active("test", "dm-u1")
        assert [m.text for m in await app.store.conversations.history(conv.id)] == [
            "hi",
            "Hello again.",
        ]


async def test_a_summary_covering_a_forgotten_user_is_never_sent_again(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    """The daemon keeps summaries it read in memory: forgetting drops those too."""
    channel = RecordingChannel()
    async with App(make_config(), channels=[channel]) as app:
        d = app.dispatcher
        d.settings.allowed_users["test"] = {"u1", "u2"}
        conv = await app.store.conversations.active("test", "g", is_private=False)
        first = await app.store.conversations.append(
            conv.id, Message.user("my secret plan", speaker="user-u1"), user_id="u1"
        )
        last = await app.store.conversations.append(conv.id, Message.assistant("noted"))
        await app.store.context.save_summary(Summary(conv.id, "SECRET-SUMMARY", first, last))

        async def turn(said: str) -> str:
            llm.script(text("I cannot say."))
            await d.handle_inbound(
                channel.message(said, chat_id="g", user_id="u2", is_private=False)
            )
            await d.wait_idle("test", "g")
            return json.dumps(llm.requests[-1])

        assert "SECRET-SUMMARY" in await turn("what was the plan?")  # read, and kept in memory
        done = await d.handle_action(Action("test", "g", "u1", "forget:yes:u1"))
        assert "1 conversation summary" in done.text
        assert "SECRET-SUMMARY" not in await turn("and now?")


async def test_forget_from_the_command_line_asks_also_while_the_daemon_runs(
    tmp_path: Path,
) -> None:
    db = tmp_path / "relaybot.db"
    cli = tmp_path / "cli.toml"
    cli.write_text(f'[llm]\napi_key = "sk-cli-0123456789"\n[storage]\npath = "{db}"\n')
    async with SqliteStore(db) as store:
        for user in ("5", "6", "7"):
            await store.memory.add(f"telegram:{user}", f"{user}'s secret")
    lock = StoreLock(db)  # the daemon hears of it (tests/test_forget_everywhere.py)
    try:
        code, out, err = await relaybot("forget", "--user", "telegram:7", "--yes", "-c", str(cli))
    finally:
        lock.release()
    assert code == 0 and "Deleted 1 remembered fact" in out, err

    code, out, _ = await relaybot("forget", "--user", "telegram:5", "-c", str(cli))
    assert code == 1 and "1 remembered fact" in out  # no terminal to ask on
    assert "Nothing deleted" in out
    code, out, err = await relaybot("forget", "--user", "telegram:5", "--yes", "-c", str(cli))
    assert code == 0, err
    assert "Deleted 1 remembered fact" in out
    async with SqliteStore(db) as store:
        assert await store.memory.items("telegram:5") == []
        assert [n.text for n in await store.memory.items("telegram:6")] == ["6's secret"]
