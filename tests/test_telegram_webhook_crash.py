"""Webhook mode through the real daemon: `relaybot run` as a subprocess (benchmarks/_crash_rig.py)
receiving the fake Bot API's POSTs, SIGKILLed the moment Telegram has read its 200.

An update answered 200 is one Telegram will never send again, so it must already be in the
inbox: the test looks at the SQLite file at that moment, kills the daemon, restarts it and
holds it to exactly one answer. The model is held until the restart, so nothing is answered
before the kill.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks._crash_rig import Daemon, Ledger, TokenModel, db_contains, token, write_files
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.ports import free_port
from tests.test_telegram_webhook import PATH, SECRET, SECRET_ENV

CHAT = 6001
WAIT_S = 20


async def test_an_update_answered_200_is_answered_after_a_kill_right_then(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)  # the daemon inherits the environment
    port = free_port()
    model = TokenModel()
    async with FakeTelegram() as tg, FakeOpenAI(default=model) as llm:
        tg.webhook.retry_s = 0.05
        ledger = Ledger()
        tg.answer_listeners.append(ledger.see)
        files = write_files(
            tmp_path,
            tg,
            llm.base_url,
            telegram={
                "mode": "webhook",
                "webhook_url": f"http://127.0.0.1:{port}{PATH}",
                "webhook_listen": f"127.0.0.1:{port}",
                "webhook_secret_env": SECRET_ENV,
            },
        )
        daemon = Daemon(files, tg, ready="setWebhook")
        try:
            await daemon.start()
            model.gate.clear()  # no answer before the kill
            tok = token(1)
            stored_at_200: list[bool] = []

            def kill_after_200(update: dict[str, Any], status: int | None) -> None:
                if status == 200 and tok in update["message"]["text"]:
                    daemon.kill_now()  # SIGKILL first: the daemon runs no further
                    stored_at_200.append(db_contains(files.db, tok))

            tg.webhook.answer_listeners.append(kill_after_200)
            update = tg.inject_message(CHAT, CHAT, f"{tok} hello")
            await daemon.wait_dead()
            assert stored_at_200 == [True], daemon.log_tail()
            assert ledger.deliveries == []
            tg.webhook.answer_listeners.remove(kill_after_200)

            model.gate.set()
            await daemon.start()
            await ledger.wait_until(lambda: ledger.answered([tok]), WAIT_S)
            assert await daemon.terminate() == 0, daemon.log_tail()
        finally:
            if daemon.running:
                daemon.kill_now()
                await daemon.wait_dead()
    assert [d.text for d in ledger.answers(tok)] == [f"answer: {tok}"]
    posts = [d for d in tg.webhook.deliveries if d.update_id == update["update_id"]]
    assert [d.status for d in posts] == [200]  # Telegram had no reason to send it again
    assert len(tg.calls_of("setWebhook")) == 2  # each start sets it; no stop deleted it
    assert tg.calls_of("deleteWebhook") == []
