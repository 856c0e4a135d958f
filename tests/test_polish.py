"""Issue 40, item 11, as a user meets it: /help in the user's words with every command, /start
giving a stranger their id once, a menu whose edit Telegram refuses (one log line, no
traceback), a local model without a price ("not priced", no warning in the terminal chat), and
the CLI: bare `relaybot` lists the commands, `relaybot tools` shows use_skill, `relaybot
skills` with none says where it looked (absolute) and what a skill looks like."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from bot.app import App
from bot.config import Config
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.telegram_server import FakeTelegram
from tests.test_cli import finish, relaybot, write_config

DM, STRANGER = 5, 77


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
def config(make_config: Callable[..., Config], tg: FakeTelegram) -> Config:
    telegram = {
        "enabled": True,
        "token": tg.token,
        "api_base_url": tg.base_url,
        "allowed_users": [str(DM)],
        "poll_timeout_s": 5,
    }
    return make_config(
        telegram=telegram,
        tools={
            "builtins": [
                "current_time",
                "remind_me",
                "send_message",
                "remember",
                "recall",
                "forget",
                "schedule_task",
                "list_schedules",
                "cancel_schedule",
            ]
        },
    )


def to(chat: int, text: str | None = None) -> Callable[[dict[str, Any]], bool]:
    return lambda p: p.get("chat_id") == chat and (text is None or text in p.get("text", ""))


async def test_help_speaks_to_the_user_and_lists_every_command(
    config: Config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    async with App(config):
        tg.inject_message(DM, DM, "/help")
        shown = (await tg.wait_for_call("sendMessage", to(DM))).params["text"]
    assert "Remind you of something at the time you say" in shown
    assert "Remember what you ask me to, across conversations" in shown
    for model_facing in ("final answer", "see recall", "this user", "this chat's scheduled"):
        assert model_facing not in shown, shown
    for command in ("stop", "reset", "settings", "usage", "memory", "schedules", "forget_me"):
        assert f"\n/{command} — " in shown, (command, shown)
    assert "/users" not in shown  # an owner's command, and DM is no owner
    assert llm.requests == []


async def test_start_gives_a_stranger_their_id_once(
    config: Config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    async with App(config):
        tg.inject_message(STRANGER, STRANGER, "/start", first_name="Ann")
        said = (await tg.wait_for_call("sendMessage", to(STRANGER))).params["text"]
    assert said.count(str(STRANGER)) == 1 and "not allowed" in said, said


async def test_a_refused_menu_edit_is_one_line_not_a_traceback(
    config: Config, tg: FakeTelegram, llm: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    llm.script(tool_call("schedule_task", {"task": "Say hi", "every_minutes": 60}), text("Done."))
    async with App(config):
        tg.inject_message(DM, DM, "every hour say hi")
        await tg.wait_for_call("sendMessage", to(DM, "Done."))
        tg.inject_message(DM, DM, "/schedules")
        menu = await tg.wait_for_call("sendMessage", to(DM, "Scheduled tasks here"))
        [[button]] = menu.params["reply_markup"]["inline_keyboard"]
        message_id = max(m for (c, m) in tg.messages if c == DM)
        tg.fail_next("editMessageText", 400, retry_after=None)  # the message deleted meanwhile
        caplog.set_level(logging.WARNING)
        tg.inject_callback(DM, DM, message_id, button["callback_data"])
        await tg.wait_for_call("editMessageText", to(DM))
        tg.inject_message(DM, DM, "/help")  # answered after the press: the press is done
        await tg.wait_for_call("sendMessage", to(DM, "Commands:"))
    with sqlite3.connect(config.storage.resolved_path()) as db:
        assert db.execute("SELECT state FROM schedules").fetchall() == [("cancelled",)]
    [line] = [r for r in caplog.records if "menu in chat" in r.getMessage()]
    assert line.levelno == logging.WARNING and line.exc_info is None
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]


async def test_a_model_without_a_price_is_not_priced_and_not_warned_about(
    tmp_path: Path, llm: FakeOpenAI
) -> None:
    path = write_config(tmp_path, llm)
    code, out, err = await finish(*await relaybot("chat", "-c", str(path), stdin=b"hi\n/usage\n"))
    assert code == 0, err
    assert out.startswith("echo: hi\nToday: "), out
    assert ", not priced" in out and "$0.00" not in out
    assert "no price" not in err and "WARNING" not in err, err


async def test_bare_relaybot_lists_the_commands() -> None:
    code, out, err = await finish(*await relaybot())
    assert code == 2, err
    for command in ("run", "chat", "init", "doctor", "tools", "skills", "install-service"):
        assert f"\n    {command} " in out, out
    assert "Start with `relaybot init`" in out


async def test_tools_shows_use_skill_and_skills_says_what_one_is(
    tmp_path: Path, llm: FakeOpenAI
) -> None:
    config = tmp_path / "conf" / "config.toml"
    config.parent.mkdir()
    config.write_text(write_config(tmp_path, llm).read_text())
    env_home = ["-c", "conf/config.toml"]  # a relative path, as a user gives it
    code, out, err = await finish(*await relaybot("skills", *env_home, cwd=tmp_path))
    assert code == 1, err  # no skill at all: said, and the exit code says so
    assert f"or {tmp_path / 'conf' / 'skills'} (searched" in out  # absolute, not "skills"
    assert "SKILL.md" in out and "name: " in out and "description: " in out
    skill = tmp_path / "conf" / "skills" / "haiku"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: haiku\ndescription: Poems.\n---\nThree lines.\n")
    code, out, err = await finish(*await relaybot("tools", *env_home, cwd=tmp_path))
    assert code == 0 and "\nuse_skill  [safe]  (built-in)\n" in out, out + err
