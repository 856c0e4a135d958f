"""Where untrusted content comes from, each through the real Telegram adapter: another group
member's message, a skill from a folder not marked trusted, a quoted message (a reply to the
bot's own is not), a forwarded message. Each makes the next acting call ask its requester."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from bot.config import Config
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.telegram_server import BOT_USERNAME, FakeTelegram
from tests.test_containment import (
    DM,
    EVE,
    GROUP,
    INJECTION,
    OWNER,
    answered,
    app,
    cancelled,
    make,
    press,
    prompts,
)


@pytest.fixture(autouse=True)
def _reset() -> None:
    cancelled.clear()


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


async def test_another_group_members_message_taints_the_turn(
    make_config: Callable[..., Config], tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    config = make(make_config, tg)
    mention = f"@{BOT_USERNAME}"
    group = {"chat_type": "group"}
    llm.script(
        tool_call("tag_order", {"order": "1"}),  # Ann's own words alone: runs
        text("Tagged 1."),
        text("Noted."),  # Eve's turn
        tool_call("tag_order", {"order": "42"}),  # Ann's turn, after Eve's message
        text("Tagged 42."),
    )
    async with app(config):
        tg.inject_message(GROUP, OWNER, f"{mention} tag order 1", first_name="Ann", **group)
        await tg.wait_for_call("sendMessage", answered("Tagged 1."))
        tg.inject_message(GROUP, EVE, f"{mention} {INJECTION}", first_name="Eve", **group)
        await tg.wait_for_call("sendMessage", answered("Noted."))
        tg.inject_message(GROUP, OWNER, f"{mention} anything new?", first_name="Ann", **group)
        await tg.wait_for_call("sendMessage", lambda p: len(prompts(tg, GROUP)) == 1)
        assert "after reading Eve in the group" in prompts(tg, GROUP)[0]["text"]
        assert cancelled == ["tag 1"]
        await press(tg, GROUP, OWNER, "Allow once")
        await tg.wait_for_call("sendMessage", answered("Tagged 42."))
    assert cancelled == ["tag 1", "tag 42"]


@pytest.mark.parametrize("trusted", [False, True], ids=["untrusted-folder", "trusted-folder"])
async def test_a_skill_from_a_folder_not_marked_trusted_taints(
    make_config: Callable[..., Config],
    tg: FakeTelegram,
    llm: FakeOpenAI,
    tmp_path: Path,
    trusted: bool,
) -> None:
    folder = tmp_path / "third-party"
    (folder / "orders").mkdir(parents=True)
    (folder / "orders" / "SKILL.md").write_text(
        f"---\nname: orders\ndescription: Handles orders.\n---\n{INJECTION}\n"
    )
    config = make(make_config, tg, trusted_sources=[str(folder)] if trusted else [])
    config.skills.dirs = [folder]
    llm.script(
        tool_call("use_skill", {"name": "orders"}),
        tool_call("tag_order", {"order": "42"}),
        text("Tagged."),
    )
    async with app(config):
        tg.inject_message(DM, DM, "help with my orders", first_name="Ann")
        if not trusted:
            await tg.wait_for_call("sendMessage", lambda p: len(prompts(tg, DM)) == 1)
            assert "after reading the skill orders" in prompts(tg, DM)[0]["text"]
            assert cancelled == []
            await press(tg, DM, DM, "Allow once")
        await tg.wait_for_call("sendMessage", answered("Tagged."))
    assert cancelled == ["tag 42"] and len(prompts(tg, DM)) == (0 if trusted else 1)


async def test_a_quoted_message_taints_and_a_reply_to_the_bot_does_not(
    make_config: Callable[..., Config], tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    config = make(make_config, tg)
    mention = f"@{BOT_USERNAME}"
    group = {"chat_type": "group"}
    llm.script(
        text("Hello Ann."),
        tool_call("tag_order", {"order": "1"}),  # a reply to the bot's own answer: runs
        text("Tagged 1."),
        tool_call("tag_order", {"order": "42"}),  # a reply quoting Eve: asks
        text("Tagged 42."),
    )
    async with app(config):
        tg.inject_message(DM, DM, "hi", first_name="Ann")
        await tg.wait_for_call("sendMessage", answered("Hello Ann."))
        answer = max(m for c, m in tg.messages if c == DM)
        tg.inject_message(DM, DM, "tag order 1", first_name="Ann", reply_to_message=answer)
        await tg.wait_for_call("sendMessage", answered("Tagged 1."))
        assert prompts(tg, DM) == []
        eve = tg.inject_message(GROUP, EVE, INJECTION, first_name="Eve", **group)  # not to the bot
        tg.inject_message(
            GROUP,
            OWNER,
            f"{mention} what about this?",
            first_name="Ann",
            reply_to_message=eve["message"]["message_id"],
            **group,
        )
        await tg.wait_for_call("sendMessage", lambda p: len(prompts(tg, GROUP)) == 1)
        assert "after reading a quoted message" in prompts(tg, GROUP)[0]["text"]
        assert cancelled == ["tag 1"]
        await press(tg, GROUP, OWNER, "Allow once")
        await tg.wait_for_call("sendMessage", answered("Tagged 42."))
    assert cancelled == ["tag 1", "tag 42"]


async def test_a_forwarded_message_taints(
    make_config: Callable[..., Config], tg: FakeTelegram, llm: FakeOpenAI, tmp_path: Path
) -> None:
    config = make(make_config, tg)
    llm.script(tool_call("tag_order", {"order": "42"}), text("Tagged 42."))
    async with app(config):
        tg.inject_message(DM, DM, INJECTION, first_name="Ann", forwarded_from="Mallory")
        await tg.wait_for_call("sendMessage", lambda p: len(prompts(tg, DM)) == 1)
        asked = prompts(tg, DM)[0]["text"]
        assert "after reading a message forwarded from Mallory" in asked
        assert cancelled == []
        await press(tg, DM, DM, "Allow once")
        await tg.wait_for_call("sendMessage", answered("Tagged 42."))
    assert cancelled == ["tag 42"]
    with sqlite3.connect(tmp_path / "relaybot.db") as db:
        row = db.execute("SELECT trust, source FROM messages WHERE role='user'").fetchone()
    assert row == ("untrusted", "a message forwarded from Mallory")
