"""The store contract: what every backend must do, checked through engine.Store's parts only.

Parametrized over the backends (`store` fixture); a new backend adds itself to BACKENDS and
runs these tests unchanged.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from engine import Image, InboundMessage, Message, Quote, Role, Text, ToolCall, ToolOutput
from engine.models import Reasoning, member, untrusted
from engine.store import (
    AccessRequest,
    ChannelError,
    ChatPrefs,
    ConfirmationRow,
    ConfirmationState,
    DeliveryState,
    InboxState,
    JobState,
    ReplyMode,
    RequestState,
    RunState,
    ScheduleRun,
    Spent,
    SqliteStore,
    Store,
    Summary,
    TokenRatio,
    VoiceReplies,
)
from engine.store._types._states import CONFIRMATION_TRANSITIONS, JOB_TRANSITIONS, RUN_TRANSITIONS
from engine.store.postgres import PgStore
from tests.postgres import PostgresServer


async def _sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    store = SqliteStore(tmp_path / "contract.db")
    await store.open()
    return store


async def _postgres(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    server: PostgresServer = request.getfixturevalue("postgres")  # started on first use
    store = PgStore(server.new_database())
    await store.open()
    return store


BACKENDS: dict[str, Callable[[pytest.FixtureRequest, Path], Any]] = {
    "sqlite": _sqlite,
    "postgresql": _postgres,
}


@pytest.fixture(params=sorted(BACKENDS))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened = await BACKENDS[request.param](request, tmp_path)
    try:
        yield opened
    finally:
        await opened.__aexit__(None, None, None)


def inbound(text: str, message_id: str, chat_id: str = "c1", **kw: Any) -> InboundMessage:
    return InboundMessage("t", chat_id, kw.pop("user_id", "u1"), "Ann", text, message_id, **kw)


# -- conversations ------------------------------------------------------------------------


async def test_one_active_conversation_per_chat_even_when_created_concurrently(
    store: Store,
) -> None:
    convs = await asyncio.gather(*(store.conversations.active("t", "c1") for _ in range(20)))
    assert len({c.id for c in convs}) == 1
    await store.conversations.reset("t", "c1")
    after = await asyncio.gather(*(store.conversations.active("t", "c1") for _ in range(20)))
    assert len({c.id for c in after}) == 1 and after[0].id != convs[0].id


async def test_every_kind_of_part_comes_back_as_it_went_in(store: Store) -> None:
    conv = await store.conversations.active("t", "c1", is_private=False)
    sent = [
        Message(Role.USER, [Text("look"), Image("image/png", url="tg:file1", name="a.png")], "Ann"),
        Message.assistant(
            "checking", [ToolCall("c1", "fetch", '{"u": 1}'), ToolCall("c2", "x", "{}")]
        ),
        Message.tool_result("c1", "page text"),
        Message.tool_result("c2", "boom", is_error=True),
        Message.assistant("done", (), [Reasoning("anthropic", '{"type": "thinking"}', "hm")]),
    ]
    for msg in sent:
        await store.conversations.append(conv.id, msg)
    got = await store.conversations.history(conv.id)
    assert got == sent
    assert got[0].speaker == "Ann" and got[3].result == ToolOutput("c2", "boom", True)
    assert not conv.is_private


async def test_reasoning_comes_back_with_its_calls_verbatim(store: Store) -> None:
    """What a reasoning model thought is stored with its calls (and read back before them),
    its API's item byte for byte: the API refuses the calls without it after a restart."""
    conv = await store.conversations.active("t", "c1")
    item = '{"response":"resp_1","item":{"type":"reasoning","encrypted_content":"gAAA\\u00e9=="}}'
    thought = [Reasoning("responses", item, "Summary: add them"), Reasoning("chat", "", "hm")]
    calls = [ToolCall("call_1", "add", '{"a": 1}'), ToolCall("call_2", "add", '{"a": 2}')]
    await store.conversations.append(conv.id, Message.user("add"))
    await store.conversations.append(conv.id, Message.assistant(None, calls, thought))
    *_, got = await store.conversations.history(conv.id)
    assert got.parts == [*thought, *calls] and got.reasoning[0].item == item
    assert got.text is None  # the thoughts are not the answer


async def test_tokens_spent_reasoning_add_up_apart(store: Store) -> None:
    thought = Spent("", 1, 100, 50, nano_usd=1, reasoning_tokens=40)
    await store.spend.add("t", "g9", "u9", "2026-11-23", "o4", thought)
    await store.spend.add("t", "g9", "u9", "2026-11-23", "o4", thought)
    mine = await store.spend.of_user("t", "u9", "2026-11")
    assert (mine.completion_tokens, mine.reasoning_tokens) == (100, 80)


async def test_a_chat_asks_for_the_models_thinking(store: Store) -> None:
    await store.chat_settings.save(ChatPrefs("t", "g1", thinking=True), "u1")
    await store.chat_settings.save(ChatPrefs("t", "g2"), "u1")
    got = {p.chat_id: p.thinking for p in await store.chat_settings.all()}
    assert got == {"g1": True, "g2": False}


async def test_history_is_cut_at_a_user_message_so_no_result_loses_its_call(store: Store) -> None:
    conv = await store.conversations.active("t", "c1")
    for i in range(3):
        await store.conversations.append(conv.id, Message.user(f"q{i}"))
        await store.conversations.append(
            conv.id, Message.assistant(None, [ToolCall(f"k{i}", "x", "{}")])
        )
        await store.conversations.append(conv.id, Message.tool_result(f"k{i}", "r"))
        await store.conversations.append(conv.id, Message.assistant(f"a{i}"))
    got = await store.conversations.history(conv.id, limit=6)
    assert got[0] == Message.user("q2") and len(got) == 4
    assert await store.conversations.last(conv.id) == Message.assistant("a2")


async def test_the_newest_message_of_several_conversations_at_once(store: Store) -> None:
    convs = [await store.conversations.active("t", f"c{i}") for i in range(3)]
    call = Message.assistant(None, [ToolCall("k", "x", "{}")])
    for msg in (Message.user("q"), call):
        await store.conversations.append(convs[0].id, msg)
    await store.conversations.append(convs[1].id, Message.user("only"))
    got = await store.conversations.lasts([c.id for c in convs])
    assert got == {convs[0].id: call, convs[1].id: Message.user("only")}  # none for the empty one
    assert await store.conversations.lasts([]) == {}


async def test_dangling_calls_are_closed_once(store: Store) -> None:
    conv = await store.conversations.active("t", "c1")
    await store.conversations.append(conv.id, Message.user("go"))
    calls = [ToolCall("a", "x", "{}"), ToolCall("b", "x", "{}")]
    await store.conversations.append(conv.id, Message.assistant(None, calls))
    await store.conversations.append(conv.id, Message.tool_result("a", "ok"))
    assert await store.conversations.close_dangling(conv.id, "x", keep={"b"}) == 0
    assert await store.conversations.close_dangling(conv.id, "interrupted") == 1
    assert await store.conversations.close_dangling(conv.id, "interrupted") == 0
    last = (await store.conversations.history(conv.id))[-1]
    assert last.result == ToolOutput("b", "interrupted", is_error=True)


