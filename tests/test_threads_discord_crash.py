"""Crash recovery in a Discord thread (issue 33): `relaybot run` as a subprocess against the fake
Discord (and an idle fake Bot API, which the rig's daemon polls), killed with SIGKILL while the
model works on a message written in a thread, then restarted. A thread's chat id is the thread's
own channel id, so what the restart finishes lands in the thread, once, and nothing goes to the
channel it was started in. Synchronisation is on recorded calls, never on sleeps."""

from __future__ import annotations

import re
from pathlib import Path

from benchmarks._crash_rig import Daemon, TokenModel, token, write_files
from tests.fakes.discord_server import Call, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

GUILD, CHANNEL = 1001, 2001
ALICE = 4001
WAIT_S = 30.0


def answers(tok: str) -> object:
    return lambda c: f"answer: {tok}" in str((c.json or {}).get("content"))


async def test_a_turn_cut_off_in_a_thread_is_answered_in_that_thread(tmp_path: Path) -> None:
    model = TokenModel()
    async with (
        FakeTelegram() as tg,
        FakeDiscord(users={ALICE: "Alice"}) as dc,
        FakeOpenAI(default=model) as llm,
    ):
        discord = (
            f'\n[discord]\nenabled = true\ntoken = "{dc.token}"\n'
            f'api_base_url = "{dc.api_base_url}"\nallowed_users = ["*"]\n'
            'respond_in_guilds = "all"\n'
        )
        daemon = Daemon(write_files(tmp_path, tg, llm.base_url, extra=discord), tg)
        try:
            await daemon.start()
            await dc.wait_for_gateway_op(2, timeout=WAIT_S)  # identified
            thread = await dc.create_thread(CHANNEL, GUILD, "side talk", ALICE)
            model.gate.clear()  # the model holds its answer: the turn is cut off mid-way
            first = token(1)
            await dc.inject_message(thread, ALICE, f"{first} in the thread", GUILD)
            await llm.wait_requests(1, timeout=WAIT_S)
            daemon.kill_now()
            await daemon.wait_dead()
            model.gate.set()
            await daemon.start()
            answer: Call = await dc.wait_for_call(
                "POST", rf"/channels/{thread}/messages", answers(first), timeout=WAIT_S
            )
            assert await daemon.terminate() == 0, daemon.log_tail()
        finally:
            daemon.kill_now()
    assert re.fullmatch(rf"/channels/{thread}/messages", answer.path)
    in_thread = [
        c for c in dc.calls_to("POST", rf"/channels/{thread}/messages") if answers(first)(c)
    ]
    assert len(in_thread) == 1  # once
    assert dc.calls_to("POST", rf"/channels/{CHANNEL}/messages") == []  # not in the channel
