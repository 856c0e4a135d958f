"""A stopped request is never carried into a later one (issue 40), on every way to stop it:
/stop on Telegram (the real python-telegram-bot against the fake Bot API, in process and as
`relaybot run` killed with SIGKILL right after "Stopped." then started again) and on Discord
(real discord.py against the fake Discord), Ctrl-C in `relaybot chat` (a real subprocess on a
pseudo-terminal, then started again), and the web console's cancel of a waiting confirmation
(its real server over HTTP). The fake model records every request: the stopped text is in none
after the stop, while a message sent during the stopped turn is answered, on its own. Also: a
stop while a message's picture is fetched, /retry after a stop, /compact after one, the Telegram
test on PostgreSQL too, and the terminal's confirmation showing the whole command (item 10)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks._crash_rig import Daemon, write_files
from bot.app import App
from bot.config import Config
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, hold, text, tool_call
from tests.fakes.telegram_server import Call, FakeTelegram
from tests.test_cli import finish, relaybot, write_config
from tests.test_console import Terminal
from tests.test_console_web import free_port
from tests.test_discord import ALICE, CHANNEL, GUILD, callback, content, posts
from tests.test_telegram import DM, daemon, run_command, telegram_config

STOPPED = "please delete the old reports"


def later(llm: FakeOpenAI, after: int = 1) -> str:
    """Every request after the first `after`, as the model received them."""
    return json.dumps([r["messages"] for r in llm.requests[after:]])


def says(chat: int, words: str) -> Callable[[dict[str, Any]], bool]:
    return lambda p: p.get("chat_id") == chat and p.get("text") == words


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_telegram_stop_leaves_the_request_out_and_answers_what_came_meanwhile(
    make_config: Callable[..., Config],
    tg: FakeTelegram,
    llm: FakeOpenAI,
    backend: str,
    request: pytest.FixtureRequest,
) -> None:
    config = telegram_config(make_config, tg)
    if backend == "postgresql":  # several instances may share it: the same, through the store
        url = request.getfixturevalue("postgres").new_database()
        config = telegram_config(lambda **kw: make_config(storage={"url": url}, **kw), tg)
    stuck = asyncio.Event()
    llm.script(hold(stuck, text("Deleted them.")))
    try:
        async with daemon(config) as app:
            tg.inject_message(DM, DM, STOPPED)
            await llm.wait_requests(1, timeout=20)  # the model works on it
            tg.inject_message(DM, DM, "and how is the weather?")  # waits for the turn
            tg.inject_message(DM, DM, "/stop")
            await tg.wait_for_call("sendMessage", says(DM, "Stopped."))
            await tg.wait_for_call("sendMessage", says(DM, "echo: and how is the weather?"))
            tg.inject_message(DM, DM, "what is 2+2")
            await tg.wait_for_call("sendMessage", says(DM, "echo: what is 2+2"))
            await app.dispatcher.wait_idle("telegram", str(DM))  # its delivery recorded too
            tg.inject_message(DM, DM, "/stop")  # nothing runs: nothing answered is touched
            await tg.wait_for_call("sendMessage", says(DM, "Nothing to stop."))
            tg.inject_message(DM, DM, "and 3+3?")
            await tg.wait_for_call("sendMessage", says(DM, "echo: and 3+3?"))
    finally:
        stuck.set()
    assert STOPPED in json.dumps(llm.requests[0]["messages"])
    assert STOPPED not in later(llm) and "Deleted them." not in later(llm)
    assert [m["content"] for m in llm.requests[-1]["messages"][1:]] == [
        "and how is the weather?",
        "echo: and how is the weather?",
        "what is 2+2",
        "echo: what is 2+2",
        "and 3+3?",
    ]


async def test_a_stop_while_a_picture_is_fetched_stops_its_message(
    make_config: Callable[..., Config], tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    """/stop before the message reached the conversation (its picture still on its way): it
    is answered by "Stopped." and never taken into a request."""
    held = tg.hold("getFile")
    async with daemon(telegram_config(make_config, tg, llm={"vision": True})):
        tg.inject_message(DM, DM, caption=STOPPED, photo=True)
        await asyncio.wait_for(held.arrived.wait(), 20)
        tg.inject_message(DM, DM, "/stop")
        await tg.wait_for_call("sendMessage", says(DM, "Stopped."))
        held.release()
        tg.inject_message(DM, DM, "what is 2+2")
        await tg.wait_for_call("sendMessage", says(DM, "echo: what is 2+2"))
    said = [c.params.get("text") for c in tg.calls_of("sendMessage")]
    assert said == ["Stopped.", "echo: what is 2+2"]  # nothing more said about the picture
    assert len(llm.requests) == 1 and STOPPED not in later(llm, 0)
    assert [m["content"] for m in llm.requests[0]["messages"][1:]] == ["what is 2+2"]


async def test_telegram_stop_holds_across_a_sigkill_right_after_it(
    tmp_path: Path, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    """`relaybot run` is killed the moment it sends "Stopped.": the stop was recorded before,
    so the restart neither finishes the stopped turn nor sends its text again."""
    stuck = asyncio.Event()
    llm.script(hold(stuck, text("Deleted them.")))
    files = write_files(tmp_path, tg, llm.base_url, builtins=())
    bot = Daemon(files, tg)

    def kill_at_stopped(call: Call, result: Any) -> None:
        if call.method == "sendMessage" and call.params.get("text") == "Stopped.":
            bot.kill_now()

    tg.answer_listeners.append(kill_at_stopped)
    await bot.start()
    try:
        tg.inject_message(DM, DM, STOPPED)
        await llm.wait_requests(1, timeout=20)
        tg.inject_message(DM, DM, "/stop")
        assert (await asyncio.wait_for(bot.wait_dead(), 30)).killed_at is not None
        stuck.set()
        tg.answer_listeners.clear()
        await bot.start()
        tg.inject_message(DM, DM, "what is 2+2")
        await tg.wait_for_call("sendMessage", says(DM, "echo: what is 2+2"), timeout=30)
        assert await bot.terminate() == 0
    finally:
        stuck.set()
        if bot.running:
            bot.kill_now()
            await bot.wait_dead()
    assert STOPPED not in later(llm) and len(llm.requests) == 2, bot.log_tail()
    said = [c.params.get("text") for c in tg.calls_of("sendMessage")]
    assert "Deleted them." not in said and said[-1] == "echo: what is 2+2"


async def test_discord_stop_leaves_the_request_out(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    from channels.discord import DiscordChannel

    stuck = asyncio.Event()
    llm.script(hold(stuck, text("Deleted them.")))
    async with FakeDiscord(guilds={GUILD: [CHANNEL]}, users={ALICE: "Alice"}) as fake:
        section = {
            "enabled": True,
            "token": fake.token,
            "api_base_url": fake.api_base_url,
            "allowed_users": [ALICE],
        }
        config = make_config(discord=section)
        try:
            async with App(config, channels=[DiscordChannel(config.discord)]):
                await fake.inject_message(CHANNEL, ALICE, STOPPED, GUILD, mentions_bot=True)
                await llm.wait_requests(1, timeout=20)
                slash = await fake.inject_slash("stop", ALICE, CHANNEL, GUILD)
                reply = await fake.wait_for_call("POST", callback(slash.id))
                assert reply.json["data"]["content"] == "Stopped."
                await fake.inject_message(CHANNEL, ALICE, "what is 2+2", GUILD, mentions_bot=True)
                await fake.wait_for_call(
                    "POST", posts(CHANNEL), content("echo: [Alice] what is 2+2")
                )
        finally:
            stuck.set()
    assert STOPPED not in later(llm) and "Deleted them." not in later(llm)
    assert [m["content"] for m in llm.requests[-1]["messages"][1:]] == ["[Alice] what is 2+2"]


async def test_ctrl_c_in_the_terminal_chat_stops_for_good_across_a_restart(
    tmp_path: Path, llm: FakeOpenAI
) -> None:
    cfg = write_config(tmp_path, llm, "builtins = []\n[engine]\nshutdown_grace_s = 90")
    stuck = asyncio.Event()
    llm.script(hold(stuck, text("Deleted them.")))
    term = Terminal()
    env = {**os.environ, "TERM": "xterm", "RELAYBOT_TEST_KEY": "sk-test-key-123456"}
    io = {"stdin": term.child, "stdout": term.child, "stderr": term.child, "env": env}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "chat", "-c", str(cfg), **io
    )
    try:
        await term.expect(b"you> ")
        term.type(STOPPED.encode() + b"\r")
        await llm.wait_requests(1, timeout=20)
        proc.send_signal(signal.SIGINT)  # Ctrl-C: stopped, and the chat left
        assert await asyncio.wait_for(proc.wait(), 20) == 0
    finally:
        stuck.set()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        term.close()
    code, out, err = await finish(*await relaybot("chat", "-c", str(cfg), stdin=b"what is 2+2\n"))
    assert code == 0, err
    assert out.splitlines() == ["echo: what is 2+2"]
    assert STOPPED not in later(llm) and len(llm.requests) == 2
    assert [m["content"] for m in llm.requests[-1]["messages"][1:]] == ["what is 2+2"]


async def test_the_consoles_cancel_of_a_waiting_confirmation_stops_its_request(
    make_config: Callable[..., Config], tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    port = free_port()
    telegram = {
        "enabled": True,
        "token": tg.token,
        "api_base_url": tg.base_url,
        "allowed_users": [str(DM)],
        "poll_timeout_s": 5,
    }
    config = make_config(
        telegram=telegram,
        access={"admins": [f"telegram:{DM}"]},
        web={"listen": f"127.0.0.1:{port}"},
    )
    llm.script(tool_call("run_command", {"command": "rm -rf reports"}))
    async with App(config, extra_tools=(run_command,)):
        tg.inject_message(DM, DM, STOPPED)
        await tg.wait_for_call("sendMessage", lambda p: "reply_markup" in p)  # the prompt
        tg.inject_message(DM, DM, "/console")
        sent = await tg.wait_for_call("sendMessage", lambda p: "/signin?t=" in p.get("text", ""))
        token = re.search(r"t=(\S+)", sent.params["text"])
        assert token is not None
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            assert (await http.post("/signin", data={"t": token.group(1)})).status_code == 303
            work = await http.get("/work")
            csrf = re.search(r'name="csrf" value="([^"]+)"', work.text)
            ident = re.search(r'name="id" value="([0-9a-f]+)"', work.text)
            assert csrf is not None and ident is not None, work.text
            form = {"csrf": csrf.group(1), "kind": "confirmation", "id": ident.group(1)}
            done = await http.post("/cancel", data=form | {"confirmed": "yes"})
            assert "Cancelled: " in done.text
            tg.inject_message(DM, DM, "what is 2+2")
            await tg.wait_for_call("sendMessage", says(DM, "echo: what is 2+2"))
            listed = await http.get("/conversations")
            link = re.search(r'href="(/conversations/\d+)"', listed.text)
            assert link is not None
            shown = (await http.get(link.group(1))).text
    assert shown.count("stopped by the user") == 3  # the question, the call, its result
    assert STOPPED not in later(llm) and "rm -rf" not in later(llm)
    assert [m["content"] for m in llm.requests[-1]["messages"][1:]] == ["what is 2+2"]


async def test_the_terminal_shows_the_whole_command_it_asks_about_and_stop_stops_there(
    tmp_path: Path, llm: FakeOpenAI
) -> None:
    """Issue 40, item 10: a run_command past 60 characters is asked with the command itself
    (as Telegram shows it); one past 4,000 with its start and its end. /stop at the question
    stops the turn that asked: the next request leaves it out."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    tools = f'builtins = ["run_command"]\nworkspace = "{workspace}"'
    cfg = write_config(tmp_path, llm, tools)
    long = "find reports -name '*.tmp' -mtime +30 -print0 | xargs -0 rm -f && echo cleaned"
    huge = "echo " + "x" * 5000 + " && rm -rf ~/notes"
    llm.script(
        tool_call("run_command", {"command": long}),
        text("Left them alone."),
        tool_call("run_command", {"command": huge}),
    )
    stdin = f"tidy up\nn\n{STOPPED}\n/stop\nwhat is 2+2\n".encode()
    code, out, err = await finish(*await relaybot("chat", "-c", str(cfg), stdin=stdin))
    assert code == 0, err
    lines = out.splitlines()
    asked = lines.index("relaybot wants to: Run a command in the workspace")
    assert lines[asked + 1] == f"    {long}"
    assert "Left them alone." in lines
    shown = out[out.rindex("relaybot wants to:") :]
    assert "x" * 2000 in shown and "rm -rf ~/notes" in shown  # the start and the end
    assert "characters not shown" in shown and "x" * 4500 not in shown
    assert "Stopped." in lines and lines[-1] == "echo: what is 2+2"
    assert len(llm.requests) == 4 and STOPPED not in later(llm, 3)
    assert "rm -rf ~/notes" not in later(llm, 3)
    assert llm.requests[-1]["messages"][-1]["content"] == "what is 2+2"