async def test_a_retry_keeps_the_question_and_drops_the_answer(store: Store) -> None:
    conv = await store.conversations.active("t", "c1")
    for msg in (Message.user("1"), Message.user("1b"), Message.assistant("one")):
        await store.conversations.append(conv.id, msg)
    assert await store.conversations.rewind(conv.id, keep_question=True) == 1
    assert await store.conversations.history(conv.id) == [Message.user("1"), Message.user("1b")]
    await store.conversations.reset("t", "c1")
    fresh = await store.conversations.active("t", "c1")
    assert await store.conversations.rewind(fresh.id) == 0


async def test_the_last_exchange_can_be_dropped(store: Store) -> None:
    conv = await store.conversations.active("t", "c1")
    for msg in (Message.user("1"), Message.assistant("one"), Message.user("2")):
        await store.conversations.append(conv.id, msg)
    await store.conversations.append(conv.id, Message.assistant("two"), deliver="")
    assert await store.conversations.rewind(conv.id) == 2
    assert await store.conversations.history(conv.id) == [
        Message.user("1"),
        Message.assistant("one"),
    ]
    assert await store.conversations.undelivered("t", "c1") == []


async def test_a_stopped_turn_is_kept_marked_and_left_out_of_every_request_read(
    store: Store,
) -> None:
    """Issue 40: the turn the user stopped (its question, calls, results) stays in the store,
    marked, and no read a request is built from returns it; an answered turn is never marked;
    /retry makes the stopped question the user's again."""
    c = store.conversations
    conv = await c.active("t", "c1")
    for msg in (Message.user("hi"), Message.assistant("hello")):
        await c.append(conv.id, msg)
    assert await c.stop_turn(conv.id) == 0  # nothing running: the answered turn stays
    calls = [ToolCall("k1", "fetch", "{}")]
    stopped = [
        Message.user("please delete the old reports"),
        Message.user("and the logs"),  # taken with it: the same turn
        Message.assistant(None, calls),
        Message.tool_result("k1", "cancelled: the user stopped the turn.", is_error=True),
    ]
    ids = [await c.append(conv.id, m) for m in stopped]
    assert await c.stop_turn(conv.id) == 4
    assert await c.stop_turn(conv.id) == 0  # once
    kept = [Message.user("hi"), Message.assistant("hello")]
    assert await c.history(conv.id) == kept
    assert await c.history(conv.id, with_stopped=True) == kept + stopped
    assert await c.last(conv.id) == Message.assistant("hello")
    assert (await c.lasts([conv.id]))[conv.id] == Message.assistant("hello")
    assert [m for _, m in await store.context.messages_after(conv.id, 0, 50)] == kept
    assert await c.close_dangling(conv.id, "x") == 0  # a stopped call is never answered again
    shown = await store.browse.messages(conv.id)
    assert [m.id for m in shown if m.stopped_at is not None] == ids
    await c.append(conv.id, Message.user("what is 2+2"))
    assert [m.text for m in await c.history(conv.id)] == ["hi", "hello", "what is 2+2"]
    after = await store.context.messages_after(conv.id, ids[-1], 50)
    assert [m.text for _, m in after] == ["what is 2+2"]
    # /retry of a stopped question: asked again, without what its stopped turn did
    assert await c.stop_turn(conv.id) == 1
    assert await c.rewind(conv.id, keep_question=True) == 0
    assert [m.text for m in await c.history(conv.id)] == ["hi", "hello", "what is 2+2"]
    await c.append(conv.id, Message.assistant("4"))
    assert await c.stop_turn(conv.id) == 0


async def test_an_answer_is_pending_until_its_delivery_is_recorded(store: Store) -> None:
    conv = await store.conversations.active("t", "c1")
    first = await store.conversations.append(conv.id, Message.assistant("one"), deliver="m7")
    second = await store.conversations.append(conv.id, Message.assistant("two"), deliver="")
    await store.conversations.append(conv.id, Message.assistant("not an answer"))
    pending = await store.conversations.undelivered("t", "c1")
    assert [(d.message_id, d.text, d.reply_to, d.state) for d in pending] == [
        (first, "one", "m7", DeliveryState.PENDING),
        (second, "two", None, DeliveryState.PENDING),
    ]
    await store.conversations.delivered(first, "p100")
    await store.conversations.delivered(second, None, failed=True)
    await store.conversations.delivered(first, "p999")  # recorded once: never overwritten
    assert await store.conversations.undelivered("t", "c1") == []
    assert await store.inbox.unfinished_chats() == []


# -- inbox --------------------------------------------------------------------------------


async def test_a_message_is_accepted_once(store: Store) -> None:
    assert await store.inbox.accept(inbound("hi", "m1"))
    assert not await store.inbox.accept(inbound("hi again", "m1"))
    assert await store.inbox.accept(inbound("hi", "m1", chat_id="c2"))  # ids are per chat
    rows = await store.inbox.rows(InboxState.QUEUED, "t", "c1")
    assert [r.text for r in rows] == ["hi"]


async def test_taking_moves_queued_messages_into_the_conversation_in_order(store: Store) -> None:
    for i in range(3):
        await store.inbox.accept(inbound(f"m{i}", f"id{i}", is_private=False))
    taken = await store.inbox.take_queued("t", "c1")
    assert [r.text for r in taken] == ["m0", "m1", "m2"]
    assert all(r.state is InboxState.QUEUED for r in taken)  # as they were when taken
    assert await store.inbox.take_queued("t", "c1") == []
    conv = await store.conversations.active("t", "c1")
    history = await store.conversations.history(conv.id)
    assert [(m.text, m.speaker) for m in history] == [("m0", "Ann"), ("m1", "Ann"), ("m2", "Ann")]
    assert [r.id for r in await store.inbox.rows(InboxState.TAKEN, "t", "c1")] == [
        r.id for r in taken
    ]
    assert await store.inbox.unfinished_chats() == [("t", "c1")]
    await store.inbox.answered([r.id for r in taken])
    assert await store.inbox.unfinished_chats() == []


async def test_an_answer_delivered_answers_its_messages_in_the_same_write(store: Store) -> None:
    await store.inbox.accept(inbound("one", "m1"))
    taken = await store.inbox.take_queued("t", "c1")  # one message: taken in one write
    conv = await store.conversations.active("t", "c1")
    assert [m.text for m in await store.conversations.history(conv.id)] == ["one"]
    answer = await store.conversations.append(conv.id, Message.assistant("1"), deliver="m1")
    assert await store.inbox.unfinished_chats() == [("t", "c1")]
    await store.inbox.answered([r.id for r in taken], delivered=(answer, "p1"))
    assert await store.inbox.unfinished_chats() == []  # nothing pending, nothing unanswered
    assert await store.inbox.rows(InboxState.TAKEN, "t", "c1") == []
    await store.inbox.answered([], delivered=(answer, "p2"))  # recorded once
    assert await store.conversations.undelivered("t", "c1") == []


async def test_only_old_answered_messages_are_pruned(store: Store) -> None:
    await store.inbox.accept(inbound("old", "a"))
    await store.inbox.accept(inbound("waiting", "b"))
    rows = await store.inbox.take_queued("t", "c1")
    await store.inbox.answered([rows[0].id])
    assert await store.inbox.prune(time.time() - 3600) == 0
    assert await store.inbox.prune(time.time() + 1) == 1
    assert [r.text for r in await store.inbox.rows(InboxState.TAKEN, "t", "c1")] == ["waiting"]
    assert not await store.inbox.accept(inbound("waiting", "b"))


