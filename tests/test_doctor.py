"""`relaybot doctor` against fake servers: all good, a bad token, the LLM down or refusing."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from bot import _doctor_llm
from bot._doctor_base import Status
from bot._lock import StoreLock
from bot.config import ModelEndpoint
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, Reply, error, hold, text, tool_call
from tests.fakes.telegram_server import FakeTelegram


def calls_the_tool(body: dict[str, Any]) -> Reply:
    """A model with tool support: calls the first tool it is offered."""
    if body.get("tools"):
        return tool_call(body["tools"][0]["function"]["name"], {})
    return text("no tools offered")


@pytest.fixture(autouse=True)
def tool_model(llm: FakeOpenAI) -> None:
    llm.default = calls_the_tool


def config_text(
    tmp_path: Path,
    llm_url: str,
    tg: FakeTelegram,
    dc: FakeDiscord,
    telegram: str = "",
    discord: str = "",
) -> str:
    """Both channels on the fakes; `telegram` and `discord` are more lines for their sections."""
    return f"""
[llm]
base_url = "{llm_url}"
api_key = "sk-test"
model = "fake-model"

[storage]
path = "{tmp_path / "state.db"}"

[telegram]
enabled = true
token_env = "TG_TOKEN"
api_base_url = "{tg.base_url}"
allowed_users = ["1"]
{telegram}

