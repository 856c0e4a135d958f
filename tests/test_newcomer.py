"""The newcomer pass of issue 29, through the real CLI: a token pasted where a variable's name
goes is recognised and never printed (check-config, doctor, run); every missing variable is
named at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.test_cli import finish, relaybot, write_config

TELEGRAM_TOKEN = "7712345678:AAHq1w2e3r4t5y6u7i8o9p0asdfghjklzxc"
DISCORD_TOKEN = "MTEyMzQ1Njc4OTAxMjM0NTY3OA.GhIjKl.abcdefghijklmnopqrstuvwxyz0123456789AB"
API_KEY = "sk-proj-abcdefghijklmnop1234567890"


@pytest.mark.parametrize(
    ("section", "key", "value", "shape"),
    [
        ("telegram", "token_env", TELEGRAM_TOKEN, "a Telegram bot token"),
        ("discord", "token_env", DISCORD_TOKEN, "a Discord bot token"),
        ("llm", "api_key_env", API_KEY, "an API key"),
    ],
)
async def test_a_token_pasted_into_an_env_key_is_recognised_and_never_printed(
    tmp_path: Path, llm: FakeOpenAI, section: str, key: str, value: str, shape: str
) -> None:
    path = write_config(tmp_path, llm)
    text = path.read_text()
    if section == "llm":
        text = text.replace('api_key_env = "RELAYBOT_TEST_KEY"', f'api_key_env = "{value}"')
    else:
        text += f'\n[{section}]\nenabled = true\n{key} = "{value}"\nallowed_users = ["1"]\n'
    path.write_text(text)
    for command in ("check-config", "doctor", "run"):
        code, out, err = await finish(*await relaybot(command, "-c", str(path)))
        assert code == 78, (command, out, err)
        assert f"{section}.{key}: holds what looks like {shape}" in err
        assert "environment" in err and f'{key} = "' in err  # the fix, in words
        assert value not in out + err and value[:12] not in out + err


async def test_every_missing_variable_is_named_at_once(tmp_path: Path, llm: FakeOpenAI) -> None:
    path = write_config(tmp_path, llm)
    path.write_text(
        path.read_text().replace("RELAYBOT_TEST_KEY", "RB_MISSING_KEY")
        + '\n[telegram]\nenabled = true\ntoken_env = "RB_MISSING_TG"\nallowed_users = ["1"]\n'
        + '[discord]\nenabled = true\ntoken_env = "RB_MISSING_DC"\nallowed_users = ["1"]\n'
    )
    code, _, err = await finish(*await relaybot("check-config", "-c", str(path)))
    assert code == 78
    for key, name in (
        ("llm.api_key_env", "RB_MISSING_KEY"),
        ("telegram.token_env", "RB_MISSING_TG"),
        ("discord.token_env", "RB_MISSING_DC"),
    ):
        assert f"{key}: the environment variable {name} is not set" in err