async def test_a_held_message_is_taken_only_once_its_time_has_come(store: Store) -> None:
    """One rule on every backend (InboxRow.ready): held until a time still to come, a message
    stays queued, and is neither ready nor taken; held until a time gone by, it is taken."""
    now = time.time()
    await store.inbox.accept(inbound("free", "m0"))
    await store.inbox.accept(inbound("later", "m1"), hold_until=now + 3600)
    await store.inbox.accept(inbound("due", "m2"), hold_until=now - 1)
    assert [r.text for r in await store.inbox.ready("t", "c1")] == ["free", "due"]
    assert await store.inbox.next_release("t", "c1") == now - 1  # the earliest, even if due
    taken = await store.inbox.take_queued("t", "c1")
    assert [r.text for r in taken] == ["free", "due"]
    waiting = await store.inbox.rows(InboxState.QUEUED, "t", "c1")
    assert [(r.text, r.hold_until) for r in waiting] == [("later", now + 3600)]
    assert await store.inbox.ready("t", "c1") == []
    assert await store.inbox.take_queued("t", "c1") == []
    assert await store.inbox.next_release("t", "c1") == now + 3600
    assert await store.inbox.next_release("t", "c2") is None


# -- confirmations ------------------------------------------------------------------------


def confirmation(conv_id: int, cid: str = "abc123", chat_id: str = "c1") -> ConfirmationRow:
    return ConfirmationRow(
        id=cid,
        conversation_id=conv_id,
        channel="t",
        chat_id=chat_id,
        user_id="u1",
        user_name="Ann",
        tool="delete",
        call_id="call_1",
        args={"name": "x"},
        summary="Delete x",
        details='delete {"name": "x"}',
        remaining=[ToolCall("call_2", "add", '{"a": 1}')],
        iteration=2,
        state=ConfirmationState.PENDING,
        message_ref=None,
        reply_to="m1",
        expires_at=time.time() + 60,
    )


async def test_a_confirmation_comes_back_as_stored(store: Store) -> None:
    conv = await store.conversations.active("t", "c1")
    row = confirmation(conv.id)
    await store.confirmations.add(row)
    await store.confirmations.set_ref(row.id, "p5")
    assert await store.confirmations.get(row.id) == dataclasses.replace(row, message_ref="p5")
    assert await store.confirmations.get("nope00") is None


async def test_confirmation_transitions_follow_the_table(store: Store) -> None:
    conv = await store.conversations.active("t", "c1")
    await store.confirmations.add(confirmation(conv.id, "aaa111"))
    await store.confirmations.add(confirmation(conv.id, "bbb222", chat_id="c2"))
    S = ConfirmationState
    moves = await asyncio.gather(
        *(store.confirmations.transition("aaa111", S.PENDING, S.APPROVED) for _ in range(10))
    )
    assert moves.count(True) == 1  # one press wins, however many arrive at once
    assert not await store.confirmations.transition("aaa111", S.PENDING, S.DECLINED)
    with pytest.raises(ValueError, match="cannot go from executed"):
        await store.confirmations.transition("aaa111", S.EXECUTED, S.PENDING)
    assert [c.id for c in await store.confirmations.in_state(S.APPROVED)] == ["aaa111"]
    assert [c.id for c in await store.confirmations.in_state(S.PENDING, "t", "c2")] == ["bbb222"]
    assert await store.confirmations.in_state(S.PENDING, "t", "c1") == []


