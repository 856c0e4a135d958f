"""The receiving side connected but deaf (issue 34), through the real daemon.

Telegram: getUpdates requests that stay open and never answer (the fake trickles keep-alive
spaces, which defeat the socket's read timeout) are abandoned by the poller's watchdog after the
long poll's timeout plus a margin and sent again; the messages sent meanwhile are answered once
each as soon as Telegram answers again; one log line says what happened, one that it works again.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from benchmarks._crash_rig import Daemon, Ledger, TokenModel, token, wait_for_log, write_files
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.test_faults_store import log_records

POLL_S = 2.0  # [telegram] poll_timeout_s: the watchdog gives up 10 s after that
WAIT_S = 40.0
CHATS = (6201, 6202, 6203)


async def test_a_long_poll_that_never_answers_is_abandoned_and_sent_again(
    tmp_path: Path,
) -> None:
    async with FakeTelegram() as tg, FakeOpenAI(default=TokenModel()) as llm:
        ledger = Ledger()
        tg.answer_listeners.append(ledger.see)
        files = write_files(tmp_path, tg, llm.base_url, poll_timeout_s=POLL_S)
        daemon = Daemon(files, tg)
        try:
            await daemon.start()
            first = token(1)
            tg.inject_message(CHATS[0], CHATS[0], f"{first} hello")
            await ledger.wait_until(lambda: ledger.answered([first]), WAIT_S)
            tg.deaf_polls = True
            polls = len(tg.calls_of("getUpdates"))
            await tg.wait_for_call("getUpdates", count=polls + 1, timeout=WAIT_S)  # a deaf one
            loop = asyncio.get_running_loop()
            deaf_at = loop.time()
            meanwhile = [token(2 + i) for i in range(len(CHATS))]
            for chat, tok in zip(CHATS, meanwhile, strict=True):
                tg.inject_message(chat, chat, f"{tok} anyone there?")
            # abandoned and sent again (and again: still deaf), reported once
            await tg.wait_for_call("getUpdates", count=polls + 3, timeout=3 * WAIT_S)
            abandoned = loop.time() - deaf_at
            tg.deaf_polls = False
            await ledger.wait_until(lambda: ledger.answered(meanwhile), WAIT_S)
            await wait_for_log(files.log, "polling works again", WAIT_S)
            assert await daemon.terminate() == 0, daemon.log_tail()
        finally:
            if daemon.running:
                daemon.kill_now()
                await daemon.wait_dead()
    assert all(len(ledger.answers(t)) == 1 for t in [first, *meanwhile])
    records = log_records(files.log)
    deaf = [r for r in records if "got no answer within" in str(r["msg"])]
    assert len(deaf) == 1, deaf  # one line for the episode, not one per abandoned request
    assert not [r for r in records if "unreachable" in str(r["msg"])], daemon.log_tail()
    assert not [r for r in records if "exc" in r], daemon.log_tail()
    print(f"deaf long poll: two abandoned after {abandoned:.1f} s (poll {POLL_S:.0f} s)")
