"""Crash recovery through the real daemon (issue 11): `relaybot run` as a subprocess against the
fake Bot API and the fake model, killed with SIGKILL at the moments the issue names, restarted,
and held to exactly one delivery per answer, none lost, in order.

The rig (benchmarks/_crash_rig.py) makes the mapping from message to answer exact: each message
carries a token and the scripted model's answer names the tokens of the messages it answers.
Synchronisation is on the fakes' recorded calls and on the SQLite file, never on sleeps; each
test ends with SIGTERM, which lets running turns finish, so every send the daemon would make is
counted before the assertions.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from benchmarks._crash_rig import (
    UNCERTAIN,
    Daemon,
    Files,
    Kind,
    Ledger,
    TokenModel,
    decide,
    token,
    wait_for_db,
    write_files,
)
from tests.fakes.openai_server import FakeOpenAI, TextReply, ToolCallsReply
from tests.fakes.telegram_server import FakeTelegram, SendFaults

CHATS = tuple(range(5001, 5031))  # private chats: the chat id is the user's id
LAST = 5999  # a chat that recovery, which goes through the chats in order, comes to last
WAIT_S = 10
SHOWN = ("sendMessage", "editMessageText")  # the calls that put text in front of the user


@dataclass
class Rig:
    tmp: Path
    tg: FakeTelegram
    llm: FakeOpenAI
    model: TokenModel
    ledger: Ledger
    files: Files
    daemon: Daemon
    said: dict[int, list[str]] = field(default_factory=dict)  # chat → tokens, in order
    _numbers: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def configure(self, *, max_parallel_tools: int) -> None:
        self.files = write_files(
            self.tmp, self.tg, self.llm.base_url, max_parallel_tools=max_parallel_tools
        )
        self.daemon = Daemon(self.files, self.tg)

    def say(self, chat: int, words: str = "hello") -> str:
        tok = token(next(self._numbers))
        self.tg.inject_message(chat, chat, f"{tok} {words}")
        self.said.setdefault(chat, []).append(tok)
        return tok

    async def in_flight(self, chats: tuple[int, ...]) -> None:
        """A message in each chat, and every turn waiting for the model."""
        self.model.gate.clear()
        before = len(self.llm.requests)
        for chat in chats:
            self.say(chat)
        await self.llm.wait_requests(before + len(chats), timeout=WAIT_S)

    async def kill(self) -> None:
        self.daemon.kill_now()
        await self.daemon.wait_dead()

    async def finish(self) -> None:
        """Wait until the last message of every chat is answered (answers come in order, so the
        earlier ones are answered by then, or lost), then stop the daemon: SIGTERM lets queued
        work finish, so from here on every send it would make is in the ledger."""
        last = [tokens[-1] for tokens in self.said.values()]
        await self.wait_until(lambda: self.ledger.answered(last))
        assert await self.daemon.terminate() == 0, self.daemon.log_tail()

    async def wait_until(self, condition: Callable[[], bool]) -> None:
        await self.ledger.expect(condition, WAIT_S, self.daemon.log_tail)

    def assert_each_answered_once(self) -> None:
        tokens = [t for chat in self.said.values() for t in chat]
        counts = {t: len(self.ledger.answers(t)) for t in tokens}
        wrong = {t: n for t, n in counts.items() if n != 1}
        chats = {c for c, toks in self.said.items() if wrong.keys() & set(toks)}
        assert not wrong, f"answers per message (want 1): {wrong}\n{self.transcript(chats)}"

    def assert_in_order(self) -> None:
        for chat, tokens in self.said.items():
            firsts = [self.ledger.answers(t)[0].accepted_at for t in tokens]
            assert firsts == sorted(firsts), f"out of order\n{self.transcript({chat})}"

    def transcript(self, chats: set[int] | None = None) -> str:
        return self.ledger.transcript(chats)


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    async with FakeTelegram() as tg:
        model = TokenModel()
        async with FakeOpenAI(default=model) as llm:
            ledger = Ledger()
            tg.answer_listeners.append(ledger.see)
            files = write_files(tmp_path, tg, llm.base_url)
            r = Rig(tmp_path, tg, llm, model, ledger, files, Daemon(files, tg))
            try:
                yield r
            finally:
                if r.daemon.running:
                    await r.kill()


def to(chat: int) -> Callable[[dict[str, object]], bool]:
    return lambda params: params.get("chat_id") == chat


def test_the_scripted_model_names_every_message_it_answers() -> None:
    """The rig's own mapping: folded messages are named together, answered ones are not named
    again, and a message asking for an action gets the tool call once."""
    history = [
        {"role": "user", "content": "q000001 hello"},
        {"role": "assistant", "content": "answer: q000001"},
        {"role": "user", "content": "q000002 hello"},
        {"role": "user", "content": "q000003 please wipe"},
    ]
    tools = [{"type": "function", "function": {"name": "wipe"}}]
    first = decide({"messages": history, "tools": tools})
    assert isinstance(first.reply, ToolCallsReply)
    assert first.reply.calls[0].name == "wipe" and "q000003" in first.reply.calls[0].arguments
    call = {"id": "c1", "type": "function", "function": {"name": "wipe", "arguments": "q000003"}}
    history += [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "wiped q000003"},
    ]
    then = decide({"messages": history, "tools": tools})
    assert isinstance(then.reply, TextReply)
    assert then.tokens == ("q000002", "q000003")
    assert then.reply.content == "answer: q000002 q000003 | wiped q000003"


async def test_without_a_kill_each_message_is_answered_once(rig: Rig) -> None:
    """The control: the instruments count one answer per message when nothing goes wrong."""
    await rig.daemon.start()
    for chat in CHATS[:4] * 2:
        rig.say(chat)
    await rig.finish()
    rig.assert_each_answered_once()
    rig.assert_in_order()


async def test_turns_in_flight_killed_then_new_messages_while_down(rig: Rig) -> None:
    """Issue 11, first sequence: a turn in flight in several chats, SIGKILL, a new message in
    each chat while the daemon is down (Telegram hands them over in the first batch), restart."""
    await rig.daemon.start()
    await rig.in_flight(CHATS)
    await rig.kill()
    for chat in CHATS:
        rig.say(chat)
    rig.model.gate.set()
    await rig.daemon.start()
    await rig.finish()
    rig.assert_each_answered_once()
    rig.assert_in_order()


async def test_answer_stored_while_its_send_fails_is_delivered_once_after_a_kill(rig: Rig) -> None:
    """Issue 11, second sequence: the answer is stored but Telegram answers 502 to its send, so
    the bot waits to retry; SIGKILL; a new message while down; restart. The stored answer is
    delivered exactly once, before the new message's answer, which is delivered once. Turns in
    flight in other chats are what a busy bot has at a crash; they are answered once too."""
    await rig.daemon.start()
    rig.tg.send_faults = SendFaults(1.0, statuses=(502,))
    first = rig.say(LAST)
    await rig.tg.wait_for_call("sendMessage", status=502, timeout=WAIT_S)
    await wait_for_db(rig.files.db, f"answer: {first}", WAIT_S)  # stored, not delivered
    await rig.in_flight(CHATS)
    await rig.kill()
    rig.tg.send_faults = None
    rig.say(LAST)
    rig.model.gate.set()
    await rig.daemon.start()
    await rig.finish()
    rig.assert_each_answered_once()
    rig.assert_in_order()


async def test_action_approved_but_not_started_at_the_kill_runs_once_after_restart(
    rig: Rig,
) -> None:
    """Issue 11, third sequence: the press is committed, the action has not started, SIGKILL.
    The store knows it never started, so after the restart it runs exactly once and the chat is
    told; never a second run, never "may or may not have completed".

    The daemon runs one tool at a time (`engine.max_parallel_tools = 1`) and another chat's tool
    holds that slot, so the resumed turn waits for a slot when the daemon dies: the engine must
    record that an action started when the tool starts, not when the turn resumes."""
    holder, asker = CHATS[0], CHATS[1]
    rig.configure(max_parallel_tools=1)
    await rig.daemon.start()
    held = rig.say(holder, "please hold a slot")
    await rig.tg.wait_for_call(
        "sendMessage", lambda p: f"holding a slot for {held}" in p.get("text", ""), timeout=WAIT_S
    )
    wanted = rig.say(asker, "please wipe")
    await rig.wait_until(lambda: bool(rig.ledger.of(Kind.PROMPT, asker)))
    prompt = rig.ledger.of(Kind.PROMPT, asker)[0]
    confirm = next(data for data in prompt.buttons if data.endswith(":y"))
    typing = len([c for c in rig.tg.calls_of("sendChatAction") if to(asker)(c.params)])
    rig.tg.inject_callback(asker, asker, prompt.message_id, confirm)
    await rig.tg.wait_for_call("answerCallbackQuery", status=200, timeout=WAIT_S)
    ((_, said),) = rig.ledger.presses
    assert said.startswith("Confirmed"), said  # the approval is committed...
    # ...and the resumed turn is running (it shows typing) but waits for the tool slot
    await rig.tg.wait_for_call("sendChatAction", to(asker), count=typing + 1, timeout=WAIT_S)
    assert rig.files.run_counts() == {}  # the action has not started
    await rig.kill()
    rig.files.gate.touch()  # the slot holder lets go if it is run again
    restarted = rig.daemon.lives[-1].ended or 0.0
    await rig.daemon.start()

    def settled() -> bool:
        told = any(
            wanted in d.tokens and d.accepted_at > restarted
            for d in rig.ledger.deliveries
            if d.chat == asker
        )
        return told and rig.ledger.answered([held])

    await rig.wait_until(settled)
    assert await rig.daemon.terminate() == 0, rig.daemon.log_tail()
    shown = [c.params.get("text", "") for c in rig.tg.calls if c.method in SHOWN]
    assert not [t for t in shown if UNCERTAIN.search(t)], rig.transcript()
    assert rig.files.run_counts() == {wanted: 1}, rig.transcript()
    told = rig.ledger.answers(wanted)
    assert len(told) == 1 and f"wiped {wanted}" in told[0].text, rig.transcript()
    assert len(rig.ledger.answers(held)) == 1, rig.transcript()


async def test_killed_after_an_approved_action_ran_before_its_answer(rig: Rig) -> None:
    """The approved action ran to the end (its result is stored), and the daemon dies while the
    model is asked for the answer (found by `soak.py --faults oom`: memory pressure slows that
    moment down). The prompt answered the message, so no inbox row is left to finish: after
    the restart the turn is finished from the history all the same, its message answered once
    with the action's result, the action not run again."""
    asker = CHATS[0]
    await rig.daemon.start()
    wanted = rig.say(asker, "please wipe")
    await rig.wait_until(lambda: bool(rig.ledger.of(Kind.PROMPT, asker)))
    prompt = rig.ledger.of(Kind.PROMPT, asker)[0]
    confirm = next(data for data in prompt.buttons if data.endswith(":y"))

    def kill_when_asked_after_the_result(body: dict[str, object]) -> None:
        messages = body.get("messages")
        if isinstance(messages, list) and any(m.get("role") == "tool" for m in messages):
            rig.daemon.kill_now()

    rig.model.on_request.append(kill_when_asked_after_the_result)
    rig.tg.inject_callback(asker, asker, prompt.message_id, confirm)
    await rig.daemon.wait_dead()
    rig.model.on_request.clear()
    assert rig.files.run_counts() == {wanted: 1}, "it ran before the kill"
    await rig.daemon.start()
    await rig.finish()
    rig.assert_each_answered_once()
    assert rig.files.run_counts() == {wanted: 1}, rig.transcript()
    assert f"wiped {wanted}" in rig.ledger.answers(wanted)[0].text, rig.transcript()


