"""The newcomer pass of issue 29, through the real CLI: a token pasted where a variable's name
goes is recognised and never printed (check-config, doctor, run); every missing variable is
named at once; no config names `relaybot init`, which writes under $XDG_CONFIG_HOME and leaves
quietly on Ctrl-C."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI
from tests.test_cli import finish, relaybot, write_config

TELEGRAM_TOKEN = "7712345678:AAHq1w2e3r4t5y6u7i8o9p0asdfghjklzxc"
DISCORD_TOKEN = "MTEyMzQ1Njc4OTAxMjM0NTY3OA.GhIjKl.abcdefghijklmnopqrstuvwxyz0123456789AB"
ROOT = Path(__file__).resolve().parent.parent
API_KEY = "sk-proj-abcdefghijklmnop1234567890"


PASTED = [  # (section, key, value, shape)
    ("telegram", "token_env", TELEGRAM_TOKEN, "a Telegram bot token"),
    ("discord", "token_env", DISCORD_TOKEN, "a Discord bot token"),
    ("llm", "api_key_env", API_KEY, "an API key"),
]


async def test_a_token_pasted_into_an_env_key_is_recognised_and_never_printed(
    tmp_path: Path, llm: FakeOpenAI
) -> None:
    """One config with all three pasted: each command names every one at once."""
    path = write_config(tmp_path, llm)
    text = path.read_text()
    for section, key, value, _ in PASTED:
        if section == "llm":
            text = text.replace('api_key_env = "RELAYBOT_TEST_KEY"', f'api_key_env = "{value}"')
        else:
            text += f'\n[{section}]\nenabled = true\n{key} = "{value}"\nallowed_users = ["1"]\n'
    path.write_text(text)
    for command in ("check-config", "doctor", "run"):
        code, out, err = await finish(*await relaybot(command, "-c", str(path)))
        assert code == 78, (command, out, err)
        for section, key, value, shape in PASTED:
            assert f"{section}.{key}: holds what looks like {shape}" in err, (command, err)
            assert f'{key} = "' in err  # the fix, in words
            assert value not in out + err and value[:12] not in out + err
        assert "environment" in err


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


async def _in(
    directory: Path, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> asyncio.subprocess.Process:
    """`relaybot ARGS` started in `directory`, with `env` added to a clean XDG environment."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "RELAYBOT_"))}
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        *args,
        cwd=directory,
        env={**base, "PYTHONPATH": str(ROOT), **(env or {})},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def test_without_a_config_the_error_names_relaybot_init(tmp_path: Path) -> None:
    proc = await _in(tmp_path, "chat", env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    _, err = await asyncio.wait_for(proc.communicate(b""), 30)
    assert proc.returncode == 78
    assert "no config file at" in err.decode() and "run `relaybot init`" in err.decode()


async def test_init_writes_under_xdg_config_home_and_ctrl_c_leaves_without_a_traceback(
    tmp_path: Path, llm: FakeOpenAI
) -> None:
    xdg = {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "XDG_STATE_HOME": str(tmp_path / "state")}
    proc = await _in(tmp_path, "init", env=xdg)
    assert proc.stdout is not None
    await asyncio.wait_for(proc.stdout.read(1), 30)  # the first question is on the screen
    proc.send_signal(signal.SIGINT)
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 130 and "Traceback" not in err.decode()
    assert "nothing written" in err.decode()
    answers = f"{llm.base_url}\nRB_NEWCOMER_KEY\n\nfake-model\nn\nn\n".encode()  # key: later
    proc = await _in(tmp_path, "init", stdin=answers, env=xdg)
    out, err = await asyncio.wait_for(proc.communicate(answers), 30)
    written = tmp_path / "xdg" / "relaybot" / "config.toml"
    assert proc.returncode == 0, err.decode()
    assert written.exists() and not (tmp_path / "config.toml").exists()
    assert f"Wrote {written}" in out.decode() and " -c " not in out.decode()
    other = tmp_path / "elsewhere"
    other.mkdir()
    proc = await _in(other, "check-config", env={**xdg, "RB_NEWCOMER_KEY": "sk-newcomer-1234"})
    out, err = await asyncio.wait_for(proc.communicate(b""), 30)
    assert f"{written}: OK" in out.decode(), err.decode()


async def test_a_chat_only_config_passes_check_config_and_doctor_with_a_note(
    tmp_path: Path, llm: FakeOpenAI
) -> None:
    path = write_config(tmp_path, llm)
    code, out, err = await finish(*await relaybot("check-config", "-c", str(path)))
    assert code == 0, err
    assert "channels: none (relaybot chat only)" in out
    assert "`relaybot run` needs enabled = true under [telegram] or [discord]" in out
    code, out, err = await finish(*await relaybot("doctor", "-c", str(path)))
    assert "no channel is enabled: `relaybot chat` works" in out + err
