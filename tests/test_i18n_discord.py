"""relaybot's own words in the user's language on Discord: real discord.py against the fake
Discord and the real App. A user whose app is French gets French slash-command replies, the
synced commands carry their descriptions in every language relaybot speaks, and a confirmation
asked of that user has French buttons (the locale of their last interaction is remembered: a
gateway message does not carry one)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from bot.app import App
from bot.config import Config
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.test_telegram import delete_file

GUILD, CHANNEL = 1001, 2001
CLAIRE, DAN = 4001, 4002  # Claire's Discord is in French, Dan's in American English


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(guilds={GUILD: [CHANNEL]}) as server:
        server.user_locales[CLAIRE] = "fr"
        yield server


@pytest.fixture
def config(make_config: Callable[..., Config], fake: FakeDiscord) -> Config:
    discord = {
        "enabled": True,
        "token": fake.token,
        "api_base_url": fake.api_base_url,
        "allowed_users": [CLAIRE, DAN],
    }
    return make_config(discord=discord)


async def slash(fake: FakeDiscord, name: str, user: int, **options: str) -> str:
    command = await fake.inject_slash(name, user, CHANNEL, GUILD, options)
    answer = await fake.wait_for_call("POST", rf"/interactions/{command.id}/[^/]+/callback")
    if answer.json["type"] == 5:  # deferred ("thinking"): the reply follows as a webhook edit
        edit = await fake.wait_for_call("PATCH", rf"/webhooks/\d+/{command.token}/messages/")
        return str(edit.json["content"])
    return str(answer.json["data"]["content"])


async def test_a_french_user_gets_french_replies_and_menus(
    config: Config, fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    async with App(config):
        await fake.wait_for_call("PUT", r"/applications/\d+/commands")
        stopped = await slash(fake, "stop", CLAIRE)
        settings = await slash(fake, "settings", CLAIRE)
        english = await slash(fake, "stop", DAN)
    assert stopped == "Rien à arrêter."
    assert settings.startswith("Réglages de cette discussion :")
    assert "• Langue : automatique" in settings
    assert english == "Nothing to stop."
    synced = {c["name"]: c for c in fake.commands[None]}
    assert synced["help"]["description"] == "What I can do"
    assert synced["help"]["description_localizations"]["fr"] == "Ce que je sais faire"
    assert synced["help"]["description_localizations"]["zh-CN"] == "我能做什么"
    assert synced["stop"]["description_localizations"]["de"].startswith("Anhalten")
    option = synced["settings"]["options"][0]
    assert option["description_localizations"]["es-ES"].startswith("Qué cambiar")


async def test_a_confirmation_for_a_french_user_has_french_buttons(
    make_config: Callable[..., Config], fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    discord = {
        "enabled": True,
        "token": fake.token,
        "api_base_url": fake.api_base_url,
        "allowed_users": [CLAIRE],
    }
    llm.script(tool_call("delete_file", {"name": "notes.txt"}), text("C'est fait."))
    async with App(make_config(discord=discord), extra_tools=(delete_file,)):
        await fake.wait_for_call("PUT", r"/applications/\d+/commands")
        await slash(fake, "stop", CLAIRE)  # her app's locale, remembered for her messages
        await fake.inject_message(CHANNEL, CLAIRE, "supprime notes.txt", GUILD, mentions_bot=True)
        prompt = await fake.wait_for_call(
            "POST", rf"/channels/{CHANNEL}/messages", lambda c: bool(c.json.get("components"))
        )
    labels = [b["label"] for row in prompt.json["components"] for b in row["components"]]
    assert labels == ["Autoriser une fois", "Ne pas exécuter"]
    assert "Seul·e" in prompt.json["content"]