async def test_confirmations_come_back_oldest_first_then_by_id_on_every_backend(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A total order, the same on every backend: when they were added, then their id (rows
    added within one tick of the clock tie on the time)."""
    conv = await store.conversations.active("t", "c1")
    first, *tied = [confirmation(conv.id, cid) for cid in ("zzz999", "ccc333", "aaa111")]
    await store.confirmations.add(first)
    monkeypatch.setattr(time, "time", lambda: first.expires_at)  # later than `first`, one tick
    for row in tied:
        await store.confirmations.add(row)
    monkeypatch.undo()
    S = ConfirmationState
    expected = ["zzz999", "aaa111", "ccc333"]
    assert [c.id for c in await store.confirmations.in_state(S.PENDING)] == expected
    assert [c.id for c in await store.confirmations.in_state(S.PENDING, "t", "c1")] == expected


async def test_every_backend_refuses_the_same_moves_and_leaves_the_row_alone(
    store: Store,
) -> None:
    """The one guard (engine/store/_types/_states.py): a move its table does not list raises
    ValueError before anything is written, for confirmations, jobs and scheduled runs alike."""
    conv = await store.conversations.active("t", "c1")
    await store.confirmations.add(confirmation(conv.id, "aaa111"))
    await store.jobs.add(conv, "j1", "u1", "report", {}, resumable=False)
    sched = await store.schedules.add_schedule("t", "c1", "u1", "x", "interval", "60", "UTC", 60)
    assert await store.schedules.claim(
        sched.id, 60.0, ScheduleRun(sched.id, 60.0, RunState.QUEUED), 120
    )
    refused = {"confirmation": 0, "job": 0, "run": 0}
    for a in ConfirmationState:
        for b in ConfirmationState:
            if b not in CONFIRMATION_TRANSITIONS.get(a, ()):
                with pytest.raises(ValueError, match=f"cannot go from {a} to {b}"):
                    await store.confirmations.transition("aaa111", a, b)
                refused["confirmation"] += 1
    for a in JobState:
        for b in JobState:
            if b not in JOB_TRANSITIONS.get(a, ()):
                with pytest.raises(ValueError, match=f"cannot go from {a} to {b}"):
                    await store.jobs.transition("j1", a, b)
                refused["job"] += 1
    for a in RunState:
        for b in RunState:
            if b not in RUN_TRANSITIONS.get(a, ()):
                with pytest.raises(ValueError, match=f"cannot go from {a} to {b}"):
                    await store.schedules.transition(sched.id, 60.0, a, b)
                refused["run"] += 1
    assert refused == {"confirmation": 56, "job": 18, "run": 31}
    assert (await store.confirmations.get("aaa111")).state is ConfirmationState.PENDING  # type: ignore[union-attr]
    assert (await store.jobs.get("j1")).state is JobState.RUNNING  # type: ignore[union-attr]
    assert (await store.schedules.run(sched.id, 60.0)).state is RunState.QUEUED  # type: ignore[union-attr]


# -- jobs ---------------------------------------------------------------------------------


async def test_a_job_finishes_once_and_moves_by_the_table(store: Store) -> None:
    conv = await store.conversations.active("t", "c1")
    assert await store.jobs.add(conv, "j1", "u1", "report", {"m": "may"}, resumable=True)
    assert not await store.jobs.add(conv, "j1", "u1", "report", {}, resumable=False)
    job = await store.jobs.get("j1")
    assert job is not None and job.args == {"m": "may"} and job.resumable
    assert job.state is JobState.RUNNING
    assert await store.jobs.finish("j1", "42", "shown", False, untrusted="a feed")
    assert not await store.jobs.finish("j1", "43", None, True)
    done = await store.jobs.get("j1")
    assert done is not None and (done.result, done.for_user, done.state, done.untrusted) == (
        "42",
        "shown",
        JobState.DONE,
        "a feed",
    )
    assert [j.id for j in await store.jobs.in_state(JobState.DONE)] == ["j1"]
    assert await store.jobs.transition("j1", JobState.DONE, JobState.DELIVERED)
    with pytest.raises(ValueError):
        await store.jobs.transition("j1", JobState.DELIVERED, JobState.RUNNING)


async def test_where_a_running_job_is_is_kept_until_it_finishes(store: Store) -> None:
    """A job's tool keeps where it is (an MCP task's id) for its resumption after a restart."""
    conv = await store.conversations.active("t", "c1")
    await store.jobs.add(conv, "j1", "u1", "research", {}, resumable=True)
    assert (await store.jobs.get("j1")).resume is None  # type: ignore[union-attr]
    assert await store.jobs.set_resume("j1", '{"task": "t1"}')
    assert await store.jobs.set_resume("j1", '{"task": "t2"}')
    [running] = await store.jobs.in_state(JobState.RUNNING)
    assert running.resume == '{"task": "t2"}'
    await store.jobs.finish("j1", "done", None, False)
    assert not await store.jobs.set_resume("j1", '{"task": "t3"}')  # finished: nothing to resume
    assert (await store.jobs.get("j1")).resume == '{"task": "t2"}'  # type: ignore[union-attr]


# -- the context budget's part -----------------------------------------------------------


async def test_where_a_message_came_from_is_kept_with_it_and_with_a_summary(store: Store) -> None:
    conv = await store.conversations.active("t", "g1", is_private=False)
    page = untrusted("example.org/news")
    eve = member("Eve", "u2")
    await store.conversations.append(conv.id, Message.user("hi", speaker="Eve", provenance=eve))
    await store.conversations.append(conv.id, Message.tool_result("c1", "news", provenance=page))
    await store.conversations.append(conv.id, Message.user("mine"), user_id="u1")
    store.caches.drop()  # read back from the database itself
    kept = await store.conversations.history(conv.id, 10)
    assert [m.provenance for m in kept[:2]] == [eve, page]
    assert kept[2].provenance.trusted_for("u1") and not kept[0].provenance.trusted_for("u1")
    await store.context.save_summary(Summary(conv.id, "Eve read news.", 1, 2, (eve, page)))
    store.caches.drop()
    assert (await store.context.summary(conv.id)).sources == (eve, page)  # type: ignore[union-attr]


async def test_a_summary_is_kept_per_conversation_and_replaced_whole(store: Store) -> None:
    a = await store.conversations.active("t", "c1")
    b = await store.conversations.active("t", "c2")
    assert await store.context.summary(a.id) is None
    await store.context.save_summary(Summary(a.id, "Ann likes tea.", 1, 4))
    await store.context.save_summary(Summary(b.id, "Bob is away.", 7, 9))
    await store.context.save_summary(Summary(a.id, "Ann likes tea and cake.", 1, 12))
    assert await store.context.summary(a.id) == Summary(a.id, "Ann likes tea and cake.", 1, 12)
    assert await store.context.summary(b.id) == Summary(b.id, "Bob is away.", 7, 9)


async def test_messages_after_a_summary_come_with_their_ids_and_the_last_question(
    store: Store,
) -> None:
    conv = await store.conversations.active("t", "c1")
    ids = [
        await store.conversations.append(conv.id, m)
        for m in (
            Message.user("one"),
            Message.assistant(None, [ToolCall("k1", "fetch", "{}")]),
            Message.tool_result("k1", "page"),
            Message.assistant("answer one"),
            Message.user("two"),
            Message.assistant("answer two"),
        )
    ]
    after = await store.context.messages_after(conv.id, ids[3], 50)
    assert [(i, m.text) for i, m in after] == [(ids[4], "two"), (ids[5], "answer two")]
    cut = await store.context.messages_after(conv.id, 0, 4)  # cut: starts at a user message
    assert [m.text for _, m in cut] == ["two", "answer two"]
    # Covered up to the end: the last question still comes back, with what follows it.
    covered = await store.context.messages_after(conv.id, ids[5], 50)
    assert [m.text for _, m in covered] == ["two", "answer two"]


async def test_a_token_ratio_is_kept_per_model(store: Store) -> None:
    assert await store.context.token_ratio("m1") is None
    await store.context.save_token_ratio(TokenRatio("m1", 0.8, 3))
    await store.context.save_token_ratio(TokenRatio("m1", 1.3, 9, 6_000))
    await store.context.save_token_ratio(TokenRatio("m2", 2.0, 1))
    assert await store.context.token_ratio("m1") == TokenRatio("m1", 1.3, 9, 6_000)
    assert await store.context.token_ratio("m2") == TokenRatio("m2", 2.0, 1, None)


# -- schedules and chat settings ----------------------------------------------------------


async def test_a_schedule_takes_its_chat_kind_and_its_user_name_from_the_chat(
    store: Store,
) -> None:
    await store.conversations.active("t", "g1", is_private=False)
    await store.inbox.accept(inbound("hi", "m1", chat_id="g1", is_private=False))
    row = await store.schedules.add_schedule(
        "t", "g1", "u1", "say hi", "cron", "0 8 * * *", "Europe/Paris", 100.0
    )
    assert (row.user_name, row.is_private, row.task, row.next_due) == ("Ann", False, "say hi", 100)
    other = await store.schedules.add_schedule("t", "d1", "u9", "x", "interval", "300", "UTC", 5)
    assert (other.user_name, other.is_private) == ("", True)  # nothing known: a DM, no name
    assert [s.id for s in await store.schedules.chat_schedules("t", "g1")] == [row.id]
    assert not await store.schedules.cancel_schedule("t", "d1", row.id)  # not that chat's
    assert await store.schedules.cancel_schedule("t", "g1", row.id)
    assert not await store.schedules.cancel_schedule("t", "g1", row.id)
    assert await store.schedules.chat_schedules("t", "g1") == []
    assert [s.id for s in await store.schedules.due(10)] == [other.id]  # only active ones
    assert await store.schedules.next_due() == 5


async def test_a_due_time_is_claimed_once_and_its_run_moves_by_the_table(store: Store) -> None:
    row = await store.schedules.add_schedule("t", "c1", "u1", "x", "interval", "60", "UTC", 60.0)
    run = ScheduleRun(row.id, 60.0, RunState.QUEUED, missed=2)
    claims = await asyncio.gather(
        *(store.schedules.claim(row.id, 60.0, run, 120.0) for _ in range(10))
    )
    assert claims.count(True) == 1
    assert await store.schedules.run(row.id, 60.0) == run
    again = await store.schedules.get(row.id)
    assert again is not None and again.next_due == 120.0
    # a due time recorded before is never recorded again, even if next_due went back to it
    late = dataclasses.replace(run, state=RunState.SKIPPED)
    assert await store.schedules.claim(row.id, 120.0, dataclasses.replace(late, due=120), 180)
    assert not await store.schedules.claim(row.id, 180.0, dataclasses.replace(late, due=60), 240)
    assert (await store.schedules.get(row.id)).next_due == 180.0  # type: ignore[union-attr]
    R = RunState
    assert await store.schedules.transition(row.id, 60.0, R.QUEUED, R.RUNNING)
    assert not await store.schedules.transition(row.id, 60.0, R.QUEUED, R.RUNNING)
    assert [r.due for r in await store.schedules.runs(R.RUNNING)] == [60.0]
    assert await store.schedules.transition(row.id, 60.0, R.RUNNING, R.FAILED, "boom")
    failed = await store.schedules.run(row.id, 60.0)
    assert failed is not None and (failed.state, failed.error) == (R.FAILED, "boom")
    with pytest.raises(ValueError):
        await store.schedules.transition(row.id, 60.0, R.FAILED, R.QUEUED)
    await store.schedules.cancel_schedule("t", "c1", row.id)
    assert not await store.schedules.claim(row.id, 180.0, dataclasses.replace(run, due=180), 240)


async def test_adding_or_cancelling_a_schedule_wakes_its_waiter(store: Store) -> None:
    waiter = asyncio.ensure_future(store.schedules.wait_changed())
    await asyncio.sleep(0)
    assert not waiter.done()
    row = await store.schedules.add_schedule("t", "c1", "u1", "x", "interval", "60", "UTC", 60)
    await asyncio.wait_for(waiter, 5)
    waiter = asyncio.ensure_future(store.schedules.wait_changed())
    await store.schedules.cancel_schedule("t", "c1", row.id)
    await asyncio.wait_for(waiter, 5)


async def test_time_zones_are_per_user_and_chat_settings_per_chat(store: Store) -> None:
    assert await store.schedules.user_timezone("t", "u1") is None
    await store.schedules.set_user_timezone("t", "u1", "Europe/Riga")
    await store.schedules.set_user_timezone("t", "u1", "Asia/Tokyo")
    assert await store.schedules.user_timezone("t", "u1") == "Asia/Tokyo"
    assert await store.schedules.user_timezone("x", "u1") is None
    prefs = ChatPrefs("t", "g1", "You are a pirate", "big-model", ReplyMode.ALL, VoiceReplies.NEVER)
    await store.chat_settings.save(prefs, "u1")
    await store.chat_settings.save(ChatPrefs("t", "g2", persona="calm"), "u2")
    await store.chat_settings.save(dataclasses.replace(prefs, model=None), "u1")
    assert sorted(await store.chat_settings.all(), key=lambda p: p.chat_id) == [
        dataclasses.replace(prefs, model=None),
        ChatPrefs("t", "g2", persona="calm"),
    ]
    spanish = dataclasses.replace(prefs, language="es")  # /settings language es
    await store.chat_settings.save(spanish, "u1")
    assert [p.language for p in await store.chat_settings.all() if p.chat_id == "g1"] == ["es"]
    await store.chat_settings.save(prefs, "u1")  # language auto
    assert [p.language for p in await store.chat_settings.all() if p.chat_id == "g1"] == [None]


async def test_spend_adds_up_per_request_and_reads_per_user_chat_and_model(
    store: Store,
) -> None:
    one = Spent("", 1, 1_000, 200, nano_usd=3_000_000)
    pic = Spent("", 1, images=1, nano_usd=40_000_000)
    heard = Spent("", 1, seconds=4.5, nano_usd=450_000)
    await store.spend.add("t", "g1", "u1", "2026-11-23", "gpt-4o", one)
    await store.spend.add("t", "g1", "u1", "2026-11-23", "gpt-4o", one)  # the same row grows
    await store.spend.add("t", "d1", "u1", "2026-11-23", "dall-e-3", pic)
    await store.spend.add("t", "g1", "u2", "2026-11-23", "whisper-1", heard)
    await store.spend.add("t", "g1", "u1", "2026-11-22", "gpt-4o", one)
    await store.spend.add("x", "g1", "u1", "2026-11-23", "gpt-4o", one)  # another channel
    today = await store.spend.of_user("t", "u1", "2026-11-23")
    assert today == Spent("u1", 3, 2_000, 400, 1, 0, 0.0, 46_000_000)
    assert (await store.spend.of_user("t", "u1", "2026-11")).nano_usd == 49_000_000
    assert await store.spend.of_user("t", "nobody", "2026") == Spent("nobody")
    chat = await store.spend.of_chat("t", "g1", "2026-11-23")
    assert (chat.requests, chat.seconds, chat.nano_usd) == (3, 4.5, 6_450_000)
    models = await store.spend.by_model("2026-11-23")
    assert [(m.of, m.requests, m.nano_usd) for m in models] == [
        ("dall-e-3", 1, 40_000_000),
        ("gpt-4o", 3, 9_000_000),
        ("whisper-1", 1, 450_000),
    ]
    big = Spent("", 1, 3_000_000_000, nano_usd=9_000_000_000_000)  # past 32 bits, exact
    await store.spend.add("t", "g1", "u3", "2026-11-24", "gpt-4o", big)
    assert await store.spend.of_user("t", "u3", "2026-11-24") == dataclasses.replace(big, of="u3")
    days = [
        (d.channel, d.user_id, d.day, d.tokens, d.nano_usd)
        for d in await store.spend.by_user_day("2026-11-23")
    ]
    assert days == [  # from that day on, per user and day, every chat and model together
        ("t", "u1", "2026-11-23", 2_400, 46_000_000),
        ("t", "u2", "2026-11-23", 0, 450_000),
        ("x", "u1", "2026-11-23", 1_200, 3_000_000),
        ("t", "u3", "2026-11-24", 3_000_000_000, 9_000_000_000_000),
    ]


# -- memory and transactions ---------------------------------------------------------------


async def test_memory_belongs_to_its_owner_and_searches_literally(store: Store) -> None:
    a = await store.memory.add("t:ann", "likes 100% tea")
    await store.memory.add("t:ann", "likes coffee_beans")
    await store.memory.add("t:bob", "likes tea")
    assert [n.text for n in await store.memory.items("t:ann", "100%")] == ["likes 100% tea"]
    assert [n.text for n in await store.memory.items("t:ann", "_")] == ["likes coffee_beans"]
    assert not await store.memory.delete("t:bob", a)
    assert await store.memory.delete("t:ann", a)
    assert len(await store.memory.items("t:ann")) == 1


async def test_memory_is_most_recently_used_first_and_kept_once(store: Store) -> None:
    first = await store.memory.add("t:ann", "prefers metric units")
    second = await store.memory.add("t:ann", "works on project X")
    assert [n.id for n in await store.memory.items("t:ann")] == [second, first]
    assert await store.memory.add("t:ann", "Prefers Metric Units") == first  # touched, no copy
    assert [n.id for n in await store.memory.items("t:ann")] == [first, second]
    await store.memory.touch("t:ann", [second])
    await store.memory.touch("t:bob", [first])  # not Bob's: nothing changes
    assert [n.id for n in await store.memory.items("t:ann", limit=1)] == [second]
    await store.memory.add("t:bob", "likes tea")
    assert await store.memory.clear("t:ann") == 2
    assert await store.memory.items("t:ann") == []
    assert [n.text for n in await store.memory.items("t:bob")] == ["likes tea"]


async def test_a_transaction_spans_the_parts_and_rolls_back_whole(store: Store) -> None:
    conv = await store.conversations.active("t", "c1")
    with pytest.raises(RuntimeError):
        async with store.transaction():
            await store.conversations.append(conv.id, Message.user("lost"))
            await store.inbox.accept(inbound("lost too", "m1"))
            raise RuntimeError("crash inside")
    assert await store.conversations.history(conv.id) == []
    assert await store.inbox.accept(inbound("kept", "m1"))


async def test_other_tasks_never_read_what_an_open_transaction_wrote(store: Store) -> None:
    written, looked = asyncio.Event(), asyncio.Event()

    async def rolled_back() -> None:
        async with store.transaction():
            await store.inbox.accept(inbound("may yet roll back", "m1"))
            assert len(await store.inbox.rows(InboxState.QUEUED, "t", "c1")) == 1  # its own
            written.set()
            await looked.wait()
            raise RuntimeError("crash inside")

    writing = asyncio.create_task(rolled_back())
    await written.wait()
    assert await store.inbox.rows(InboxState.QUEUED, "t", "c1") == []  # not committed
    assert await store.inbox.unfinished_chats() == []
    looked.set()
    with pytest.raises(RuntimeError):
        await writing
    assert await store.inbox.rows(InboxState.QUEUED, "t", "c1") == []
    async with store.transaction():  # committed: then every task reads it
        await store.inbox.accept(inbound("kept", "m2"))
    assert len(await store.inbox.rows(InboxState.QUEUED, "t", "c1")) == 1


# -- operating it: status, settled rows, history by age, forgetting ------------------------------


async def test_status_shows_what_is_queued_running_and_waiting(store: Store) -> None:
    await store.inbox.accept(inbound("later", "q1", chat_id="c2"))
    await store.inbox.accept(inbound("now", "r1", chat_id="c3"))
    before = time.time()
    await store.inbox.take_queued("t", "c3")
    conv = await store.conversations.active("t", "c1")
    await store.confirmations.add(confirmation(conv.id))
    await store.jobs.add(
        conv,
        "job1",
        "u1",
        "remind_me",
        {"text": "tea", "at": "2030-01-01T08:00:00+00:00"},
        resumable=True,
    )
    row = await store.schedules.add_schedule("t", "c1", "u1", "news", "interval", "600", "UTC", 9e9)
    await store.ops.record_errors([ChannelError("t", 5.0, "sendMessage: HTTP 403")])
    await store.ops.record_errors([ChannelError("t", 4.0, "older, arrived late")])

    s = await store.ops.status()
    assert [(q.chat_id, q.messages) for q in s.queued] == [("c2", 1)]
    assert [(r.chat_id, r.what) for r in s.running] == [("c3", "answering 1 message")]
    assert s.running[0].since is not None and s.running[0].since >= before
    assert [(c.id, c.tool, c.summary) for c in s.confirmations] == [
        ("abc123", "delete", "Delete x")
    ]
    assert [(j.id, j.state, j.due) for j in s.jobs] == [("job1", JobState.RUNNING, 1893484800.0)]
    assert [(u.schedule_id, u.task) for u in s.upcoming] == [(row.id, "news")]
    assert s.errors == [ChannelError("t", 5.0, "sendMessage: HTTP 403")]
    assert s.messages == 1 and s.conversations == 2
    counts = await store.ops.counts()
    assert (counts.confirmations_pending, counts.jobs_running) == (1, 1)


async def test_only_settled_rows_are_pruned(store: Store) -> None:
    conv = await store.conversations.active("t", "c1")
    for mid in ("a", "b"):
        await store.inbox.accept(inbound(mid, mid))
    taken = await store.inbox.take_queued("t", "c1")
    await store.inbox.answered([taken[0].id])
    sent = await store.conversations.append(conv.id, Message.assistant("one"), deliver="")
    await store.conversations.delivered(sent, "p1")
    await store.conversations.append(conv.id, Message.assistant("two"), deliver="")
    for job in ("done1", "run1"):
        await store.jobs.add(conv, job, "u1", "report", {}, resumable=False)
    await store.jobs.finish("done1", "ok", None, False)
    await store.jobs.transition("done1", JobState.DONE, JobState.DELIVERED)
    await store.confirmations.add(confirmation(conv.id, "aaa111"))
    await store.confirmations.add(confirmation(conv.id, "bbb222"))
    await store.confirmations.transition(
        "aaa111", ConfirmationState.PENDING, ConfirmationState.DECLINED
    )

    assert (await store.ops.prune(time.time() - 3600)).total == 0  # all of it is recent
    pruned = await store.ops.prune(time.time() + 1)
    assert (pruned.inbox, pruned.deliveries, pruned.jobs, pruned.confirmations) == (1, 1, 1, 1)
    assert pruned.messages == 0  # history is kept without keep_days
    assert [r.message_id for r in await store.inbox.rows(InboxState.TAKEN, "t", "c1")] == ["b"]
    assert [d.text for d in await store.conversations.undelivered("t", "c1")] == ["two"]
    assert await store.jobs.get("done1") is None and await store.jobs.get("run1") is not None
    assert await store.confirmations.get("aaa111") is None
    assert await store.confirmations.get("bbb222") is not None
    assert len(await store.conversations.history(conv.id)) == 4  # a, b, one, two


async def test_history_older_than_the_cut_goes_from_a_user_message_on(store: Store) -> None:
    talk = await store.conversations.active("t", "c1")
    stale = await store.conversations.active("t", "c2")
    fresh = await store.conversations.active("t", "c3")
    for conv in (talk, stale):
        await store.conversations.append(conv.id, Message.user("q1"))
        await store.conversations.append(
            conv.id, Message.assistant(None, [ToolCall("k1", "x", "{}")])
        )
    cut = time.time()
    later = [
        Message.tool_result("k1", "late result"),  # of an exchange begun before the cut
        Message.assistant("a1"),
        Message.user("q2"),
        Message.assistant("a2"),
    ]
    for msg in later:
        await store.conversations.append(talk.id, msg)
    await store.conversations.append(fresh.id, Message.user("new"))

    pruned = await store.ops.prune(0.0, history_before=cut)
    assert pruned.messages == 2 + 2 + 2
    assert await store.conversations.history(talk.id) == later[2:]
    assert await store.conversations.history(stale.id) == []
    assert await store.conversations.history(fresh.id) == [Message.user("new")]


async def _life_of(store: Store, user: str) -> None:
    """A user's private chat, their part of a group, and everything else a user leaves."""
    dm = f"d-{user}"
    await store.inbox.accept(inbound(f"hello from {user}", f"{user}-1", chat_id=dm, user_id=user))
    await store.inbox.take_queued("t", dm)
    conv = await store.conversations.active("t", dm)
    await store.conversations.append(conv.id, Message.assistant(f"hi {user}"))
    await store.memory.add(f"t:{user}", f"{user} likes tea")
    await store.usage.add("t", user, "2026-11-23", 10, 5, 1)
    await store.spend.add("t", dm, user, "2026-11-23", "m", Spent("", 1, 10, 5, nano_usd=7))
    await store.schedules.set_user_timezone("t", user, "Europe/Paris")
    await store.schedules.add_schedule("t", dm, user, "news", "interval", "600", "UTC", 9e9)
    await store.jobs.add(conv, f"job-{user}", user, "remind_me", {"text": "x"}, resumable=True)
    await store.confirmations.add(
        dataclasses.replace(confirmation(conv.id), id=f"c0{user}", user_id=user, chat_id=dm)
    )
    await store.chat_settings.save(ChatPrefs("t", dm, persona=f"{user}'s pirate"), user)
    await store.grants.grant("t", "g1", f"tool_{user}", user, user)
    asked = time.time()
    await store.access.ask(
        AccessRequest(f"R-{user}", "t", user, user, user, dm, asked, asked + 86_400)
    )
    await store.access.approve("t", user, user, "t:owner")


