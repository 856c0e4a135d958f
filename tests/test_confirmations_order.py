"""A button press and a new message in the same getUpdates batch (found by the fault soak),
through the real daemon: `relaybot run` as a subprocess, the real Telegram adapter against the
fake Bot API, the crash rig's scripted model.

The press is answered outside the chat's queue, the message's turn inside it; they must not
interleave so that the new message's turn starts while the approved call still waits for its
result (the model then read "No result was recorded for this call", the action's result was
recorded after a later user message, and every later request logged the repaired history as an
ERROR). Wanted, in either order: the press either comes first (the action runs once, its turn
is answered, then the message's) or finds the confirmation cancelled by the message (nothing
runs); every request the model gets pairs each tool call with its result; no ERROR in the log.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from benchmarks._crash_rig import Daemon, Files, Kind, Ledger, TokenModel, token, write_files
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import Call, FakeTelegram
from tests.test_faults_store import log_records

WAIT_S = 20.0
CHAT = 8001  # a private chat: the chat id is the user's id
NO_RESULT = "No result was recorded"


@dataclass
class Rig:
    tg: FakeTelegram
    model: TokenModel
    ledger: Ledger
    files: Files
    daemon: Daemon
    requests: list[dict[str, Any]] = field(default_factory=list)
    batches: list[list[int]] = field(default_factory=list)  # update ids per getUpdates answer
    _numbers: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def message(self, words: str) -> tuple[str, int]:
        tok = token(next(self._numbers))
        update = self.tg.inject_message(CHAT, CHAT, f"{tok} {words}")
        return tok, int(update["update_id"])

    def see_batch(self, call: Call, result: Any) -> None:
        if call.method == "getUpdates" and result:
            self.batches.append([int(u["update_id"]) for u in result])

    async def until(self, condition: Callable[[], bool]) -> None:
        await self.ledger.expect(condition, WAIT_S, self.daemon.log_tail)

    def transcript(self) -> str:
        return self.ledger.transcript()


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    model = TokenModel()
    async with FakeTelegram() as tg, FakeOpenAI(default=model) as llm:
        ledger = Ledger()
        tg.answer_listeners.append(ledger.see)
        files = write_files(tmp_path, tg, llm.base_url)
        r = Rig(tg, model, ledger, files, Daemon(files, tg))
        tg.answer_listeners.append(r.see_batch)
        model.on_request.append(r.requests.append)
        try:
            await r.daemon.start()
            yield r
        finally:
            if r.daemon.running:
                r.daemon.kill_now()
                await r.daemon.wait_dead()


def unpaired(body: dict[str, Any]) -> list[str]:
    """What breaks the tool-call pairing in a request: a call not followed by its result before
    the next other message, a result of no open call, a repaired ("no result") call."""
    wrong, open_ = [], set[str]()
    for msg in body.get("messages") or ():
        if msg.get("role") == "tool":
            if msg.get("tool_call_id") not in open_:
                wrong.append(f"result of no open call: {msg.get('tool_call_id')}")
            open_.discard(msg.get("tool_call_id"))
            if NO_RESULT in str(msg.get("content")):
                wrong.append(f"repaired: {msg.get('tool_call_id')}")
            continue
        if open_:
            wrong.append(f"calls without results before a {msg.get('role')} message: {open_}")
            open_ = set()
        open_ |= {c["id"] for c in msg.get("tool_calls") or ()}
    return wrong


@pytest.mark.parametrize(
    "press_first", [False, True], ids=["message-then-press", "press-then-message"]
)
async def test_a_press_and_a_message_in_one_batch_keep_the_history_paired(
    rig: Rig, press_first: bool
) -> None:
    wanted, _ = rig.message("please wipe")
    await rig.until(lambda: bool(rig.ledger.of(Kind.PROMPT, CHAT)))
    prompt = rig.ledger.of(Kind.PROMPT, CHAT)[0]
    confirm = next(d for d in prompt.buttons if d.endswith(":y"))

    # One batch: both are queued before the long poll that is waiting can answer.
    if press_first:
        press = int(rig.tg.inject_callback(CHAT, CHAT, prompt.message_id, confirm)["update_id"])
        later, message = rig.message("hello again")
    else:
        later, message = rig.message("hello again")
        press = int(rig.tg.inject_callback(CHAT, CHAT, prompt.message_id, confirm)["update_id"])
    await rig.until(lambda: bool(rig.ledger.presses) and bool(rig.ledger.answers(later)))
    assert await rig.daemon.terminate() == 0, rig.daemon.log_tail()

    assert any({press, message} <= set(b) for b in rig.batches), rig.batches
    ((_, said),) = rig.ledger.presses
    runs = rig.files.run_counts()
    if said.startswith("Confirmed"):  # the press came first: the action ran, then the message
        assert runs == {wanted: 1}, rig.transcript()
        (done,) = rig.ledger.answers(wanted)
        assert f"wiped {wanted}" in done.text, rig.transcript()
        assert done.accepted_at < rig.ledger.answers(later)[0].accepted_at, rig.transcript()
    else:  # the message came first and cancelled it: nothing ran, the press says so
        assert said.startswith("Already decided"), said
        assert runs == {}, rig.transcript()
    assert len(rig.ledger.answers(later)) == 1, rig.transcript()
    broken = {i: w for i, body in enumerate(rig.requests) if (w := unpaired(body))}
    assert not broken, f"{broken}\n{rig.transcript()}"
    errors = [r["msg"] for r in log_records(rig.files.log) if r["level"] == "ERROR"]
    assert errors == [], errors
    print(f"{'press' if press_first else 'message'} first in one batch: press said {said!r}")
