"""/settings on Discord: real discord.py against the fake Discord and the real App. Who may change
a server channel's settings (Manage Server, a role named in admin_roles, [access] admins), the
slash command's text option, and reply mode "all" for one channel."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from bot.app import App
from bot.config import Config
from tests.fakes.discord_server import Call, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI

GUILD, CHANNEL, OTHER_CHANNEL = 1001, 2001, 2002
MANAGER, MOD, PLAIN, OWNER = 4001, 4002, 4003, 4004
MANAGE_GUILD = 1 << 5


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(guilds={GUILD: [CHANNEL, OTHER_CHANNEL]}) as server:
        managers = server.add_role(GUILD, "Managers", MANAGE_GUILD)
        mods = server.add_role(GUILD, "Mods")
        server.member_roles[(GUILD, MANAGER)] = [managers]
        server.member_roles[(GUILD, MOD)] = [mods]
        yield server


@pytest.fixture
def config(make_config: Callable[..., Config], fake: FakeDiscord) -> Config:
    discord = {
        "enabled": True,
        "token": fake.token,
        "api_base_url": fake.api_base_url,
        "allowed_users": [MANAGER, MOD, PLAIN, OWNER],
        "admin_roles": ["Mods"],
    }
    return make_config(discord=discord, access={"admins": [f"discord:{OWNER}"]})


async def settings(fake: FakeDiscord, user: int, text: str, channel: int = CHANNEL) -> str:
    slash = await fake.inject_slash("settings", user, channel, GUILD, {"text": text})
    answer = await fake.wait_for_call("POST", rf"/interactions/{slash.id}/[^/]+/callback")
    return str(answer.json["data"]["content"])


def posted(text: str) -> Callable[[Call], bool]:
    return lambda call: text in (call.json or {}).get("content", "")


async def test_only_server_admins_change_settings_and_all_mode_is_per_channel(
    config: Config, fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    async with App(config):
        await fake.wait_for_call("PUT", r"/applications/\d+/commands")
        refused = await settings(fake, PLAIN, "persona Speak like a bard")
        by_role = await settings(fake, MOD, "persona Speak like a bard")
        by_permission = await settings(fake, MANAGER, "mode all")
        by_owner = await settings(fake, OWNER, "mode mentions", OTHER_CHANNEL)
        await fake.inject_message(OTHER_CHANNEL, PLAIN, "not for you", GUILD)
        await fake.inject_message(CHANNEL, PLAIN, "hello all", GUILD)
        await fake.wait_for_call("POST", rf"/channels/{CHANNEL}/messages", posted("echo:"))
        await fake.inject_message(OTHER_CHANNEL, PLAIN, "a mention", GUILD, mentions_bot=True)
        await fake.wait_for_call("POST", rf"/channels/{OTHER_CHANNEL}/messages", posted("echo:"))
    assert refused.startswith("Only this group's admins can change its settings")
    assert by_role.startswith("Saved.") and "Persona: Speak like a bard" in by_role
    assert by_permission.startswith("Saved.") and "I answer: every message" in by_permission
    assert by_owner.startswith("Saved.")  # relaybot's [access] admins, in any server
    asked: list[dict[str, Any]] = llm.requests
    assert [r["messages"][-1]["content"] for r in asked] == [
        "[user4003] hello all",
        "[user4003] a mention",
    ]
    assert "Speak like a bard" in asked[0]["messages"][0]["content"]
    assert "Speak like a bard" not in asked[1]["messages"][0]["content"]
    synced = {c["name"]: c for c in fake.commands[None]}
    assert synced["settings"]["options"][0]["name"] == "text"