async def _group_turn(store: Store, *said: tuple[str, str], answer: str) -> None:
    for user, text in said:
        await store.inbox.accept(
            inbound(text, f"g-{text}", chat_id="g1", user_id=user, is_private=False)
        )
    await store.inbox.take_queued("t", "g1")
    conv = await store.conversations.active("t", "g1", is_private=False)
    call = ToolCall(f"k-{answer}", "lookup", "{}")
    await store.conversations.append(conv.id, Message.assistant(None, [call]))
    await store.conversations.append(conv.id, Message.tool_result(call.id, "data"))
    await store.conversations.append(conv.id, Message.assistant(answer))


async def _about(store: Store, user: str) -> list[Any]:
    """Everything the parts say about a user (through the store's own interface)."""
    dm = f"d-{user}"
    conv = await store.conversations.active("t", dm)
    return [
        await store.conversations.history(conv.id),
        await store.memory.items(f"t:{user}"),
        (await store.usage.totals("t", user, "2026")).tokens,
        dataclasses.replace(await store.spend.of_user("t", user, "2026"), of=""),
        await store.schedules.user_timezone("t", user),
        [s.task for s in await store.schedules.chat_schedules("t", dm)],
        await store.jobs.get(f"job-{user}"),
        await store.confirmations.get(f"c0{user}"),
        [p for p in await store.chat_settings.all() if p.chat_id == dm],
        [g.tool for g in await store.grants.in_chat("t", "g1") if g.granted_by == user],
        await store.inbox.sent_since("t", user, 0),
        await store.access.is_approved("t", user),
        await store.access.latest("t", user),
    ]


