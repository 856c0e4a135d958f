"""relaybot's own words in the user's language, through the real python-telegram-bot against the
fake Bot API: a German user (language_code "de") sees German buttons, footer, answers to their
presses and refusals; /settings switches a chat to Spanish; the command menu is registered per
language; the model is told the language, and an English chat's requests are unchanged."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bot.config import Config
from engine import Command
from engine.i18n import LANGUAGES
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.telegram_server import FakeTelegram
from tests.test_telegram import DM, answers, daemon, deleted, telegram_config
from tests.test_telegram import tg as tg  # the fake Bot API fixture

ANNA = 2002  # writes in German
BOB = 3003  # his app says nothing of his language


def config_for(make_config: Callable[..., Config], tg: FakeTelegram, **sections: Any) -> Config:
    """The tests' Telegram config with `sections` added ({"access": {...}, ...})."""
    telegram = {
        "enabled": True,
        "token": tg.token,
        "api_base_url": tg.base_url,
        "allowed_users": ["*"],
        "poll_timeout_s": 5,
    }
    return make_config(telegram=telegram, tools={"confirmation_timeout_s": 60}, **sections)


async def test_a_german_user_sees_german_buttons_and_answers(make_config, tg, llm) -> None:
    tg.user_languages[ANNA] = "de"
    llm.script(tool_call("delete_file", {"name": "notes.txt"}), text("Erledigt."))
    async with daemon(telegram_config(make_config, tg)):
        tg.inject_message(ANNA, ANNA, "lösche notes.txt", first_name="Anna")
        prompt = await tg.wait_for_call("sendMessage", lambda p: "reply_markup" in p)
        row = prompt.params["reply_markup"]["inline_keyboard"][0]
        assert [b["text"] for b in row] == ["Einmal erlauben", "Nicht ausführen"]
        assert "Nur Anna kann antworten · läuft in 1 Min. ab" in prompt.params["text"]
        message_id = max(mid for chat, mid in tg.messages if chat == ANNA)
        tg.inject_callback(ANNA, 4242, message_id, row[0]["callback_data"])  # not hers to press
        tg.inject_callback(ANNA, ANNA, message_id, row[0]["callback_data"])
        await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "Erledigt.")
        done = await tg.wait_for_call("editMessageText", lambda p: "Erledigt:" in p["text"])
    assert deleted == ["notes.txt"]
    (other, _), confirmed = answers(tg)
    assert other == "Only Anna can confirm this."  # the presser's app says nothing: English
    assert confirmed == ("Bestätigt.", False)
    assert done.params["text"].startswith("✅ Erledigt: Delete the file notes.txt")


async def test_a_german_refusal_and_a_chat_switched_to_spanish(make_config, tg, llm) -> None:
    tg.user_languages[ANNA] = "de"
    cfg = config_for(make_config, tg, access={"max_message_chars": 100})
    async with daemon(cfg):
        tg.inject_message(ANNA, ANNA, "x" * 150)
        refusal = await tg.wait_for_call("sendMessage", lambda p: "150" in p.get("text", ""))
        assert refusal.params["text"] == (
            "⚠️ Deine Nachricht ist zu lang für mich (150 Zeichen; das Limit ist 100). Bitte "
            "kürze sie oder teile sie in mehrere Nachrichten auf."
        )
        tg.inject_message(ANNA, ANNA, "/settings language es")
        saved = await tg.wait_for_call("sendMessage", lambda p: "Guardado." in p.get("text", ""))
        assert "• Idioma: Español" in saved.params["text"]
        buttons = [b[0]["text"] for b in saved.params["reply_markup"]["inline_keyboard"]]
        assert "Deutsch" in buttons and "Idioma: automático" in buttons
        tg.inject_message(ANNA, ANNA, "/stop")  # the chat's choice wins over her app's German
        await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "No hay nada que detener.")
        tg.inject_message(ANNA, ANNA, "/settings language auto")
        await tg.wait_for_call("sendMessage", lambda p: "Gespeichert." in p.get("text", ""))
        tg.inject_message(BOB, BOB, "/stop")  # no language told: [engine] language
        await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "Nothing to stop.")


async def test_the_default_language_and_the_command_menus(make_config, tg, llm) -> None:
    async with daemon(config_for(make_config, tg, engine={"language": "fr"})):
        tg.inject_message(BOB, BOB, "/stop")
        await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "Rien à arrêter.")
        await tg.wait_for_call("setMyCommands", count=len(LANGUAGES))  # beside the first poll
    assert {c["command"] for c in tg.commands} == {c.value for c in Command}
    menus = {
        code: {c["command"]: c["description"] for c in m}
        for code, m in tg.localized_commands.items()
    }
    assert set(menus) == {"de", "es", "fr", "ru", "zh"}
    assert menus["de"]["help"] == "Was ich kann" and menus["zh"]["help"] == "我能做什么"
    assert menus["ru"]["stop"].startswith("Остановить")


async def test_the_model_is_told_the_language_and_english_requests_are_unchanged(
    make_config, tg, llm: FakeOpenAI
) -> None:
    llm.script(text("Hallo!"), text("Hello!"), text("Hello again!"))
    tg.user_languages[ANNA] = "de-DE"
    tg.user_languages[DM] = "en"
    cfg = config_for(make_config, tg, llm={"system_prompt": "You are helpful."})
    async with daemon(cfg):
        tg.inject_message(ANNA, ANNA, "hallo")
        await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "Hallo!")
        tg.inject_message(DM, DM, "hello")
        await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "Hello!")
        tg.inject_message(BOB, BOB, "hello")
        await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "Hello again!")
    german, english, untold = (r["messages"][0]["content"] for r in llm.requests)
    assert german == "You are helpful.\n\nThe user's language is German (de)."
    assert english == untold == "You are helpful."  # byte for byte what it was before
