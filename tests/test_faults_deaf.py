"""The receiving side connected but deaf (issue 34), through the real daemon.

Telegram: getUpdates requests that stay open and never answer (the fake trickles keep-alive
spaces, which defeat the socket's read timeout) are abandoned by the poller's watchdog after the
long poll's timeout plus a margin and sent again; the messages sent meanwhile are answered once
each as soon as Telegram answers again; one log line says what happened, one that it works again.

Discord: a gateway connection that stays open but goes quiet (no heartbeat ACK, no event) is
closed by discord.py's own watchdog after `[discord] gateway_timeout_s` (relaybot sets its
`heartbeat_timeout`) and resumed; the messages said meanwhile come with the RESUME and are
answered once each; one line says the session resumed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from benchmarks._crash_rig import Daemon, Ledger, TokenModel, token, wait_for_log, write_files
from tests.fakes.discord_server import Call, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.test_faults_store import log_records

POLL_S = 2.0  # [telegram] poll_timeout_s: the watchdog gives up 10 s after that
WAIT_S = 40.0
CHATS = (6201, 6202, 6203)
GATEWAY_S = 3.0  # [discord] gateway_timeout_s
DMS = {6301: 6401, 6302: 6402}  # Discord DM channel → its user


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


def _names(call: Call, tok: str) -> bool:
    content = str((call.json or {}).get("content"))
    return content.startswith("answer:") and tok in content.split(" | ")[0].split()


async def test_a_quiet_discord_gateway_is_closed_and_resumed(tmp_path: Path) -> None:
    users = {user: f"user{user}" for user in DMS.values()}
    async with (
        FakeTelegram() as tg,
        FakeDiscord(users=users, heartbeat_interval_ms=500) as dc,
        FakeOpenAI(default=TokenModel()) as llm,
    ):
        discord = (
            f'\n[discord]\nenabled = true\ntoken = "{dc.token}"\n'
            f'api_base_url = "{dc.api_base_url}"\nallowed_users = ["*"]\n'
            f"gateway_timeout_s = {GATEWAY_S}\n"
        )
        files = write_files(tmp_path, tg, llm.base_url, extra=discord)
        daemon = Daemon(files, tg)

        async def answered(tok: str) -> None:
            await dc.wait_for_call(
                "POST", r"/channels/\d+/messages", lambda c: _names(c, tok), WAIT_S
            )

        try:
            await daemon.start()
            await dc.wait_for_shard(0, WAIT_S)
            first = token(1)
            await dc.inject_message(6301, DMS[6301], f"{first} hello")
            await answered(first)
            resumes = sum(1 for p in dc.gateway_ops if p["op"] == 6)
            dc.deafen()
            loop = asyncio.get_running_loop()
            deaf_at = loop.time()
            meanwhile = [token(2 + i) for i in range(len(DMS))]
            for (channel, user), tok in zip(DMS.items(), meanwhile, strict=True):
                await dc.inject_message(channel, user, f"{tok} anyone there?")
            await dc.wait_for_gateway_op(6, WAIT_S, after=len(dc.gateway_ops) - 1)  # RESUME
            resumed = loop.time() - deaf_at
            for tok in meanwhile:
                await answered(tok)
            assert await daemon.terminate() == 0, daemon.log_tail()
        finally:
            if daemon.running:
                daemon.kill_now()
                await daemon.wait_dead()
    posted = [c for c in dc.calls if c.method == "POST" and c.path.endswith("/messages")]
    for tok in [first, *meanwhile]:
        assert sum(_names(c, tok) for c in posted) == 1, tok
    assert sum(1 for p in dc.gateway_ops if p["op"] == 6) == resumes + 1
    records = log_records(files.log)
    # discord.py closes it by its heartbeat watchdog (a WARNING) or its read timeout (DEBUG
    # only), whichever looks first; relaybot's own line says the session resumed, once
    quiet = [r for r in records if "stopped responding to the gateway" in str(r["msg"])]
    assert len(quiet) <= 1, daemon.log_tail()
    resumed_lines = [r for r in records if "gateway session resumed" in str(r["msg"])]
    assert len(resumed_lines) == 1, daemon.log_tail()
    assert not [r for r in records if "exc" in r], daemon.log_tail()
    print(f"quiet gateway: resumed {resumed:.1f} s after it went quiet (timeout {GATEWAY_S:.0f} s)")