async def test_forgetting_a_user_removes_exactly_their_rows(store: Store) -> None:
    for user in ("u1", "u2"):
        await _life_of(store, user)
    await _group_turn(store, ("u1", "mine"), answer="about yours")
    await _group_turn(store, ("u2", "theirs"), answer="about theirs")
    await _group_turn(store, ("u2", "both-a"), ("u1", "both-b"), answer="about both")
    u2_before = await _about(store, "u2")

    counted = await store.ops.forget_user("t", "u1", dry_run=True)
    assert counted.messages > 0 and await _about(store, "u1") != await _about(store, "nobody")
    done = await store.ops.forget_user("t", "u1")
    assert dataclasses.replace(done, job_ids=(), private_chats=()) == dataclasses.replace(
        counted, job_ids=(), private_chats=()
    )
    assert done.job_ids == ("job-u1",) and done.private_chats == (("t", "d-u1"),)
    assert (done.memory, done.usage, done.schedules, done.grants) == (1, 1, 1, 1)
    assert done.access == 2  # the request and the approval: they ask again to come back

    assert await _about(store, "u1") == await _about(store, "nobody")
    assert await _about(store, "u2") == u2_before
    group = await store.conversations.active("t", "g1", is_private=False)
    texts = [m.text for m in await store.conversations.history(group.id)]
    assert texts == ["theirs", None, "data", "about theirs", "both-a"]
    again = await store.ops.forget_user(None, "u1")
    assert again.described() == "nothing"


