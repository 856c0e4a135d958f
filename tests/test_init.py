"""First use: `relaybot init` and `make run` on a checkout without config.toml."""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.test_cli import finish, relaybot

ROOT = Path(__file__).parent.parent


async def test_init_asks_the_essentials_and_writes_a_config(
    tmp_path: Path, llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "config.toml"
    answers = [
        llm.base_url,  # the endpoint
        "sk-123-pasted-key",  # the key itself, not a variable name: asked again
        "RELAYBOT_TEST_KEY",  # set: its value is not asked
        "fake-model",  # the model, from the server's list
        "y",  # Telegram
        "",  # its token variable: the default
        "",  # its value: not given (set it later)
        "@me",  # not an id: asked again
        "123456789",
        "n",  # Discord
    ]
    stdin = "".join(f"{a}\n" for a in answers).encode()
    proc, io = await relaybot("init", "-c", str(cfg), stdin=stdin)
    code, out, err = await finish(proc, io)
    assert code == 0, err
    assert out.count("That is an API key itself (sk-1… (17 characters))") == 1
    assert out.count("A user id is a number") == 1
    assert "1. fake-model" in out and "fake-model answered a test request." in out
    assert "export TELEGRAM_BOT_TOKEN=..." in out and "# the bot token from @BotFather" in out
    assert f"TELEGRAM_BOT_TOKEN=... in {tmp_path / 'relaybot.env'})" in out
    assert "RELAYBOT_TEST_KEY=" not in out  # set already: not asked for
    assert not (tmp_path / "relaybot.env").exists()  # no value typed: no env file
    written = cfg.read_text()
    assert "sk-123-pasted-key" not in written
    assert f'base_url = "{llm.base_url}"' in written and 'model = "fake-model"' in written
    # a local URL: a small tool set (the ten default built-ins take ~1,900 tokens of a window)
    assert 'builtins = ["current_time", "remind_me"]' in written
    assert (
        'allowed_users = ["123456789"]' in written and 'token_env = "TELEGRAM_BOT_TOKEN"' in written
    )
    # what it wrote is a config `run` accepts, once the token is in the environment
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:not-checked-by-check-config")
    proc, io = await relaybot("check-config", "-c", str(cfg))
    code, out, err = await finish(proc, io)
    assert code == 0 and out.startswith(f"{cfg}: OK") and "warning" not in out, err
    proc, io = await relaybot("init", "-c", str(cfg), stdin=b"")
    code, out, _ = await finish(proc, io)
    assert code == 1 and "already exists" in out and cfg.read_text() == written


async def test_make_run_on_first_use_writes_the_config_and_explains(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    venv = Path(sys.prefix)
    cfg = tmp_path / "config.toml"
    proc = await asyncio.create_subprocess_exec(
        "make",
        "-s",
        "-C",
        str(ROOT),
        "-o",
        f"{venv}/bin/.installed",  # the venv running this test is set up already
        "run",
        f"VENV={venv}",
        f"CONFIG={cfg}",
        stdin=asyncio.subprocess.DEVNULL,  # no answers: the defaults
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out = (await asyncio.wait_for(proc.communicate(), 60))[0].decode()
    assert proc.returncode == 0, out
    assert "Error" not in out and "***" not in out
    assert f"Wrote {cfg}.\nNext:" in out and "export OPENAI_API_KEY=..." in out
    assert out.rstrip().endswith("Then: make run (the daemon), or make chat (talk to it here).")
    assert 'model = "gpt-4o-mini"' in cfg.read_text()
