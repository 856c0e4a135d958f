"""The disk under a SQLite store fills up right after an approval press (issue 34), through the
real daemon: `relaybot run` as a subprocess with its store on a small tmpfs, the fake Bot API,
the crash rig's scripted model. The store then refuses the next write of the approved action's
turn, wherever that falls:

- before the action starts (its start cannot be recorded): it surely did not run, so it runs
  once space returns;
- after it ran, before its result is recorded: its result is recorded once space returns, and
  the turn goes on from there;
- after its result is recorded, while the model answers: the turn is finished from the history.

Wanted in each case, without a restart: the action run exactly once, one answer naming it with
its result, no "may have run", the prompt ending "✅ Done", one log line saying why (no storm,
no traceback). Found by `soak.py --faults disk-full`: the retried turn found the confirmation
EXECUTING and did nothing, so the chat waited for a restart, which then reported "may have run".

Mounting a tmpfs needs root (CI runs as root); the tests are skipped, saying so, when refused.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from benchmarks import _faults as faults
from benchmarks._crash_rig import (
    UNCERTAIN,
    Daemon,
    Files,
    Kind,
    Ledger,
    TokenModel,
    token,
    wait_for_log,
    write_files,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.test_faults_store import STORE_REFUSED, log_records, small_fs

WAIT_S = 30.0
ASKER, HOLDER = 7001, 7002  # private chats: the chat id is the user's id
SHOWN = ("sendMessage", "editMessageText")  # the calls that put text in front of the user


@dataclass
class Rig:
    tg: FakeTelegram
    model: TokenModel
    ledger: Ledger
    files: Files
    daemon: Daemon
    store: Path
    lifted: float = 0.0  # loop time the ballast went
    _numbers: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def ballast(self) -> Path:
        return self.store.parent / "ballast"

    def say(self, chat: int, words: str) -> str:
        tok = token(next(self._numbers))
        self.tg.inject_message(chat, chat, f"{tok} {words}")
        return tok

    async def ask(self, words: str) -> tuple[str, int, str]:
        """A message asking for an action; its token, its prompt and the Confirm button."""
        tok = self.say(ASKER, words)
        await self.until(lambda: bool(self.ledger.of(Kind.PROMPT, ASKER)))
        prompt = self.ledger.of(Kind.PROMPT, ASKER)[0]
        return tok, prompt.message_id, next(d for d in prompt.buttons if d.endswith(":y"))

    async def press(self, prompt: int, button: str) -> None:
        self.tg.inject_callback(ASKER, ASKER, prompt, button)
        await self.tg.wait_for_call("answerCallbackQuery", status=200, timeout=WAIT_S)
        ((_, said),) = self.ledger.presses
        assert said.startswith("Confirmed"), said

    async def refused_then_space(self) -> None:
        """Once the daemon says the store refused a write, the ballast goes."""
        await wait_for_log(self.files.log, STORE_REFUSED, WAIT_S)
        self.ballast.unlink()
        self.lifted = asyncio.get_running_loop().time()

    async def until(self, condition: Callable[[], bool]) -> None:
        await self.ledger.expect(condition, WAIT_S, self.daemon.log_tail)

    def transcript(self) -> str:
        return self.ledger.transcript()

    async def assert_ran_once_and_answered(self, tok: str, said: str, prompt: int) -> None:
        """The action ran once, one answer names it with its result, the prompt says done,
        nobody was told it may have run, and the log says why once, without a traceback."""
        await self.until(lambda: bool(self.ledger.answers(tok)))
        assert await self.daemon.terminate() == 0, self.daemon.log_tail()
        assert len(self.daemon.lives) == 1, "the daemon must stay up"
        assert self.files.run_counts() == {tok: 1}, self.transcript()
        (answer,) = self.ledger.answers(tok)
        assert said in answer.text, self.transcript()
        assert self.tg.messages[(ASKER, prompt)]["text"].startswith("✅ Done"), self.transcript()
        shown = [c.params.get("text", "") for c in self.tg.calls if c.method in SHOWN]
        assert not [t for t in shown if UNCERTAIN.search(t)], self.transcript()
        records = log_records(self.files.log)
        why = [r for r in records if STORE_REFUSED in str(r["msg"])]
        assert len(why) == 1 and why[0]["level"] == "ERROR", why
        assert not [r for r in records if "exc" in r], "no traceback: " + self.daemon.log_tail()
        errors = [r["msg"] for r in records if r["level"] == "ERROR"]
        assert errors == [why[0]["msg"]], errors
        after = answer.accepted_at - self.lifted
        print(f"{said}: ran once, answered once {after:.1f} s after space returned, no restart")


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    with small_fs(tmp_path / "fs") as fs:
        model = TokenModel()
        async with FakeTelegram() as tg, FakeOpenAI(default=model) as llm:
            ledger = Ledger()
            tg.answer_listeners.append(ledger.see)
            store = fs / "relaybot.db"  # the config, the log and the tool's runs stay roomy
            files = write_files(tmp_path, tg, llm.base_url, store_path=store, max_parallel_tools=1)
            r = Rig(tg, model, ledger, files, Daemon(files, tg), store)
            try:
                await r.daemon.start()
                yield r
            finally:
                if r.daemon.running:
                    r.daemon.kill_now()
                    await r.daemon.wait_dead()


async def test_disk_full_before_the_approved_action_starts_it_runs_once_space_returns(
    rig: Rig,
) -> None:
    """Another chat's tool holds the only tool slot, so the approved action waits for it; the
    disk fills; the slot is let go and the action's start cannot be recorded: it never ran,
    and runs once when space returns."""
    held = rig.say(HOLDER, "please hold a slot")
    await rig.tg.wait_for_call(
        "sendMessage", lambda p: f"holding a slot for {held}" in p.get("text", ""), timeout=WAIT_S
    )
    tok, prompt, confirm = await rig.ask("please wipe")
    await rig.press(prompt, confirm)
    assert rig.files.run_counts() == {}  # waiting for the slot
    faults.fill(rig.ballast)
    rig.files.gate.touch()  # the slot is let go: both turns write into the full disk
    await rig.refused_then_space()
    await rig.until(lambda: bool(rig.ledger.answers(held)))
    await rig.assert_ran_once_and_answered(tok, f"wiped {tok}", prompt)


async def test_disk_full_after_the_approved_action_ran_its_result_is_recorded_later(
    rig: Rig,
) -> None:
    """The action runs, and the disk fills while it finishes (its last message on the way):
    its result cannot be recorded. Once space returns the result this process kept is
    recorded and the turn answered; the action is not run again, nor reported as may-have-run."""
    tok, prompt, confirm = await rig.ask("please shred")
    finishing = rig.tg.hold("sendMessage", lambda p: f"shredding {tok}" in p.get("text", ""))
    await rig.press(prompt, confirm)
    await finishing.arrived.wait()
    assert rig.files.run_counts() == {tok: 1}  # it ran
    faults.fill(rig.ballast)
    rig.tg.unhold(finishing)
    await rig.refused_then_space()
    await rig.assert_ran_once_and_answered(tok, f"shredded {tok}", prompt)


async def test_disk_full_as_the_model_answers_after_the_action_the_turn_is_finished(
    rig: Rig,
) -> None:
    """The action ran and its result is recorded; the disk fills while the model is asked for
    the answer, which cannot be recorded. Once space returns the turn is finished from the
    history, the action not run again."""
    tok, prompt, confirm = await rig.ask("please wipe")

    def fill_when_asked_after_the_result(body: dict[str, object]) -> None:
        messages = body.get("messages")
        if isinstance(messages, list) and any(m.get("role") == "tool" for m in messages):
            rig.model.on_request.clear()
            faults.fill(rig.ballast)

    rig.model.on_request.append(fill_when_asked_after_the_result)
    await rig.press(prompt, confirm)
    await rig.refused_then_space()
    await rig.assert_ran_once_and_answered(tok, f"wiped {tok}", prompt)