async def test_summaries_covering_what_is_deleted_are_dropped(store: Store) -> None:
    convs = {}
    cut = 0.0
    for chat, user in (("g1", "u1"), ("g2", "u2"), ("g3", "u2"), ("g4", "u3")):
        if chat == "g4":
            cut = time.time()
            await store.conversations.append(convs["g3"].id, Message.user("still here"))
        await store.inbox.accept(
            inbound(f"hi from {user}", f"{chat}-1", chat_id=chat, user_id=user, is_private=False)
        )
        await store.inbox.take_queued("t", chat)
        convs[chat] = conv = await store.conversations.active("t", chat, is_private=False)
        last = await store.conversations.append(conv.id, Message.assistant("hello"))
        await store.context.save_summary(Summary(conv.id, "they talked", last - 1, last))

    forgotten = await store.ops.forget_user("t", "u1")
    assert forgotten.summaries == 1
    pruned = await store.ops.prune(0.0, history_before=cut)  # g2 all gone, g3 cut
    assert pruned.messages == 4
    left = [c for c, conv in convs.items() if await store.context.summary(conv.id) is not None]
    assert left == ["g4"]  # the others each covered a message that is gone


# -- replies (issue 33) ------------------------------------------------------------------


async def test_a_reply_keeps_its_quote_in_the_inbox_and_the_history(store: Store) -> None:
    msg = InboundMessage("t", "c1", "u1", "Ann", "what?", "m1", quote=Quote("Bo", "hey"))
    assert await store.inbox.accept(msg, quote="[q] hey")
    (row,) = await store.inbox.rows(InboxState.QUEUED, "t", "c1")
    assert row.quote == "[q] hey"
    conv = await store.conversations.active("t", "c1")
    await store.inbox.take(conv.id, [(row, Message(Role.USER, [Text("what?")], None, row.quote))])
    (stored,) = await store.conversations.history(conv.id, 10)
    assert stored.quote == "[q] hey" and stored.text == "what?"


# -- pairing: strangers' requests and approved users -------------------------------------


def _asking(code: str, user_id: str = "s1", at: float = 1000.0) -> AccessRequest:
    return AccessRequest(code, "t", user_id, "Stranger", "stranger", "c9", at, at + 86400)


async def test_one_request_pends_per_person_and_an_allow_lets_them_in_once(store: Store) -> None:
    assert await store.access.ask(_asking("AAA111"))
    assert not await store.access.ask(_asking("BBB222"))  # one pending per person
    assert not await store.access.ask(_asking("AAA111", "s2"))  # the code is taken
    assert await store.access.asked_since(999.0) == 1
    assert [r.code for r in await store.access.waiting(1500.0)] == ["AAA111"]
    assert await store.access.waiting(1000.0 + 86400) == []  # expired by then
    assert not await store.access.is_approved("t", "s1")
    decided = await store.access.decide("AAA111", True, "t:boss", 2000.0)
    assert decided is not None and decided.state is RequestState.ALLOWED
    assert decided.decided_by == "t:boss" and decided.username == "stranger"
    assert await store.access.decide("AAA111", False, "t:boss", 2001.0) is None  # answered
    assert await store.access.is_approved("t", "s1")
    assert not await store.access.is_approved("other", "s1")  # on that platform only
    [who] = await store.access.approved()
    assert (who.channel, who.user_id, who.approved_by) == ("t", "s1", "t:boss")
    assert await store.access.revoke("t", "s1")
    assert not await store.access.revoke("t", "s1")
    assert not await store.access.is_approved("t", "s1")