[discord]
enabled = true
token_env = "DC_TOKEN"
api_base_url = "{dc.api_base_url}"
allowed_users = ["2"]
{discord}
"""


async def doctor(cfg: Path, tg_token: str, dc_token: str, *more: str) -> tuple[int, str]:
    env = {**os.environ, "TG_TOKEN": tg_token, "DC_TOKEN": dc_token}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "doctor",
        *more,
        "-c",
        str(cfg),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode()


async def test_doctor_reports_all_good_then_each_failure(tmp_path: Path, llm: FakeOpenAI) -> None:
    async with FakeTelegram() as tg, FakeDiscord() as dc:
        cfg = tmp_path / "config.toml"
        cfg.write_text(config_text(tmp_path, llm.base_url, tg, dc))

        code, out = await doctor(cfg, tg.token, dc.token)
        assert code == 0, out
        assert "llm: OK" in out and "telegram: OK" in out and "discord: OK" in out
        assert "store: OK" in out and "config: OK" in out and out.endswith("all good\n")
        assert "model fake-model calls tools" in out
        ping = llm.requests[-1]
        assert ping["model"] == "fake-model" and ping["tools"][0]["function"]["name"] == "ping"

        # Each check is its own: one run names every failure (one doctor process, not three).
        cfg.write_text(config_text(tmp_path, "http://127.0.0.1:9/v1", tg, dc))
        code, out = await doctor(cfg, "123:wrong", "wrong")
        assert code == 1
        assert "telegram: FAILED - the bot token was rejected" in out and "@BotFather" in out
        assert "123:wrong" not in out
        assert "discord: FAILED - the bot token was rejected" in out
        assert "llm: FAILED - cannot reach http://127.0.0.1:9/v1" in out
        assert "fix: is the server running?" in out  # the LLM's own fix, not a channel's

        cfg.write_text(
            config_text(tmp_path, llm.base_url, tg, dc).replace(
                'model = "fake-model"', 'model = "gpt-9"'
            )
        )
        code, out = await doctor(cfg, tg.token, dc.token)
        assert code == 1 and "model 'gpt-9' not offered" in out and "fake-model" in out


async def test_doctor_makes_a_real_request_with_a_tool(tmp_path: Path, llm: FakeOpenAI) -> None:
    async with FakeTelegram() as tg, FakeDiscord() as dc:
        cfg = tmp_path / "config.toml"
        cfg.write_text(config_text(tmp_path, llm.base_url, tg, dc))

        llm.api_key = "sk-the-right-one"  # the config has "sk-test"
        code, out = await doctor(cfg, tg.token, dc.token)
        assert code == 1 and f"llm: FAILED - {llm.base_url} rejected the API key" in out
        assert "fix: check the key" in out and "sk-test" not in out

        llm.api_key = None
        llm.script(error(400, "registry.ollama.ai/library/gemma:2b does not support tools"))
        code, out = await doctor(cfg, tg.token, dc.token)
        assert code == 1
        assert "llm: FAILED - model fake-model refused a request with a tool: " in out
        assert "does not support tools" in out and "fix: choose a model with tool" in out

        llm.script(text("pong"))  # answers, but ignores the tool
        code, out = await doctor(cfg, tg.token, dc.token)
        assert code == 0 and "llm: WARNING - model fake-model answered but did not call" in out
        assert out.endswith("all good, 1 warning(s)\n")


async def test_doctor_reports_config_plugins_and_users(tmp_path: Path, llm: FakeOpenAI) -> None:
    async with FakeTelegram() as tg, FakeDiscord() as dc:
        cfg = tmp_path / "config.toml"
        (tmp_path / "team_broken.py").write_text("raise RuntimeError('no database configured')\n")
        base = config_text(tmp_path, llm.base_url, tg, dc).replace('allowed_users = ["2"]', "")
        cfg.write_text(base + '[tools]\nbuiltins = []\nplugins = ["team_broken"]\n')
        lock = StoreLock(tmp_path / "state.db")  # as a running daemon holds it
        try:
            code, out = await doctor(cfg, tg.token, dc.token)
        finally:
            lock.release()
        assert code == 1
        assert "config: WARNING - discord.allowed_users is empty, so nobody can use" in out
        assert (
            "plugins: FAILED - plugin 'team_broken': RuntimeError: no database configured; " in out
        )
        assert f"fix: correct the plugin (raised at {tmp_path}/team_broken.py, line 1)" in out
        assert f"store: OK - {tmp_path}/state.db (schema v" in out
        assert f"in use by relaybot pid {os.getpid()}" in out
        assert "1 problem(s): plugins" in out

        cfg.write_text(base + '[tools]\nbuiltins = ["web_serch"]\n')
        code, out = await doctor(cfg, tg.token, dc.token)
        assert code == 1 and "config: FAILED - tools.builtins: unknown built-in tool" in out


async def test_doctor_quick_asks_no_service_and_still_finds_what_would_not_run(
    tmp_path: Path, llm: FakeOpenAI
) -> None:
    """`doctor --quick`, what `relaybot upgrade` asks of a new version once it is ready: no
    request to the model or a channel, yet a token not set and a plugin that does not load are
    each a FAILED line (the line the upgrade's rollback quotes), with status 1."""
    async with FakeTelegram() as tg, FakeDiscord() as dc:
        cfg = tmp_path / "config.toml"
        base = config_text(tmp_path, llm.base_url, tg, dc)
        cfg.write_text(base)
        asked = len(llm.requests)
        code, out = await doctor(cfg, tg.token, dc.token, "--quick")
        assert code == 0 and out.endswith("all good\n"), out
        assert "config: OK - valid" in out and f"store: OK - {tmp_path}/state.db" in out
        assert "llm:" not in out and "telegram:" not in out and "discord:" not in out
        assert (len(llm.requests), tg.calls, dc.calls) == (asked, [], [])

        # A token not set and a plugin that does not load: both named by one run.
        (tmp_path / "team_broken.py").write_text("raise RuntimeError('no database configured')\n")
        cfg.write_text(base + '[tools]\nbuiltins = []\nplugins = ["team_broken"]\n')
        code, out = await doctor(cfg, "", dc.token, "--quick")
        assert code == 1 and "config: FAILED - " in out and "TG_TOKEN" in out, out
        assert "plugins: FAILED - plugin 'team_broken': RuntimeError" in out, out
        assert (len(llm.requests), tg.calls, dc.calls) == (asked, [], [])


async def test_doctor_checks_each_model_in_its_providers_api(
    tmp_path: Path, llm: FakeOpenAI
) -> None:
    async with FakeTelegram() as tg, FakeDiscord() as dc, FakeAnthropic() as claude:
        claude.default = lambda body: tool_call(body["tools"][0]["name"], {})
        cfg = tmp_path / "config.toml"
        base = config_text(tmp_path, claude.base_url, tg, dc).replace(
            "[llm]", '[llm]\nprovider = "anthropic"'
        )
        fallback = f"""
[[llm.fallback]]
base_url = "{llm.base_url}"
api_key = "sk-old"
model = "fake-model"
"""
        cfg.write_text(base + fallback)
        llm.api_key = "sk-new"
        code, out = await doctor(cfg, tg.token, dc.token)
        assert code == 1
        assert f"llm: OK - {claude.base_url} answers; model fake-model calls tools" in out
        ping = claude.requests[-1]
        assert ping["tools"][0]["name"] == "ping" and ping["max_tokens"] > 0
        assert f"llm.fallback.0: FAILED - {llm.base_url} rejected the API key" in out
        assert "[[llm.fallback]] number 1 api_key" in out and "sk-old" not in out
        assert "1 problem(s): llm.fallback.0" in out

        llm.api_key = None
        claude.default = lambda body: text("pong")
        code, out = await doctor(cfg, tg.token, dc.token)
        assert code == 0 and "llm: WARNING - model fake-model answered but did not call" in out
        assert "llm.fallback.0: OK" in out


async def test_doctor_tells_slow_from_down(
    llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_doctor_llm, "PING_TIMEOUT_S", 0.5)
    endpoint = ModelEndpoint(base_url=llm.base_url, model="fake-model", max_retries=2)
    check = await _doctor_llm.check_llm("llm", endpoint)
    assert check.status is Status.OK
    assert llm.requests[-1]["max_tokens"] == _doctor_llm.PING_TOKENS  # capped: no rambling

    llm.script(hold(asyncio.Event(), text("never")))  # lists its models, never answers
    slow = await _doctor_llm.check_llm("llm", endpoint)
    assert slow.status is Status.WARNING and slow.detail.startswith("slow, not down: ")
    assert "request_timeout_s" in slow.fix

    gone = ModelEndpoint(base_url="http://127.0.0.1:9/v1", model="fake-model")
    down = await _doctor_llm.check_llm("llm", gone)
    assert down.status is Status.FAILED and "Connect call failed" in down.detail
    assert "is the server running?" in down.fix

    llm.script(error(500, "CUDA error: out of memory"))
    failing = await _doctor_llm.check_llm("llm", endpoint)
    assert failing.status is Status.FAILED and "(server error)" in failing.detail
    llm.script(error(400, "Jinja Exception: Conversation roles must alternate user/assistant/..."))
    template = await _doctor_llm.check_llm("llm", endpoint)
    assert template.status is Status.FAILED and "--jinja" in template.fix
