"""Telegram webhook mode end to end: the real App and python-telegram-bot, the fake Bot API
POSTing updates to the daemon's webhook as Telegram does (tests/fakes/telegram_webhook.py).

Synchronisation is on the fake's recorded calls and deliveries and on log records, never on
sleeps. The kill-after-200 test (the update is stored before the answer) drives `relaybot run` as
a subprocess: tests/test_telegram_webhook_crash.py.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import closing
from typing import Any

import aiohttp
import pytest

from bot._checks import validate
from bot.config import Config
from channels.telegram._webhook import MAX_BODY
from engine import parse_decision
from tests.fakes.openai_server import text, tool_call
from tests.fakes.telegram_server import FakeTelegram
from tests.fakes.telegram_webhook import SECRET_HEADER
from tests.ports import free_port
from tests.test_telegram import (
    DM,
    daemon,
    deleted,
    inbox,
    log_waiter,
    patch_text_handler,
    telegram_config,
    to,
)
from tools.errors import ConfigError

SECRET = "s3cret-Token_for-the-webhook"
SECRET_ENV = "RB_TEST_WEBHOOK_SECRET"
PATH = "/telegram/hook"


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        server.webhook.retry_s = 0.05
        yield server


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def config(
    make_config: Callable[..., Config],
    tg: FakeTelegram,
    port: int,
    monkeypatch: pytest.MonkeyPatch,
) -> Callable[..., Config]:
    """A webhook-mode config; keyword arguments override [telegram] keys."""
    monkeypatch.setenv(SECRET_ENV, SECRET)

    def make(**telegram: Any) -> Config:
        keys = {
            "mode": "webhook",
            "webhook_url": f"http://127.0.0.1:{port}{PATH}",
            "webhook_listen": f"127.0.0.1:{port}",
            "webhook_secret_env": SECRET_ENV,
        }
        return telegram_config(make_config, tg, **(keys | telegram))

    return make


async def webhook_set(tg: FakeTelegram) -> None:
    await tg.wait_for_call("setWebhook", status=200, timeout=10)


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def records() -> AsyncIterator[Records]:
    handler = Records()
    logger = logging.getLogger("channels.telegram")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


# -- config --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"mode": "webhook"}, 'telegram.webhook_url: mode = "webhook" needs the public URL'),
        (
            {"mode": "webhook", "webhook_url": "https://bot.example.com/tg"},
            'telegram.webhook_secret_env: mode = "webhook" needs the environment variable',
        ),
        ({"webhook_url": "bot.example.com/tg"}, "telegram.webhook_url: must be the public URL"),
        ({"webhook_listen": "8443"}, 'telegram.webhook_listen: must be host:port, e.g. "127.0'),
        ({"webhook_listen": "::1:8443"}, "an IPv6 address goes in brackets"),
        ({"mode": "hook"}, "telegram.mode: must be 'polling' or 'webhook'"),
    ],
)
def test_webhook_config_mistakes_name_the_key(make_config, keys, message) -> None:
    with pytest.raises(ConfigError) as err:
        make_config(telegram=keys)
    assert message in str(err.value)


def test_the_secret_comes_from_the_environment_in_telegrams_form(
    config, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = config(webhook_listen="[::1]:8443")
    assert cfg.telegram.listen_address() == ("::1", 8443)
    assert cfg.telegram.resolve_webhook_secret() == SECRET
    assert SECRET in cfg.secrets()  # redacted from every log line
    monkeypatch.setenv(SECRET_ENV, "has spaces and ü")
    with pytest.raises(ConfigError, match=r"^telegram\.webhook_secret_env: the secret must be"):
        validate(cfg)  # check-config and run refuse it before anything connects
    monkeypatch.delenv(SECRET_ENV)
    with pytest.raises(ConfigError, match=rf"^telegram\.webhook_secret_env: .*{SECRET_ENV}"):
        validate(cfg)


# -- receiving -----------------------------------------------------------------------------------


async def test_updates_arrive_by_webhook_each_stored_before_its_200(config, tg, llm) -> None:
    cfg = config()
    unstored: list[int] = []  # updates answered 200 before their message was in the inbox

    def on_answer(update: dict[str, Any], status: int | None) -> None:
        stored = {(chat, mid) for chat, mid, _ in inbox(cfg)}
        msg = update["message"]
        if status == 200 and (str(msg["chat"]["id"]), str(msg["message_id"])) not in stored:
            unstored.append(update["update_id"])

    tg.webhook.answer_listeners.append(on_answer)
    async with daemon(cfg):
        await webhook_set(tg)
        for chat in (DM, 1002, 1003):
            tg.inject_message(chat, chat, f"hello {chat}")
        for chat in (DM, 1002, 1003):
            await tg.wait_for_call("sendMessage", to(chat))
        # after the first answer: two messages queued together are answered in one turn
        tg.inject_message(DM, DM, "and again")
        await tg.wait_for_call("sendMessage", to(DM), count=2)
    hook = tg.calls_of("setWebhook")[0].params
    assert hook["url"] == cfg.telegram.webhook_url
    assert hook["secret_token"] == SECRET
    assert hook["allowed_updates"] == ["message", "callback_query", "guest_message"]
    assert tg.chat_texts(DM) == ["echo: hello 1001", "echo: and again"]
    assert tg.chat_texts(1002) == ["echo: hello 1002"]
    assert [d.status for d in tg.webhook.deliveries] == [200] * 4
    assert unstored == []
    assert tg.calls_of("getUpdates") == []  # no polling alongside
    assert tg.calls_of("deleteWebhook") == []  # stopping leaves the webhook to other instances
    assert tg.webhook.url == cfg.telegram.webhook_url


async def test_a_button_press_arrives_by_webhook_and_resumes_the_turn(config, tg, llm) -> None:
    deleted.clear()  # test_telegram's tool records here too
    llm.script(tool_call("delete_file", {"name": "notes.txt"}), text("Deleted."))
    async with daemon(config()):
        await webhook_set(tg)
        tg.inject_message(DM, DM, "delete notes.txt")
        prompt = await tg.wait_for_call("sendMessage", lambda p: "reply_markup" in p)
        buttons = prompt.params["reply_markup"]["inline_keyboard"][0]
        allow = next(b for b in buttons if parse_decision(b["callback_data"])[1].approves)
        message_id = next(mid for (chat, mid) in tg.messages if chat == DM)
        tg.inject_callback(DM, DM, message_id, allow["callback_data"])
        await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "Deleted.")
    assert deleted == ["notes.txt"]


async def test_a_request_without_the_right_secret_gets_401_and_is_never_handled(
    config, tg, llm, records
) -> None:
    cfg = config()
    async with daemon(cfg):
        await webhook_set(tg)
        tg.webhook.paused = True  # Telegram's own delivery waits: first, copies by others
        update = tg.inject_message(DM, DM, "transfer everything")
        assert await tg.webhook.post(update, secret=None) == 401
        assert await tg.webhook.post(update, secret="not-the-secret") == 401
        assert await tg.webhook.post(update, secret=SECRET + "x") == 401
        forwarded = {"X-Forwarded-For": "203.0.113.9"}
        assert await tg.webhook.post(update, secret="guess", headers=forwarded) == 401
        assert inbox(cfg) == [] and llm.requests == []  # none of them was handled
        tg.webhook.resume()  # now Telegram's own POST, with the secret
        await tg.wait_for_call("sendMessage", to(DM))
    assert tg.chat_texts(DM) == ["echo: transfer everything"]
    refused = [m for m in records.messages if "without the right secret" in m]
    assert refused == [  # once per source, and nothing of what was sent
        "Telegram webhook: refused a request from 127.0.0.1 without the right secret (401); "
        "later ones from there are not logged",
        "Telegram webhook: refused a request from 203.0.113.9 via 127.0.0.1 without the right "
        "secret (401); later ones from there are not logged",
    ]
    assert not any(SECRET in m or "guess" in m for m in records.messages)


async def test_a_redelivered_update_is_answered_once(config, tg, llm) -> None:
    async with daemon(config()):
        await webhook_set(tg)
        tg.webhook.paused = True
        update = tg.inject_message(DM, DM, "only once")
        statuses = await asyncio.gather(*(tg.webhook.post(update, secret=SECRET) for _ in "ab"))
        assert statuses == [200, 200]
        tg.webhook.resume()  # and Telegram's own delivery of it: a third time
        await tg.webhook.wait_delivered(update["update_id"])
        tg.inject_message(DM, DM, "next")  # a barrier: answered after the first, in order
        await tg.wait_for_call("sendMessage", to(DM), count=2)
    assert tg.chat_texts(DM) == ["echo: only once", "echo: next"]
    assert len(llm.requests) == 2


async def test_an_update_that_could_not_be_stored_gets_500_and_comes_again(config, tg, llm) -> None:
    cfg = config()
    async with daemon(cfg):
        await webhook_set(tg)
        with closing(sqlite3.connect(cfg.storage.resolved_path(), isolation_level=None)) as db:
            db.execute("BEGIN EXCLUSIVE")  # another writer holds the store past its busy timeout
            update = tg.inject_message(DM, DM, "kept for later")
            failed = await tg.webhook.wait_failed(update["update_id"], timeout=30)
            assert inbox_rows(db) == []
            db.execute("ROLLBACK")
        await tg.wait_for_call("sendMessage", to(DM), timeout=10)
    assert failed.status == 500
    assert tg.webhook.deliveries[-1].status == 200
    assert tg.chat_texts(DM) == ["echo: kept for later"]
    assert [text for _, _, text in inbox(cfg)] == ["kept for later"]


def inbox_rows(db: sqlite3.Connection) -> list[Any]:
    return list(db.execute("SELECT id FROM inbox"))


async def test_an_update_that_never_can_be_handled_is_dropped_in_the_end(
    config, tg, llm, monkeypatch
) -> None:

    async def poison() -> None:
        raise RuntimeError("poison")

    patch_text_handler(monkeypatch, lambda t: poison() if t == "poison" else None)
    async with (
        log_waiter("answered 200 and dropped") as dropped,
        daemon(config(), webhook_give_up_s=0.0),
    ):
        await webhook_set(tg)
        bad = tg.inject_message(DM, DM, "poison")
        tg.inject_message(DM, DM, "after it")
        await tg.wait_for_call("sendMessage", to(DM))
        assert dropped.seen.is_set()
    assert [d.status for d in tg.webhook.deliveries if d.update_id == bad["update_id"]] == [200]
    assert tg.chat_texts(DM) == ["echo: after it"]


async def test_an_unreadable_update_is_logged_without_its_text_and_passed_over(
    config, tg, llm, records, port
) -> None:
    odd = {"update_id": 9001, "message": {"message_id": 1, "text": "my private words"}}
    async with daemon(config()):
        await webhook_set(tg)
        assert await tg.webhook.post(odd, secret=SECRET) == 200  # sending it again cannot help
        tg.inject_message(DM, DM, "readable")
        await tg.wait_for_call("sendMessage", to(DM))
        async with aiohttp.ClientSession() as http:
            url = f"http://127.0.0.1:{port}{PATH}"
            secret = {SECRET_HEADER: SECRET}
            big = b'{"update_id": 1, "pad": "' + b"x" * (MAX_BODY + 1) + b'"}'
            async with http.post(url, data=big, headers=secret) as resp:
                assert resp.status == 413
            async with http.post(url, data=b"not json", headers=secret) as resp:
                assert resp.status == 400
            async with http.get(url, headers=secret) as resp:
                assert resp.status == 405
            async with http.post(url + "/other", json=odd, headers=secret) as resp:
                assert resp.status == 404
    unread = [m for m in records.messages if "could not be read" in m]
    assert len(unread) == 1 and unread[0].startswith("Telegram update 9001 could not be read")
    assert not any("my private words" in m for m in records.messages)
    assert tg.chat_texts(DM) == ["echo: readable"]


async def test_switching_back_to_polling_deletes_the_webhook(config, tg, llm) -> None:
    async with daemon(config()):
        await webhook_set(tg)
        tg.inject_message(DM, DM, "by webhook")
        await tg.wait_for_call("sendMessage", to(DM))
    assert tg.webhook.url  # left set while no instance runs: updates wait at Telegram
    tg.inject_message(DM, DM, "while down")
    async with daemon(config(mode="polling")):
        await tg.wait_for_call("deleteWebhook")
        await tg.wait_for_call("getUpdates", status=200)  # 409 while the webhook was set
        await tg.wait_for_call("sendMessage", to(DM), count=2)
    assert tg.calls_of("deleteWebhook")[0].params.get("drop_pending_updates") in (None, False)
    assert tg.chat_texts(DM) == ["echo: by webhook", "echo: while down"]
    assert [c.status for c in tg.calls_of("getUpdates")].count(409) == 0


async def test_a_busy_port_and_a_refused_url_are_reported_and_retried(
    config, tg, llm, port, monkeypatch
) -> None:
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", port))
    blocker.listen()
    try:
        async with (
            log_waiter(f"cannot listen on 127.0.0.1:{port}") as busy,
            daemon(config(), retry_initial_s=0.05),
        ):
            await asyncio.wait_for(busy.seen.wait(), 5)
            assert tg.calls_of("setWebhook") == []  # not before it listens
            blocker.close()
            await webhook_set(tg)
            tg.inject_message(DM, DM, "there now?")
            await tg.wait_for_call("sendMessage", to(DM))
    finally:
        blocker.close()
    refused = config(webhook_url="http://bot.example.com/hook")  # Telegram wants HTTPS
    async with log_waiter("Telegram refused or did not answer setWebhook") as logged:
        async with daemon(refused):
            await asyncio.wait_for(logged.seen.wait(), 5)
            await tg.wait_for_call("setWebhook", count=3, status=400)  # retried with backoff


async def test_a_webhook_update_in_a_group_follows_group_mode(config, tg, llm) -> None:
    """The same PTB handlers as polling: a group message that does not address the bot is
    stored nowhere and still answered 200 (nothing to send again)."""
    cfg = config()
    async with daemon(cfg):
        await webhook_set(tg)
        chatter = tg.inject_message(-100, 7, "just chatting", chat_type="group")
        await tg.webhook.wait_delivered(chatter["update_id"])
        tg.inject_message(DM, DM, "barrier")
        await tg.wait_for_call("sendMessage", to(DM))
    assert [text for _, _, text in inbox(cfg)] == ["barrier"]
