"""The model endpoint hangs without answering (issue 34), through the real daemon: a request
that never gets an answer is bounded by `[llm] request_timeout_s`; the chat it was for is told
the model could not be reached, once, and answers its next message; the other chats are not
held up meanwhile; one log line says why, no traceback.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from benchmarks._crash_rig import Daemon, Kind, Ledger, decide, token, write_files
from benchmarks._faults import Hang
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.fakes.telegram_server import FakeTelegram
from tests.test_faults_store import log_records

TIMEOUT_S = 2.0
WAIT_S = 30.0
STUCK, OTHERS = 6101, (6102, 6103, 6104)


async def test_a_hanging_model_request_is_bounded_and_holds_up_no_other_chat(
    tmp_path: Path,
) -> None:
    async def model(body: dict[str, Any]) -> Reply:
        return decide(body).reply

    # once: the next request of that chat carries the message again
    hang = Hang(model, lambda body: "hang" in str(body["messages"][-1].get("content")), times=1)
    async with FakeTelegram() as tg, FakeOpenAI(default=hang) as llm:
        ledger = Ledger()
        tg.answer_listeners.append(ledger.see)
        files = write_files(tmp_path, tg, llm.base_url, llm_timeout_s=TIMEOUT_S)
        daemon = Daemon(files, tg)
        try:
            await daemon.start()
            loop = asyncio.get_running_loop()
            asked = loop.time()
            tg.inject_message(STUCK, STUCK, f"{token(1)} please hang")
            await llm.wait_requests(1, timeout=WAIT_S)
            others = [token(2 + i) for i in range(len(OTHERS))]
            for chat, tok in zip(OTHERS, others, strict=True):
                tg.inject_message(chat, chat, f"{tok} hello")
            await ledger.wait_until(lambda: ledger.answered(others), WAIT_S)
            assert not ledger.of(Kind.APOLOGY), "the other chats did not wait for the stuck one"
            await ledger.wait_until(lambda: bool(ledger.of(Kind.APOLOGY, STUCK)), WAIT_S)
            bounded = loop.time() - asked
            after = token(9)
            tg.inject_message(STUCK, STUCK, f"{after} hello again")
            await ledger.wait_until(lambda: ledger.answered([after]), WAIT_S)
            assert await daemon.terminate() == 0, daemon.log_tail()
        finally:
            hang.release()
            if daemon.running:
                daemon.kill_now()
                await daemon.wait_dead()
    assert len(ledger.of(Kind.APOLOGY, STUCK)) == 1
    assert all(len(ledger.answers(t)) == 1 for t in [*others, after])
    assert TIMEOUT_S <= bounded < TIMEOUT_S + 5, f"{bounded:.1f} s for a {TIMEOUT_S} s timeout"
    records = log_records(files.log)
    why = [r for r in records if "LLM request failed" in str(r["msg"])]
    assert len(why) == 1 and "telegram:6101" in str(why[0]["msg"]), why
    assert not [r for r in records if "exc" in r], daemon.log_tail()
    print(f"model hanging: apology after {bounded:.1f} s (timeout {TIMEOUT_S} s), 3 chats unheld")
