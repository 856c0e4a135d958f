"""`relaybot doctor` on how updates reach an instance: Telegram's getWebhookInfo (pending updates,
the last delivery error) and the Discord shard layout against Discord's recommendation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.ports import free_port
from tests.test_doctor import calls_the_tool, config_text, doctor
from tests.test_telegram_webhook import SECRET, SECRET_ENV


async def test_doctor_shows_the_webhook_and_the_shard_layout(
    tmp_path: Path, llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    llm.default = calls_the_tool
    port = free_port()  # nothing listens there: Telegram's deliveries fail
    url = f"http://127.0.0.1:{port}/hook"
    async with FakeTelegram() as tg, FakeDiscord(shards=4) as dc:
        tg.webhook.retry_s = 60  # one failed attempt is enough
        tg.webhook.set({"url": url, "secret_token": SECRET})
        update = tg.inject_message(5, 5, "while nobody listens")
        await tg.webhook.wait_failed(update["update_id"])
        cfg = tmp_path / "config.toml"
        webhook = (
            f'mode = "webhook"\nwebhook_url = "{url}"\nwebhook_listen = "127.0.0.1:{port}"\n'
            f'webhook_secret_env = "{SECRET_ENV}"'
        )
        cfg.write_text(
            config_text(
                tmp_path,
                llm.base_url,
                tg,
                dc,
                telegram=webhook,
                discord="shard_count = 2\nshard_ids = [1]",
            )
        )
        code, out = await doctor(cfg, tg.token, dc.token)
        assert code == 0, out  # warnings only
        lines = out.splitlines()
        webhook_line = (
            rf"telegram receiving: WARNING - webhook {re.escape(url)}; 1 update\(s\) pending; "
            rf"last delivery error \d+ s ago: Connection refused; relaybot listens on "
            rf"127\.0\.0\.1:{port}"
        )
        assert any(re.fullmatch(webhook_line, line) for line in lines), out
        assert f"  fix: Telegram cannot deliver: check that the proxy forwards {url}" in out
        assert (
            "discord shards: WARNING - shard(s) 1 of 2 in this instance (1 to other instances, "
            "taken over while theirs is down); Discord recommends 4"
        ) in lines, out
        assert "  fix: set shard_count = 4 (or more) on every instance" in out
        assert SECRET not in out

        # Polling, with a webhook still set; shards as many as Discord recommends.
        cfg.write_text(config_text(tmp_path, llm.base_url, tg, dc, discord="shard_count = 4"))
        code, out = await doctor(cfg, tg.token, dc.token)
        assert code == 0, out
        assert (
            f"telegram receiving: WARNING - a webhook is set ({url}; 1 update(s) pending); `run` "
            "in polling mode deletes it"
        ) in out.splitlines(), out
        assert "discord shards: OK - all 4 shard(s) in this instance; Discord recommends 4" in out

        # Webhook mode without its secret in the environment.
        monkeypatch.delenv(SECRET_ENV)
        cfg.write_text(config_text(tmp_path, llm.base_url, tg, dc, telegram=webhook))
        code, out = await doctor(cfg, tg.token, dc.token)
        assert code == 1, out
        assert (
            f"telegram receiving: FAILED - telegram.webhook_secret_env: the environment variable "
            f"{SECRET_ENV} is not set"
        ) in out.splitlines(), out
