"""Private replies in Telegram groups (issue 44): what concerns one member (a confirmation with its
buttons, a refusal, a limit notice, an answer to /usage and the like) reaches only that member, as
an ephemeral message (Bot API 10.2/10.3, sent through python-telegram-bot's raw request); the
answer itself stays public. The real App and PTB against the fake Bot API, whose ephemeral side
(tests/fakes/telegram_ephemeral.py) shows each member only what they may see."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from bot.app import App
from bot.config import Config
from engine import Choice, parse_decision
from tests.fakes.openai_server import FakeOpenAI, error, text, tool_call
from tests.fakes.telegram_server import BOT_USERNAME, FakeTelegram
from tools import tool

GROUP = -100700
ALICE, BOB = 7, 8
dropped: list[str] = []


@tool(destructive=True, summary="Drop the table {name}")
async def drop_table(name: str) -> str:
    """Drop a database table for good."""
    dropped.append(name)
    return f"dropped {name}"


@pytest.fixture(autouse=True)
def _reset() -> None:
    dropped.clear()


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
def config(make_config: Callable[..., Config], tg: FakeTelegram) -> Callable[..., Config]:
    def make(access: dict[str, Any] | None = None, **telegram: Any) -> Config:
        section = {
            "enabled": True,
            "token": tg.token,
            "api_base_url": tg.base_url,
            "allowed_users": ["*"],
            "poll_timeout_s": 5,
            **telegram,
        }
        return make_config(telegram=section, access=access or {})

    return make


@asynccontextmanager
async def daemon(config: Config) -> AsyncIterator[App]:
    async with App(config, extra_tools=(drop_table,)) as app:
        yield app


def mention(tg: FakeTelegram, user: int, words: str, name: str = "Alice") -> None:
    tg.inject_message(GROUP, user, f"@{BOT_USERNAME} {words}", chat_type="group", first_name=name)


def ephemeral(params: dict[str, Any]) -> bool:
    return "ephemeral_message_parameters" in params


async def ask_to_drop(tg: FakeTelegram, llm: FakeOpenAI) -> tuple[int, str]:
    """Alice asks, in the group, for a destructive action; returns the ephemeral prompt's id
    and the confirmation id."""
    llm.script(tool_call("drop_table", {"name": "users"}), text("Dropped the users table."))
    mention(tg, ALICE, "drop the users table")
    call = await tg.wait_for_call("sendMessage", lambda p: "reply_markup" in p)
    assert call.params["ephemeral_message_parameters"] == {"receiver_user_id": ALICE}
    row = call.params["reply_markup"]["inline_keyboard"][0]
    parsed = parse_decision(row[0]["callback_data"])
    assert parsed is not None and parsed[1] is Choice.ONCE
    ((_, _, eid),) = [k for k in tg.ephemerals if k[:2] == (GROUP, ALICE)]
    return eid, parsed[0]


async def test_a_destructive_request_is_confirmed_by_the_requester_alone_and_runs_once(
    config, tg, llm
) -> None:
    async with daemon(config()):
        eid, cid = await ask_to_drop(tg, llm)
        prompt = tg.ephemeral_texts(GROUP, ALICE)
        assert len(prompt) == 1 and "users" in prompt[0]
        # Bob sees nothing of it, and cannot press what he does not see; a forged press of his
        # (the button's data on another message) is refused by the engine.
        assert not any("users" in t for t in tg.seen_by(GROUP, BOB))
        with pytest.raises(ValueError):
            tg.press_ephemeral(GROUP, BOB, eid, f"rb:{cid}:y")
        tg.inject_callback(GROUP, BOB, 1, f"rb:{cid}:y")
        await tg.wait_for_call("answerCallbackQuery")
        assert dropped == []
        tg.press_ephemeral(GROUP, ALICE, eid, f"rb:{cid}:y")
        tg.press_ephemeral(GROUP, ALICE, eid, f"rb:{cid}:y")  # pressed twice: runs once
        await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "Dropped the users table.")
        await tg.wait_for_call("editEphemeralMessageText", lambda p: "Done" in p["text"])
        await tg.wait_for_call("answerCallbackQuery", count=3)
    assert dropped == ["users"]
    answers = [c.params.get("text", "") for c in tg.calls_of("answerCallbackQuery")]
    assert answers[0].startswith("Only Alice")
    assert sorted(answers[1:]) == ["Already decided.", "Confirmed."]
    # The prompt, closed, stays Alice's; the answer is public, seen by Bob too.
    (closed,) = tg.ephemeral_texts(GROUP, ALICE)
    assert "Done" in closed and "reply_markup" not in tg.ephemerals[(GROUP, ALICE, eid)]
    assert "Dropped the users table." in tg.seen_by(GROUP, BOB)
    assert tg.ephemeral_texts(GROUP, BOB) == []
    assert not any(ephemeral(c.params) for c in tg.calls_of("sendMessage")[1:])


async def test_where_the_group_refuses_ephemerals_the_prompt_is_public_and_still_works(
    config, tg, llm
) -> None:
    tg.ephemeral_refused.add(GROUP)
    async with daemon(config()):
        llm.script(tool_call("drop_table", {"name": "logs"}), text("Dropped logs."))
        mention(tg, ALICE, "drop logs")
        refused = await tg.wait_for_call("sendMessage", ephemeral, status=400)
        public = await tg.wait_for_call("sendMessage", lambda p: "reply_markup" in p, status=200)
        assert not ephemeral(public.params) and refused.params["text"] == public.params["text"]
        prompt = max(mid for chat, mid in tg.messages if chat == GROUP)
        data = public.params["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        tg.inject_callback(GROUP, ALICE, prompt, data)
        await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "Dropped logs.")
        await tg.wait_for_call("editMessageText", lambda p: "Done" in p["text"])
    assert dropped == ["logs"]


async def test_owners_can_turn_private_replies_off(config, tg, llm) -> None:
    async with daemon(config(private_replies=False)):
        llm.script(tool_call("drop_table", {"name": "logs"}), text("Left alone."))
        mention(tg, ALICE, "drop logs")
        public = await tg.wait_for_call("sendMessage", lambda p: "reply_markup" in p)
        tg.inject_message(GROUP, ALICE, "/usage", chat_type="group")
        usage = await tg.wait_for_call("sendMessage", count=2)
    assert not ephemeral(public.params) and not ephemeral(usage.params)
    assert tg.ephemerals == {}


async def test_personal_commands_and_refusals_go_to_the_member_alone(config, tg, llm) -> None:
    async with daemon(config(access={"max_message_chars": 100})):
        tg.inject_message(GROUP, ALICE, "/usage", chat_type="group")
        await tg.wait_for_call("sendMessage", ephemeral)
        tg.inject_message(GROUP, BOB, "/help", chat_type="group")  # about the bot: public
        await tg.wait_for_call("sendMessage", lambda p: not ephemeral(p))
        mention(tg, BOB, "x" * 160, name="Bob")  # too long: told to Bob alone
        await tg.wait_for_call("sendMessage", ephemeral, count=2)
        tg.inject_message(ALICE, ALICE, "/usage")  # a private chat: as before
        await tg.wait_for_call("sendMessage", lambda p: p["chat_id"] == ALICE)
    (usage,) = tg.ephemeral_texts(GROUP, ALICE)
    (too_long,) = tg.ephemeral_texts(GROUP, BOB)
    assert "too long" in too_long
    assert usage not in tg.seen_by(GROUP, BOB) and too_long not in tg.seen_by(GROUP, ALICE)
    assert any("/reset" in t for t in tg.seen_by(GROUP, ALICE))  # /help stayed public
    assert llm.requests == []


async def test_a_private_menu_s_buttons_work_and_it_stays_private(config, tg, llm) -> None:
    async with daemon(config(access={"admins": [f"telegram:{ALICE}"]})):
        llm.script(tool_call("drop_table", {"name": "tmp"}), text("Dropped tmp."))
        mention(tg, ALICE, "drop tmp")
        ask = await tg.wait_for_call("sendMessage", lambda p: "reply_markup" in p)
        always = ask.params["reply_markup"]["inline_keyboard"][0][1]
        assert always["text"] == "Always allow here"  # an admin may give it in a group
        ((_, _, eid),) = list(tg.ephemerals)
        tg.press_ephemeral(GROUP, ALICE, eid, always["callback_data"])
        await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "Dropped tmp.")
        tg.inject_message(GROUP, ALICE, "/permissions", chat_type="group")
        menu = await tg.wait_for_call("sendMessage", lambda p: "always allowed" in p["text"])
        assert menu.params["ephemeral_message_parameters"] == {"receiver_user_id": ALICE}
        buttons = [b for r in menu.params["reply_markup"]["inline_keyboard"] for b in r]
        revoke = next(b for b in buttons if b["text"] == "Revoke drop_table")
        menu_id = max(k[2] for k in tg.ephemerals)
        tg.press_ephemeral(GROUP, ALICE, menu_id, revoke["callback_data"])
        await tg.wait_for_call("editEphemeralMessageText", lambda p: "Revoked" in p["text"])
    assert any("Revoked" in t for t in tg.ephemeral_texts(GROUP, ALICE))
    assert not any("Revoked" in t or "always allowed" in t for t in tg.seen_by(GROUP, BOB))
    assert dropped == ["tmp"]


async def test_a_stranger_s_pairing_code_is_theirs_alone(make_config, tg, llm) -> None:
    telegram = {"enabled": True, "token": tg.token, "api_base_url": tg.base_url}
    config = make_config(telegram=telegram, access={"admins": ["telegram:1"]})
    async with daemon(config):
        mention(tg, BOB, "let me in", name="Bob")
        told = await tg.wait_for_call("sendMessage", ephemeral)
        await tg.wait_for_call("sendMessage", lambda p: p["chat_id"] == 1)  # the owner asked
    assert told.params["ephemeral_message_parameters"] == {"receiver_user_id": BOB}
    (code,) = tg.ephemeral_texts(GROUP, BOB)
    assert "asked the owner" in code and code not in tg.seen_by(GROUP, ALICE)
    assert llm.requests == []


async def test_a_long_action_goes_to_the_requester_alone_as_a_file(config, tg, llm) -> None:
    name = "t" + " " * 5000 + "; DROP DATABASE prod"  # too long to show: attached
    llm.script(tool_call("drop_table", {"name": name}), text("Dropped it."))
    async with daemon(config()):
        mention(tg, ALICE, "tidy the tables")
        sent = await tg.wait_for_call("sendDocument")
        assert sent.params["ephemeral_message_parameters"] == {"receiver_user_id": ALICE}
        ((key, prompt),) = tg.ephemerals.items()
        assert "The full action is attached as action.txt" in prompt["caption"]
        row = prompt["reply_markup"]["inline_keyboard"][0]
        tg.press_ephemeral(GROUP, ALICE, key[2], row[0]["callback_data"])
        await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "Dropped it.")
        await tg.wait_for_call("editEphemeralMessageCaption", lambda p: "Done" in p["caption"])
    assert dropped == [name]
    assert tg.messages.get((GROUP, key[2])) is None and "document" in tg.ephemerals[key]
    assert "reply_markup" not in tg.ephemerals[key]
    assert tg.calls_of("editEphemeralMessageText") == []  # known as a file: its caption edited


async def test_an_error_is_told_to_the_member_who_asked(config, tg, llm) -> None:
    llm.script(error(401, "Incorrect API key provided"))
    async with daemon(config()):
        mention(tg, ALICE, "what now?")
        told = await tg.wait_for_call("sendMessage", ephemeral)
    assert told.params["ephemeral_message_parameters"] == {"receiver_user_id": ALICE}
    assert tg.seen_by(GROUP, BOB) == [] and len(tg.ephemeral_texts(GROUP, ALICE)) == 1
