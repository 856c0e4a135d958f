"""Pairing (issue 29): a stranger asks, an owner presses Allow or Deny, through the real App with
a recording channel, over a real SQLite store (the store part runs on both backends in
tests/test_store_contract.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from bot.app import App
from bot.config import Config
from engine import Action, Command
from engine.chat import PairingSettings
from tests.fakes.openai_server import FakeOpenAI, echo
from tests.fakes.recording_channel import RecordingChannel, Shown
from tests.test_cli import finish, relaybot, write_config

OWNERS = {"access": {"admins": ["test:boss", "test:second"]}}


@asynccontextmanager
async def running(config: Config) -> AsyncIterator[tuple[App, RecordingChannel]]:
    channel = RecordingChannel()
    async with App(config, channels=[channel]) as app:
        yield app, channel


def press(shown: Shown, label: str, user: str) -> Action:
    button = next(b for b in shown.buttons if b.label == label)
    return Action("test", user, user, button.action, True)


async def test_a_stranger_asks_an_owner_allows_and_they_are_answered_also_after_a_restart(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    llm.default = echo
    config = make_config(**OWNERS)
    async with running(config) as (app, ch):
        d = app.dispatcher
        await d.handle_inbound(ch.message("hello?", chat_id="s1", user_id="s1"))
        [asked] = await ch.wait_for("send", chat_id="s1")
        assert "asked the owner" in asked.text and "request" in asked.text
        shown = await ch.wait_for("private", 2)
        assert sorted(s.chat_id for s in shown) == ["boss", "second"]
        assert "user-s1, test user s1" in shown[0].text and "chat s1" in shown[0].text
        assert [b.label for b in shown[0].buttons] == ["Allow", "Deny"]
        for _ in range(5):  # waiting: no storm, neither to the stranger nor to the owners
            await d.handle_inbound(ch.message("hello??", chat_id="s1", user_id="s1"))
        assert len(ch.texts(chat_id="s1")) == 1 and len(ch.texts("private")) == 2
        assert llm.requests == []
        # someone else cannot press the owner's button
        refused = await d.handle_action(press(shown[0], "Allow", "s1"))
        assert "not allowed" in refused.text
        done = await d.handle_action(press(shown[0], "Allow", "boss"))
        assert done.text.startswith("Allowed: user-s1") and done.buttons == ()
        told = await ch.wait_for("send", 2, chat_id="s1")
        assert "let you in" in told[-1].text
        late = await d.handle_action(press(shown[1], "Deny", "second"))  # the other owner
        assert "already answered: allowed by test:boss" in late.text
        await d.handle_inbound(ch.message("now?", chat_id="s1", user_id="s1"))
        answered = await ch.wait_for("send", 3, chat_id="s1")
        assert answered[-1].text == "echo: now?"
    async with running(config) as (app, ch):  # stored: the restart keeps them in
        await app.dispatcher.handle_inbound(ch.message("still?", chat_id="s1", user_id="s1"))
        [answer] = await ch.wait_for("send", chat_id="s1")
        assert answer.text == "echo: still?"
        menu = await app.dispatcher.handle_command(
            ch.message("/users", chat_id="boss", user_id="boss"), Command.USERS
        )
        assert "test s1 (user-s1): approved by test:boss" in menu.text
        assert "test boss: owner" in menu.text
        not_owner = await app.dispatcher.handle_command(
            ch.message("/users", chat_id="s1", user_id="s1"), Command.USERS
        )
        assert "Only the bot's owners" in not_owner.text
        revoke = next(b for b in menu.buttons if b.label == "Revoke user-s1")
        after = await app.dispatcher.handle_action(Action("test", "boss", "boss", revoke.action))
        assert after.text.startswith("Revoked: test user s1")
        await app.dispatcher.handle_inbound(ch.message("and now?", chat_id="s1", user_id="s1"))
        asked_again = await ch.wait_for("send", 2, chat_id="s1")
        assert "asked the owner" in asked_again[-1].text


async def test_a_denied_stranger_is_told_once_and_not_asked_about_again(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    async with running(make_config(**OWNERS)) as (app, ch):
        d = app.dispatcher
        await d.handle_inbound(ch.message("let me in", chat_id="s2", user_id="s2"))
        shown = await ch.wait_for("private", 2)
        done = await d.handle_action(press(shown[0], "Deny", "boss"))
        assert done.text.startswith("Denied: user-s2")
        told = await ch.wait_for("send", 2, chat_id="s2")
        assert told[-1].text == "Sorry, the owner said no."
        for _ in range(3):
            await d.handle_inbound(ch.message("please", chat_id="s2", user_id="s2"))
        start = await d.handle_command(
            ch.message("/start", chat_id="s2", user_id="s2"), Command.START
        )
        assert "Your user id is s2" in start.text and "said no" in start.text
        assert len(ch.texts(chat_id="s2")) == 2 and len(ch.texts("private")) == 2
        assert llm.requests == []


async def test_owners_hear_of_a_bounded_number_of_requests_and_groups_chatter_is_ignored(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    async with running(make_config(access={"admins": ["test:boss"]})) as (app, ch):
        d = app.dispatcher
        d.settings.pairing = PairingSettings(per_hour=3)
        await d.handle_inbound(ch.message("chatter", chat_id="g1", user_id="x0", is_private=False))
        for i in range(6):
            await d.handle_inbound(ch.message("hi", chat_id=f"x{i}", user_id=f"x{i}"))
        await ch.wait_for("send", 6)
        assert len(ch.texts("private")) <= 3
        assert ch.texts(chat_id="g1") == []
        later = ch.texts(chat_id="x5")
        assert later == ["Sorry, you are not allowed to use this bot yet; please try again later."]


async def test_an_expired_request_cannot_be_allowed_and_pairing_off_keeps_the_old_refusal(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    async with running(make_config(**OWNERS)) as (app, ch):
        d = app.dispatcher
        d.settings.pairing = PairingSettings(expiry_s=0.0)  # lapses at once
        await d.handle_inbound(ch.message("hi", chat_id="s3", user_id="s3"))
        shown = await ch.wait_for("private", 2)
        late = await d.handle_action(press(shown[0], "Allow", "boss"))
        assert "expired" in late.text
        assert not d.allowed("test", "s3")
    off = make_config(access={"admins": ["test:boss"], "pairing": False})
    async with running(off) as (app, ch):
        await app.dispatcher.handle_inbound(ch.message("hi", chat_id="s4", user_id="s4"))
        [refused] = await ch.wait_for("send", chat_id="s4")
        assert "not allowed to use this bot. Your user id is s4" in refused.text
        assert ch.texts("private") == []


async def test_relaybot_users_lists_allows_and_revokes_through_the_cli(
    tmp_path: Path, llm: FakeOpenAI
) -> None:
    path = write_config(tmp_path, llm)
    with path.open("a") as f:
        f.write('\n[telegram]\nallowed_users = ["111"]\n[access]\nadmins = ["telegram:999"]\n')
    code, out, err = await finish(*await relaybot("-c", str(path), "users", "allow", "telegram:42"))
    assert code == 0 and "telegram user 42 may use the bot now" in out, err
    code, out, _ = await finish(*await relaybot("-c", str(path), "users"))
    assert code == 0
    assert "telegram 111: config (telegram.allowed_users)" in out
    assert "telegram 999: owner ([access] admins)" in out
    assert "telegram 42: approved by cli" in out
    code, out, _ = await finish(*await relaybot("-c", str(path), "users", "revoke", "telegram:42"))
    assert code == 0 and "no longer let in" in out
    code, out, _ = await finish(*await relaybot("-c", str(path), "users", "revoke", "telegram:111"))
    assert code == 1 and "remove them there" in out
    code, out, err = await finish(*await relaybot("-c", str(path), "users", "allow", "42"))
    assert code == 1 and "name the platform too, e.g. telegram:42" in err