async def test_killed_again_before_an_action_cut_off_by_the_first_kill_is_settled(rig: Rig) -> None:
    """An approved action is cut off by a SIGKILL while it runs; the restart records it as
    interrupted and says so in the chat, and a second SIGKILL comes before the turn has gone on
    (found by the soak: the message was never answered, the chat silent until its user wrote
    again). After the next start the turn goes on by itself: the message is answered once, the
    model told the action may have run, the action not run again."""
    asker = CHATS[0]
    await rig.daemon.start()
    wanted = rig.say(asker, "please shred")
    await rig.wait_until(lambda: bool(rig.ledger.of(Kind.PROMPT, asker)))
    prompt = rig.ledger.of(Kind.PROMPT, asker)[0]
    confirm = next(data for data in prompt.buttons if data.endswith(":y"))
    running = rig.tg.hold("sendMessage", lambda p: f"shredding {wanted}" in p.get("text", ""))
    rig.tg.inject_callback(asker, asker, prompt.message_id, confirm)
    async with asyncio.timeout(WAIT_S):
        await running.arrived.wait()  # the action has run its course, its result not recorded
    await rig.kill()
    rig.tg.unhold(running, deliver=False)
    assert rig.files.run_counts() == {wanted: 1}
    told = rig.tg.hold("sendMessage", lambda p: "restarted while running" in p.get("text", ""))
    await rig.daemon.start()
    async with asyncio.timeout(WAIT_S):
        await told.arrived.wait()  # recorded as interrupted; the turn goes on after this notice
    await rig.kill()
    rig.tg.unhold(told, deliver=False)
    await rig.daemon.start()
    await rig.finish()
    rig.assert_each_answered_once()
    assert rig.files.run_counts() == {wanted: 1}, rig.transcript()
    assert "interrupted" in rig.ledger.answers(wanted)[0].text, rig.transcript()