async def test_retry_after_a_stop_asks_the_stopped_question_again(
    make_config: Callable[..., Config], tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    """/retry is the user asking again: the stopped question is answered, without what its
    stopped turn did (a call it asked about, cancelled by the /stop)."""
    llm.script(tool_call("run_command", {"command": "ls reports"}))
    async with daemon(telegram_config(make_config, tg)):
        tg.inject_message(DM, DM, STOPPED)
        await tg.wait_for_call("sendMessage", lambda p: "reply_markup" in p)  # the prompt
        tg.inject_message(DM, DM, "/stop")  # while it waits for the answer
        await tg.wait_for_call("sendMessage", says(DM, "Stopped."))
        tg.inject_message(DM, DM, "/retry")
        await tg.wait_for_call("sendMessage", says(DM, f"echo: {STOPPED}"))
    assert [(m["role"], m["content"]) for m in llm.requests[-1]["messages"][1:]] == [
        ("user", STOPPED)
    ]


async def test_a_stopped_request_is_not_folded_into_the_summary(
    make_config: Callable[..., Config], tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    stuck = asyncio.Event()
    try:
        async with daemon(telegram_config(make_config, tg)):
            tg.inject_message(DM, DM, "hi")
            await tg.wait_for_call("sendMessage", says(DM, "echo: hi"))
            llm.script(hold(stuck, text("Deleted them.")))
            tg.inject_message(DM, DM, STOPPED)
            await llm.wait_requests(2, timeout=20)
            tg.inject_message(DM, DM, "/stop")
            await tg.wait_for_call("sendMessage", says(DM, "Stopped."))
            for words in ("what is 2+2", "and 3+3?"):
                tg.inject_message(DM, DM, words)
                await tg.wait_for_call("sendMessage", says(DM, f"echo: {words}"))
            tg.inject_message(DM, DM, "/compact")
            said = await tg.wait_for_call("sendMessage", lambda p: "ondense" in p["text"])
    finally:
        stuck.set()
    assert said.params["text"].startswith("Condensed 4 messages into a summary")
    (summary,) = llm.summary_requests
    assert "what is 2+2" in json.dumps(summary) and STOPPED not in json.dumps(summary)