async def test_an_expired_request_cannot_be_answered_and_makes_room_for_a_new_one(
    store: Store,
) -> None:
    assert await store.access.ask(_asking("AAA111", at=1000.0))
    assert await store.access.decide("AAA111", True, "t:boss", 1000.0 + 86400) is None
    assert not await store.access.is_approved("t", "s1")
    assert await store.access.ask(_asking("BBB222", at=1000.0 + 86400))  # the old one expired
    old = await store.access.request("AAA111")
    assert old is not None and old.state is RequestState.EXPIRED
    latest = await store.access.latest("t", "s1")
    assert latest is not None and latest.code == "BBB222"
    denied = await store.access.decide("BBB222", False, "t:boss", 1000.0 + 86401)
    assert denied is not None and denied.state is RequestState.DENIED
    assert not await store.access.is_approved("t", "s1")
    assert await store.access.approve("t", "s3", "Cli", "cli")
    assert not await store.access.approve("t", "s3", "Cli", "cli")


async def test_a_job_knows_whether_its_chat_is_private(store: Store) -> None:
    """A job resumed after a restart acts for a private chat or a group as it did before (a
    member's memory and private-only tools depend on it)."""
    dm = await store.conversations.active("t", "d1")
    group = await store.conversations.active("t", "g1", is_private=False)
    await store.jobs.add(dm, "job-dm", "u1", "remind_me", {}, resumable=True)
    await store.jobs.add(group, "job-group", "u1", "remind_me", {}, resumable=True)
    running = {j.id: j.is_private for j in await store.jobs.in_state(JobState.RUNNING)}
    assert running == {"job-dm": True, "job-group": False}
    got = await store.jobs.get("job-dm")
    assert got is not None and got.is_private


# -- the web console ----------------------------------------------------------------------


async def test_a_console_link_opens_one_session_once_and_only_its_hash_is_kept(
    store: Store,
) -> None:
    token = await store.console.new_link("t:boss", ttl_s=60)
    assert await store.console.redeem("not-" + token, 3600) is None
    first, second = await asyncio.gather(
        store.console.redeem(token, 3600), store.console.redeem(token, 3600)
    )
    assert (first is None) != (second is None)  # used once, even at the same moment
    cookie, session = first or second  # type: ignore[misc]
    assert (session.admin, session.role) == ("t:boss", "admin") and session.csrf
    assert await store.console.session(cookie) == session
    assert await store.console.session(token) is None  # a link is not a session
    assert await store.console.redeem(token, 3600) is None
    db = store.console.db  # type: ignore[attr-defined]
    kept = [r[0] for r in await db.fetch("SELECT token_hash FROM console_links")]
    kept += [r[0] for r in await db.fetch("SELECT token_hash FROM console_sessions")]
    assert token not in kept and cookie not in kept and len(kept) == 2
    assert await store.console.end(cookie)
    assert await store.console.session(cookie) is None
    assert not await store.console.end(cookie)


async def test_an_expired_console_link_or_session_lets_nobody_in(store: Store) -> None:
    token = await store.console.new_link("cli", ttl_s=-1)
    assert await store.console.redeem(token, 3600) is None
    viewer = await store.console.new_link("cli", ttl_s=60, role="viewer")
    opened = await store.console.redeem(viewer, -1)
    assert opened is not None and opened[1].role == "viewer"
    assert await store.console.session(opened[0]) is None  # expired at once


async def test_a_link_is_looked_at_without_being_used_and_removed_owners_are_signed_out(
    store: Store,
) -> None:
    console = store.console
    link = await console.new_link("telegram:1", ttl_s=60)
    assert await console.usable(link) and await console.usable(link)  # a look uses nothing
    assert not await console.usable("A" * 43)
    sessions = {}
    for admin in ("telegram:1", "telegram:2", "discord:3", "cli"):
        opened = await console.redeem(await console.new_link(admin, ttl_s=60), 3600)
        assert opened is not None
        sessions[admin] = opened[0]
    assert await console.redeem(link, 3600) is not None
    assert not await console.usable(link)  # used
    assert await console.end_others(["telegram:1", "discord:3"]) == 1  # telegram:2's
    assert [a for a, t in sessions.items() if await console.session(t)] == [
        "telegram:1",
        "discord:3",
        "cli",
    ]
    assert await console.end_others([]) == 3  # every owner's but the server's own
    assert [a for a, t in sessions.items() if await console.session(t)] == ["cli"]


async def test_the_console_finds_conversations_by_chat_user_and_date(store: Store) -> None:
    ann = await store.conversations.active("t", "c1")
    bob = await store.conversations.active("t", "c2", is_private=False)
    await store.conversations.append(ann.id, Message.user("hello"), user_id="u1")
    await store.conversations.append(
        ann.id, Message.assistant(None, [ToolCall("k1", "fetch", '{"url": "x"}')])
    )
    await store.conversations.append(ann.id, Message.tool_result("k1", "boom", is_error=True))
    await store.conversations.append(ann.id, Message.assistant("done"))
    await store.conversations.append(bob.id, Message.user("hi all", speaker="Bob"), user_id="u2")
    found = await store.browse.conversations()
    assert [c.chat_id for c in found] == ["c2", "c1"]  # the newest activity first
    assert [c.chat_id for c in await store.browse.conversations(chat_id="c1")] == ["c1"]
    assert [c.id for c in await store.browse.conversations(user_id="u2")] == [bob.id]
    now = time.time()
    assert len(await store.browse.conversations(since=now - 60, until=now + 60)) == 2
    assert await store.browse.conversations(since=now - 7200, until=now - 3600) == []
    view = await store.browse.conversation(ann.id)
    assert view is not None and view.messages == 4 and view.is_private and view.active
    assert await store.browse.conversation(10_000) is None
    said = await store.browse.messages(ann.id)
    assert [m.role for m in said] == ["user", "assistant", "tool", "assistant"]
    assert said[1].tool_calls == (("k1", "fetch", '{"url": "x"}'),)
    assert said[2].call_id == "k1" and said[2].is_error and said[0].user_id == "u1"
    activity = await store.browse.activity(now - 3600)
    assert (activity.answers, activity.tool_calls, activity.tool_errors) == (1, 1, 1)
    assert activity.channel_errors == 0
    # errors are counted, not the channels that had one: 3 + 2 now, 5 two hours ago
    await store.ops.record_errors([ChannelError("t", now, "HTTP 403", count=3)])
    await store.ops.record_errors([ChannelError("t", now, "HTTP 403", count=2)])
    await store.ops.record_errors([ChannelError("d", now - 7200, "old", count=5)])
    assert (await store.browse.activity(now - 3600)).channel_errors == 5
    assert (await store.browse.activity(now - 3 * 3600)).channel_errors == 10
    # who wrote there: a private chat's user by the inbox's name, a group's last speaker
    assert [(c.chat_id, c.who) for c in found] == [("c2", "Bob"), ("c1", None)]
    assert await store.inbox.accept(inbound("hello", "m1"))
    assert [c.who for c in await store.browse.conversations(chat_id="c1")] == ["Ann"]
    await store.grants.grant("t", "c2", "shell", "u2", "Bob")
    [grant] = await store.browse.grants()
    assert (grant.chat_id, grant.tool) == ("c2", "shell")