async def test_killed_again_before_the_answer_after_an_action_cut_off_by_the_first_kill(
    rig: Rig,
) -> None:
    """The approved action ran and its result is stored, the turn went on to another tool, and
    the daemon dies while the model is asked for the answer; the restart records the action as
    cut off and says so in the chat, and a second SIGKILL comes before the turn is finished
    from the history (found by the soak). After the next start the turn is finished by itself:
    both messages answered once, with both results, the action not run again."""
    asker = CHATS[0]
    rig.files.gate.touch()  # hold_slot returns at once
    wanted, then = rig.say(asker, "please wipe"), rig.say(asker, "please hold")  # one turn
    await rig.daemon.start()
    await rig.wait_until(lambda: bool(rig.ledger.of(Kind.PROMPT, asker)))
    prompt = rig.ledger.of(Kind.PROMPT, asker)[0]
    confirm = next(data for data in prompt.buttons if data.endswith(":y"))

    def kill_when_asked_after_both_results(body: dict[str, object]) -> None:
        messages = body.get("messages")
        if isinstance(messages, list) and any(
            m.get("role") == "tool" and "held a slot" in str(m.get("content")) for m in messages
        ):
            rig.daemon.kill_now()

    rig.model.on_request.append(kill_when_asked_after_both_results)
    rig.tg.inject_callback(asker, asker, prompt.message_id, confirm)
    await rig.daemon.wait_dead()
    rig.model.on_request.clear()
    assert rig.files.run_counts() == {wanted: 1}, "it ran before the kill"
    told = rig.tg.hold("sendMessage", lambda p: "restarted while running" in p.get("text", ""))
    await rig.daemon.start()
    async with asyncio.timeout(WAIT_S):
        await told.arrived.wait()  # recorded as cut off; the turn is finished after this notice
    await rig.kill()
    rig.tg.unhold(told, deliver=False)
    await rig.daemon.start()
    await rig.finish()
    rig.assert_each_answered_once()
    assert rig.files.run_counts() == {wanted: 1}, rig.transcript()
    answer = rig.ledger.answers(wanted)[0].text
    assert then in answer and f"wiped {wanted}" in answer, rig.transcript()
    assert f"held a slot for {then}" in answer, rig.transcript()
