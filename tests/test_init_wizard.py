"""`relaybot init` as the one wizard, through the real CLI against the fake OpenAI server: the
endpoint probed (``/v1`` offered), the key kept in the env file and tested, the model chosen from
the server's list, the owner set; Ctrl-D at a terminal stops. And a base_url without /v1 told
from an unknown model, by `relaybot doctor` and in the chat."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from pathlib import Path

import pytest

from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.test_cli import finish, relaybot
from tests.test_console import Terminal
from tools.builtins._sandbox import landlock_abi

KEY = "sk-right-key-1234567890"
TOKEN = "123456:ABCDEFGHIJKLMNOPQRSTUVWXYZabc"


async def test_init_probes_lists_tests_and_keeps_the_key_beside_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WIZARD_TEST_KEY", raising=False)
    monkeypatch.delenv("TELEGRAM_BOT_TOKEN", raising=False)
    cfg = tmp_path / "config.toml"
    async with FakeOpenAI(api_key=KEY, models=("llama-3.2-3b", "qwen2.5-7b")) as llm:
        root = f"http://127.0.0.1:{llm.port}"  # the API is under /v1: offered
        answers = [
            root,
            "",  # use .../v1? yes
            "gsk_abcdefghijklmnop123456",  # the key itself as the variable's name: refused
            "WIZARD_TEST_KEY",
            "sk-wrong-key-0000000000",  # rejected by the server: asked again
            KEY,
            "gpt-4o",  # not offered: asked again
            "2",  # the second of the list
            "y",  # Telegram
            "",  # its variable: the default
            TOKEN,
            "42",  # the user id: the owner
            "n",  # Discord
        ]
        stdin = "".join(f"{a}\n" for a in answers).encode()
        proc, io = await relaybot("init", "-c", str(cfg), stdin=stdin)
        code, out, err = await finish(proc, io)
        assert code == 0, out + err
        assert f"{root} answers 404, {root}/v1 answers: the API is under /v1." in out
        assert out.count("That is an API key itself (gsk_… (26 characters))") == 1
        assert out.count("rejected the API key (401: Incorrect API key provided.)") == 1
        assert "1. llama-3.2-3b" in out and "2. qwen2.5-7b" in out
        assert "'gpt-4o' is not among the server's models" in out
        assert "qwen2.5-7b answered a test request." in out
        assert "You (telegram:42) are the bot's owner" in out and "pairing code" in out
        for secret in (KEY, TOKEN, "gsk_abcdefghijklmnop123456", "sk-wrong-key"):
            assert secret not in out + err
        # the test request: the chosen model, one token, the key that worked
        assert llm.requests[-1]["model"] == "qwen2.5-7b" and llm.requests[-1]["max_tokens"] == 1
        assert llm.auth_headers[-1] == f"Bearer {KEY}"

        written = cfg.read_text()
        assert f'base_url = "{root}/v1"' in written and 'model = "qwen2.5-7b"' in written
        assert 'api_key_env = "WIZARD_TEST_KEY"' in written and KEY not in written
        assert 'admins = ["telegram:42"]' in written and "pairing = true" in written
        env = tmp_path / "relaybot.env"
        assert stat.S_IMODE(env.stat().st_mode) == 0o600
        assert env.read_text().splitlines() == [
            f"WIZARD_TEST_KEY={KEY}",
            f"TELEGRAM_BOT_TOKEN={TOKEN}",
        ]
        # a new shell: no exports, relaybot reads the env file
        proc, io = await relaybot("chat", "-c", str(cfg), stdin=b"hello\n")
        code, out, err = await finish(proc, io)
        assert code == 0 and out.strip() == "echo: hello", out + err
        assert "others may read it" not in err
        env.chmod(0o644)  # made by hand, say: said at start, once
        proc, io = await relaybot("chat", "-c", str(cfg), stdin=b"hello\n")
        code, out, err = await finish(proc, io)
        assert code == 0 and out.strip() == "echo: hello", out + err
        assert err.count(f"others may read it (mode 644): chmod 600 {env}") == 1
        # a variable set in the environment wins over the file
        monkeypatch.setenv("WIZARD_TEST_KEY", "sk-another-key-0000000")
        proc, io = await relaybot("chat", "-c", str(cfg), stdin=b"hello\n")
        code, out, err = await finish(proc, io)
        assert "refused this bot's credentials" in out, out + err
        assert llm.auth_headers[-1] == "Bearer sk-another-key-0000000"


async def test_ctrl_d_at_a_terminal_stops_init_and_writes_nothing(
    tmp_path: Path, llm: FakeOpenAI
) -> None:
    cfg = tmp_path / "config.toml"
    term = Terminal()
    env = {**os.environ, "TERM": "xterm"}
    io = {"stdin": term.child, "stdout": term.child, "stderr": term.child, "env": env}
    command = (sys.executable, "-m", "bot", "init", "-c", str(cfg))
    proc = await asyncio.create_subprocess_exec(*command, **io)
    try:
        await term.expect(b"Model endpoint")
        term.type(llm.base_url.encode() + b"\r")
        await term.expect(b"Environment variable holding the API key")
        term.type(b"\x04")  # Ctrl-D: leave, as Ctrl-C does
        await term.expect(b"init stopped; nothing written to")
        assert await asyncio.wait_for(proc.wait(), 30) == 130
    finally:
        term.close()
    assert not cfg.exists() and not (tmp_path / "relaybot.env").exists()
    assert b"Use Telegram?" not in term.screen  # no defaults taken for the rest


async def test_init_knows_anthropic_lists_its_models_and_installs_the_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("WIZARD_ANT_KEY", raising=False)
    cfg = tmp_path / "config.toml"
    key = "sk-ant-wizard-1234567890"
    async with FakeAnthropic(api_key=key, models=("claude-a", "claude-b")) as claude:
        answers = [claude.base_url, "WIZARD_ANT_KEY", key, "1", "n", "n"]
        stdin = "".join(f"{a}\n" for a in answers).encode()
        proc, io = await relaybot("init", "-c", str(cfg), "--install-service", stdin=stdin)
        code, out, err = await finish(proc, io)
        assert code == 0, out + err
        assert f"{claude.base_url} is Anthropic's Messages API." in out
        assert "1. claude-a" in out and "claude-a answered a test request." in out
        assert claude.requests[-1]["max_tokens"] == 1 and claude.api_keys[-1] == key
        written = cfg.read_text()
        assert 'provider = "anthropic"' in written and f'base_url = "{claude.base_url}"' in written
        assert 'model = "claude-a"' in written and 'api_key_env = "WIZARD_ANT_KEY"' in written
        unit = tmp_path / "xdg" / "systemd" / "user" / "relaybot.service"
        assert f"Wrote {unit}" in out and f"run -c {cfg}" in unit.read_text()
        proc, io = await relaybot("chat", "-c", str(cfg), stdin=b"hello\n")
        code, out, err = await finish(proc, io)
        assert code == 0 and out.strip() == "echo: hello", out + err


def _config(tmp_path: Path, base_url: str, model: str) -> Path:
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        f'[llm]\nbase_url = "{base_url}"\nmodel = "{model}"\nmax_retries = 0\n'
        f'[storage]\npath = "{tmp_path / "state.db"}"\n[tools]\nbuiltins = ["current_time"]\n'
    )
    return cfg


async def test_doctor_and_chat_tell_a_missing_v1_from_an_unknown_model(tmp_path: Path) -> None:
    async with FakeOpenAI(models=("llama3.2", "qwen2.5"), reject_unknown_models=True) as llm:
        root = f"http://127.0.0.1:{llm.port}"
        cfg = _config(tmp_path, root, "llama3.2")  # as Ollama's address is often given
        proc, io = await relaybot("doctor", "-c", str(cfg))
        code, out, err = await finish(proc, io)
        assert code == 1
        assert f"llm: FAILED - base_url is missing /v1: {root} answers 404" in out, out
        assert f'set [llm] base_url = "{root}/v1"' in out and "check [llm] model" not in out
        proc, io = await relaybot("chat", "-c", str(cfg), stdin=b"hello\n")
        code, out, err = await finish(proc, io)
        assert "its base_url is missing /v1" in out and "[llm] base_url" in out, out + err
        assert "does not know the model" not in out

        cfg.unlink()
        cfg = _config(tmp_path, f"{root}/v1", "llama3")  # a model the server does not have
        proc, io = await relaybot("doctor", "-c", str(cfg))
        code, out, err = await finish(proc, io)
        assert code == 1 and "model 'llama3' not offered" in out, out
        assert "set [llm] model to one of: llama3.2, qwen2.5" in out and "missing /v1" not in out
        proc, io = await relaybot("chat", "-c", str(cfg), stdin=b"hello\n")
        code, out, err = await finish(proc, io)
        assert "does not know the model" in out and "check [llm] model" in out, out + err
        assert "answered 404" in err and "; the server offers: llama3.2, qwen2.5" in err


@pytest.mark.skipif(landlock_abi() < 1, reason="hiding the env file from commands needs Landlock")
async def test_a_command_the_bot_runs_cannot_read_the_env_file(
    tmp_path: Path, llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WIZARD_TEST_KEY", raising=False)
    workspace = tmp_path / "workspace"  # beside the env file, as in a checkout
    workspace.mkdir()
    cfg = _config(tmp_path, llm.base_url, "fake-model")
    text_ = cfg.read_text().replace('"current_time"', '"run_command"')
    # Landlock's hiding (sandbox = "none"); in bubblewrap neither file is there at all
    cfg.write_text(f'{text_}workspace = "{workspace}"\n\n[tools.run_command]\nsandbox = "none"\n')
    cfg.write_text(cfg.read_text().replace("[llm]\n", '[llm]\napi_key_env = "WIZARD_TEST_KEY"\n'))
    env = tmp_path / "relaybot.env"
    env.write_text(f"WIZARD_TEST_KEY={KEY}\n")
    env.chmod(0o600)
    attack = f"cat {env}; cat ../relaybot.env; head -1 {cfg}"  # the config beside it: readable
    llm.script(tool_call("run_command", {"command": attack}), text("no luck"))
    proc, io = await relaybot("chat", "-c", str(cfg), stdin=b"run it\ny\n")
    code, out, err = await finish(proc, io)
    assert code == 0 and "no luck" in out, out + err
    result = next(m for m in llm.requests[-1]["messages"] if m["role"] == "tool")["content"]
    assert f"cat: {env}: Permission denied" in result and "\n[llm]\n" in result, result
    assert KEY not in result and KEY not in out + err
    assert llm.auth_headers[0] == f"Bearer {KEY}"  # the daemon itself read it
