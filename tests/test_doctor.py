"""`relaybot doctor` against fake servers: all good, a bad token, the LLM down."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram


def config_text(tmp_path: Path, llm_url: str, tg: FakeTelegram, dc: FakeDiscord) -> str:
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

[discord]
enabled = true
token_env = "DC_TOKEN"
api_base_url = "{dc.api_base_url}"
"""


async def doctor(cfg: Path, tg_token: str, dc_token: str) -> tuple[int, str]:
    env = {**os.environ, "TG_TOKEN": tg_token, "DC_TOKEN": dc_token}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "doctor",
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
        assert "store: OK" in out and "all good" in out

        code, out = await doctor(cfg, "123:wrong", dc.token)
        assert code == 1
        assert "telegram: FAILED - the bot token was rejected" in out and "@BotFather" in out
        assert "123:wrong" not in out

        code, out = await doctor(cfg, tg.token, "wrong")
        assert code == 1 and "discord: FAILED - the bot token was rejected" in out

        cfg.write_text(config_text(tmp_path, "http://127.0.0.1:9/v1", tg, dc))
        code, out = await doctor(cfg, tg.token, dc.token)
        assert code == 1 and "llm: FAILED - cannot reach http://127.0.0.1:9/v1" in out
        assert "fix:" in out

        cfg.write_text(
            config_text(tmp_path, llm.base_url, tg, dc).replace(
                'model = "fake-model"', 'model = "gpt-9"'
            )
        )
        code, out = await doctor(cfg, tg.token, dc.token)
        assert code == 1 and "model 'gpt-9' not offered" in out and "fake-model" in out
