"""Issue 40, items 7 and 11 (config errors): a key-shaped value in any field of the config is
never echoed, by `check-config`, `run` or `doctor`: it is shown as its first 4 characters and its
length. Every mistake of a file is named at once, not one per attempt."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.test_cli import finish, relaybot, write_config

KEY = "sk-proj-Zx81abcdefghijklmnop1234567890"
GROQ = "gsk_Q9abcdefghijklmnopqrstuvwxyz0123"
HEX = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"


@pytest.mark.parametrize(
    "fields",
    [
        # Two mistakes, named at once (one run of each command for both):
        {
            "base_url": KEY,  # the case reported: a key where the address goes
            "request_timeout_s": GROQ,  # a wrong type: its error names no value
        },
        {"base_url": f"https://{GROQ}.example/v1"},  # inside a valid-looking URL
        {"model": HEX},  # a valid value, echoed by check-config when all is well
    ],
    ids=["mistakes", "url", "model"],
)
async def test_a_key_in_any_field_is_never_echoed(
    tmp_path: Path, llm: FakeOpenAI, fields: dict[str, str]
) -> None:
    path = write_config(tmp_path, llm)
    given = tuple(f"{key} =" for key in fields)
    lines = [line for line in path.read_text().splitlines() if not line.startswith(given)]
    at = lines.index("[llm]") + 1
    mine = [f'{key} = "{value}"' for key, value in fields.items()]
    path.write_text("\n".join([*lines[:at], *mine, *lines[at:]]) + "\n")
    secrets = {k: next(s for s in (KEY, GROQ, HEX) if s in v) for k, v in fields.items()}
    for command in ("check-config", "run", "doctor"):
        code, out, err = await finish(*await relaybot(command, "-c", str(path)))
        said = out + err
        for key, secret in secrets.items():
            assert secret not in said and secret[:8] not in said, (command, said)
            if command == "check-config" and key != "request_timeout_s":  # the value is named
                assert f"{secret[:4]}… ({len(secret)} characters)" in said, said
            if command == "check-config" and fields[key] in (KEY, GROQ):  # not a URL or number
                assert code == 78 and f"llm.{key}: " in err


async def test_a_key_in_base_url_is_named_as_a_key(tmp_path: Path, llm: FakeOpenAI) -> None:
    path = write_config(tmp_path, llm)
    path.write_text(path.read_text().replace(f'"{llm.base_url}"', f'"{KEY}"'))
    code, _, err = await finish(*await relaybot("check-config", "-c", str(path)))
    assert code == 78
    assert f"llm.base_url: sk-p… ({len(KEY)} characters) looks like an API key, not a URL" in err
    assert 'api_key_env = "OPENAI_API_KEY"' in err


async def test_every_mistake_of_a_file_is_named_at_once(tmp_path: Path, llm: FakeOpenAI) -> None:
    path = write_config(tmp_path, llm)
    path.write_text(
        path.read_text().replace("max_retries = 0", 'max_retries = "two"\nstream = "yes"')
        + "\n[storage.extra]\n"
        + '\n[telegram]\nenabled = true\ntoken_env = "7712345678:AAHq1w2e3r4t5y6u7i8o9p0asdfghj"\n'
        + "\n[limits]\nmessages_per_minute = -1\n"
    )
    for command in ("check-config", "run"):
        code, out, err = await finish(*await relaybot(command, "-c", str(path)))
        assert code == 78, (command, out, err)
        assert "relaybot: config error: 5 problems:\n" in err, err
        for line in (
            "  telegram.token_env: holds what looks like a Telegram bot token itself (7712… (",
            "  llm.stream: must be true or false, without quotes, e.g. stream = true",
            "  llm.max_retries: must be a whole number, e.g. max_retries = 2",
            "  storage.extra: unknown key (`relaybot init --example` prints every key there is)",
            "  limits.messages_per_minute: ",
        ):
            assert f"\n{line}" in err, (line, err)
        assert "7712345678" not in err


async def test_a_single_mistake_keeps_its_one_line(tmp_path: Path, llm: FakeOpenAI) -> None:
    path = write_config(tmp_path, llm)
    path.write_text(path.read_text().replace("max_retries = 0", "max_retries = -1"))
    code, _, err = await finish(*await relaybot("check-config", "-c", str(path)))
    assert code == 78 and err.startswith("relaybot: config error: llm.max_retries: "), err
    assert err.count("\n") == 1
