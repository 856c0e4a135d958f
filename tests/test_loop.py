"""The tool-call loop, each case run on every model backend: the OpenAI provider against the
fake OpenAI server, the Anthropic provider against the fake Anthropic server (both through their
real SDKs), and the in-process ScriptedModel. The script and the assertions are neutral
(tests/fakes/models.py reads each provider's requests back); a case that needs an SDK (its
retries, its streaming in pieces) runs on the HTTP backends only."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from engine.context._prompt import NO_RESULT
from engine.loop import ConversationKey, Job, JobRunner, ToolLoop, TurnContext
from engine.models import Message
from tests.fakes.models import BACKENDS, Backend, backend
from tests.fakes.openai_server import error, text, tool_call, tool_calls
from tools import ToolResult, tool
from tools.errors import LLMError, ModelUnavailable, StoreUnavailable
from tools.registry import ToolRegistry

KEY = ConversationKey("test", "c1")


@pytest.fixture(params=BACKENDS)
async def llm(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    async with backend(request.param) as b:
        yield b


def http_only(llm: Backend) -> None:
    if llm.server is None:
        pytest.skip("the SDK's own behaviour: no SDK behind the scripted model")


def make_loop(llm: Backend, *tools: Any, retries: int = 0, **options: Any) -> ToolLoop:
    registry = ToolRegistry()
    for t in tools:
        registry.register(t)
    return ToolLoop(llm.model(retries), registry, **options)


def ctx(**kw: Any) -> TurnContext:
    return TurnContext(KEY, "u1", "Alice", **kw)


USER = [Message.user("hi")]


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(destructive=True)
async def delete_item(name: str) -> str:
    """Delete an item."""
    deleted.append(name)
    return f"deleted {name}"


deleted: list[str] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    deleted.clear()


async def test_text_reply(llm: Backend) -> None:
    llm.script(text("hello there"))
    result = await make_loop(llm).run(USER, ctx())
    assert result.text == "hello there"
    assert [m.role for m in result.messages] == ["assistant"]
    assert llm.sent[0].tools == []


async def test_one_safe_tool(llm: Backend) -> None:
    llm.script(tool_call("add", {"a": 2, "b": 3}), text("it is 5"))
    result = await make_loop(llm, add).run(USER, ctx())
    assert result.text == "it is 5"
    second = llm.sent[1]
    assert second.last_result == "5"
    assert second.results[-1].call_id == second.calls[-1].id  # the result answers the call
    call = second.calls[-1]
    assert call.name == "add" and json.loads(call.arguments) == {"a": 2, "b": 3}
    assert llm.sent[0].tools == ["add"]


async def test_two_safe_tools_overlap(llm: Backend) -> None:
    a_started, b_started = asyncio.Event(), asyncio.Event()

    @tool
    async def slow_a() -> str:
        a_started.set()
        await asyncio.wait_for(b_started.wait(), 5)  # only returns if b runs meanwhile
        return "a"

    @tool
    async def slow_b() -> str:
        b_started.set()
        await asyncio.wait_for(a_started.wait(), 5)
        return "b"

    llm.script(tool_calls([("slow_a", {}), ("slow_b", {})]), text("both"))
    result = await make_loop(llm, slow_a, slow_b).run(USER, ctx())
    assert result.text == "both"
    second = llm.sent[1]
    calls = {c.id: c.name for c in second.calls}
    results = [(calls[r.call_id], r.text) for r in second.results]
    assert results == [("slow_a", "a"), ("slow_b", "b")]


async def test_unknown_tool_goes_back_to_model(llm: Backend) -> None:
    llm.script(tool_call("nope", {}), text("sorry"))
    result = await make_loop(llm, add).run(USER, ctx())
    assert result.text == "sorry"
    err = llm.sent[1].last_result
    assert "Unknown tool 'nope'" in err and "add" in err


async def test_non_json_arguments_are_explained_and_stored_valid(llm: Backend) -> None:
    if llm.name == "anthropic":
        pytest.skip("the Messages API gives tool input as a JSON object, never as text")
    llm.script(tool_call("add", '{"a": 1, "b": '), text("oops"))
    result = await make_loop(llm, add).run(USER, ctx())
    err = llm.sent[1].last_result
    assert "not valid JSON" in err and '{"a": 1, "b":' in err
    stored = result.messages[0].tool_calls[0].arguments
    assert json.loads(stored) == {"invalid_json": '{"a": 1, "b":'}
    sent = llm.sent[1].calls[-1].arguments
    assert json.loads(sent)["invalid_json"]


async def test_empty_arguments_count_as_empty_object(llm: Backend) -> None:
    @tool
    async def ping() -> str:
        return "pong"

    llm.script(tool_call("ping", ""), text("done"))
    await make_loop(llm, ping).run(USER, ctx())
    assert llm.sent[1].last_result == "pong"


async def test_invalid_arguments_name_each_field(llm: Backend) -> None:
    llm.script(tool_call("add", {"a": "x"}), text("fixed"))
    await make_loop(llm, add).run(USER, ctx())
    err = llm.sent[1].last_result
    assert "Invalid arguments for 'add'" in err
    assert "a: Input should be a valid integer" in err and "b: Field required" in err


async def test_tool_exception_is_terminal_and_reported(llm: Backend) -> None:
    @tool
    async def broken() -> str:
        raise ValueError("disk on fire")

    llm.script(tool_call("broken", {}), text("it broke"))
    result = await make_loop(llm, broken).run(USER, ctx())
    assert result.text == "it broke"
    err = llm.sent[1].results[-1]
    assert err.text == "Tool 'broken' failed: ValueError: disk on fire"
    assert "Traceback" not in err.text
    assert err.is_error or llm.name == "openai"  # chat completions has no error flag


async def test_tool_timeout(llm: Backend) -> None:
    never = asyncio.Event()

    @tool(timeout_s=0.05)
    async def stuck() -> str:
        await never.wait()
        return "never"

    llm.script(tool_call("stuck", {}), text("timed out"))
    await make_loop(llm, stuck).run(USER, ctx())
    assert "timed out after 0.05 s" in llm.sent[1].last_result


async def test_destructive_halts_then_approve_runs_it_and_the_rest(llm: Backend) -> None:
    llm.script(
        tool_calls(
            [("add", {"a": 1, "b": 1}), ("delete_item", {"name": "x"}), ("add", {"a": 2, "b": 2})]
        ),
        text("deleted x"),
    )
    loop = make_loop(llm, add, delete_item)
    first = await loop.run(USER, ctx())
    assert first.text is None and first.pending is not None
    pending = first.pending
    assert pending.tool == "delete_item" and pending.args == {"name": "x"}
    assert pending.user_id == "u1" and 290 < pending.expires_at - time.time() <= 300
    assert [c.name for c in pending.remaining] == ["add"]
    assert deleted == []  # nothing destructive ran before the user said yes
    assert [m.role for m in first.messages] == ["assistant", "tool"]  # the safe call before it ran

    history = [*USER, *first.messages]
    second = await loop.resume(history, pending, True, ctx())
    assert deleted == ["x"]
    assert second.text == "deleted x"
    assert [r.text for r in llm.sent[1].results] == ["2", "deleted x", "4"]


async def test_an_approved_call_that_ran_already_is_recorded_not_run_again(llm: Backend) -> None:
    """`ran` hears the approved call's result before anything records it; resumed again with
    that result as `known` (its turn was cut off after it ran), it is recorded, not run."""
    llm.script(tool_call("delete_item", {"name": "x"}), text("deleted x"))
    loop = make_loop(llm, delete_item)
    first = await loop.run(USER, ctx())
    assert first.pending is not None
    heard: list[ToolResult] = []

    async def refused(msg: Message) -> None:
        raise StoreUnavailable("the disk is full")

    history = [*USER, *first.messages]
    with pytest.raises(StoreUnavailable):
        await loop.resume(history, first.pending, True, ctx(), record=refused, ran=heard.append)
    assert deleted == ["x"] and [r.for_llm for r in heard] == ["deleted x"]
    again = await loop.resume(history, first.pending, True, ctx(), known=heard[0])
    assert deleted == ["x"] and again.text == "deleted x" and again.approved is heard[0]
    assert llm.sent[-1].last_result == "deleted x"


async def test_destructive_declined_records_refusal(llm: Backend) -> None:
    llm.script(tool_call("delete_item", {"name": "x"}), text("ok, kept it"))
    loop = make_loop(llm, delete_item)
    first = await loop.run(USER, ctx())
    assert first.pending is not None
    second = await loop.resume([*USER, *first.messages], first.pending, False, ctx())
    assert deleted == [] and second.text == "ok, kept it"
    assert "declined" in llm.sent[1].last_result


async def test_destructive_expired_never_runs(llm: Backend) -> None:
    llm.script(tool_call("delete_item", {"name": "x"}), text("expired"))
    loop = make_loop(llm, delete_item, confirmation_timeout_s=0.0)
    first = await loop.run(USER, ctx())
    assert first.pending is not None and first.pending.expires_at <= time.time()
    await loop.resume(
        [*USER, *first.messages], first.pending, False, ctx(), reason="expired: not confirmed"
    )
    assert deleted == []
    assert llm.sent[1].last_result == "expired: not confirmed"


async def test_destructive_with_invalid_arguments_asks_nobody(llm: Backend) -> None:
    llm.script(tool_call("delete_item", {"nam": "x"}), text("fixed"))
    result = await make_loop(llm, delete_item).run(USER, ctx())
    assert result.pending is None and result.text == "fixed"
    assert "Invalid arguments" in llm.sent[1].last_result


async def test_background_job_reports_through_callback(llm: Backend) -> None:
    release = asyncio.Event()
    done: asyncio.Queue[tuple[ConversationKey, str, ToolResult]] = asyncio.Queue()

    @tool(background=True)
    async def slow_report(topic: str) -> str:
        await release.wait()
        return f"report on {topic}"

    async def on_done(job: Job, result: ToolResult) -> None:
        await done.put((job.key, job.id, result))

    registry = ToolRegistry()
    registry.register(slow_report)
    loop = ToolLoop(llm.model(), registry, jobs=JobRunner(registry, on_done))
    llm.script(tool_call("slow_report", {"topic": "sales"}), text("started it"))
    result = await loop.run(USER, ctx())
    assert result.text == "started it"
    started = llm.sent[1].last_result
    assert "Started in the background" in started
    job_id = started.split("job id ")[1].split(".")[0]
    assert done.empty()
    release.set()
    key, got_id, job_result = await asyncio.wait_for(done.get(), 5)
    assert (key, got_id, job_result.for_llm) == (KEY, job_id, "report on sales")


async def test_iteration_bound_sums_up_without_tools(llm: Backend) -> None:
    llm.default = lambda sent: tool_call("add", {"a": 1, "b": 1}) if sent.tools else text("summary")
    result = await make_loop(llm, add, max_iterations=3).run(USER, ctx())
    assert result.text == "summary"
    last = llm.sent[-1]
    assert len(llm.sent) == 4 and last.tools == []
    assert "used all the tool calls" in last.system
    assert [r.text for r in last.results] == ["2", "2", "2"]  # the work so far goes along


async def test_length_cut_calls_are_not_executed(llm: Backend) -> None:
    llm.script(tool_call("delete_item", {"name": "x"}, finish_reason="length"), text("retrying"))
    result = await make_loop(llm, delete_item).run(USER, ctx())
    assert result.pending is None and deleted == []
    assert "cut off by the length limit" in llm.sent[1].last_result


async def test_empty_reply_gets_fallback(llm: Backend) -> None:
    llm.script(text(""))
    result = await make_loop(llm).run(USER, ctx())
    assert result.text and "rephrase" in result.text


async def test_tool_output_truncated_with_marker(llm: Backend) -> None:
    @tool
    async def big() -> str:
        return "x" * 50_000

    llm.script(tool_call("big", {}), text("ok"))
    await make_loop(llm, big, max_output_chars=1000).run(USER, ctx())
    content = llm.sent[1].last_result
    assert content.startswith("x" * 1000) and "[truncated: 49000 more characters]" in content


async def test_governor_stops_repeated_identical_failures(llm: Backend) -> None:
    @tool
    async def flaky(n: int) -> str:
        raise RuntimeError("backend down")

    llm.default = lambda sent: tool_call("flaky", {"n": 1})
    result = await make_loop(llm, flaky, retry_budget=10).run(USER, ctx())
    assert len(llm.sent) == 3
    assert result.text is not None and "kept failing" in result.text
    assert "backend down" in result.text


async def test_retry_budget_makes_errors_terminal(llm: Backend) -> None:
    calls = iter(range(100))
    llm.default = lambda sent: (
        tool_call("add", {"a": "bad", "b": next(calls)}) if sent.tools else text("gave up")
    )
    await make_loop(llm, add, retry_budget=2, max_iterations=4).run(USER, ctx())
    contents = [r.text for r in llm.sent[-1].results]
    assert "Retry limit reached" in contents[1]
    assert "do not call it again" in contents[2]


async def test_streaming_gives_same_transcript(llm: Backend) -> None:
    http_only(llm)
    script = [
        tool_calls([("add", {"a": 10, "b": 20}), ("add", {"a": 1, "b": 2})], content="Let me add"),
        text("The sums are 30 and 3."),
    ]
    llm.script(*script)
    plain = await make_loop(llm, add).run(USER, ctx())
    deltas: list[str] = []
    llm.script(*script)
    streamed = await make_loop(llm, add, stream=True).run(USER, ctx(on_text=deltas.append))

    def shape(msgs: list[Message]) -> list[Any]:
        return [
            (m.role, m.text, [(c.name, json.loads(c.arguments)) for c in m.tool_calls])
            for m in msgs
        ]

    assert shape(streamed.messages) == shape(plain.messages)
    assert "".join(deltas) == "Let me add" + "The sums are 30 and 3."
    assert len(deltas) > 3  # really streamed in pieces


async def test_server_error_is_retried_by_the_sdk(llm: Backend) -> None:
    http_only(llm)
    llm.script(error(500, "boom"), text("recovered"))
    result = await make_loop(llm, retries=2).run(USER, ctx())
    assert result.text == "recovered" and len(llm.sent) == 2


async def test_server_error_forever_is_a_clear_error(llm: Backend) -> None:
    llm.default = lambda sent: error(500, "model overloaded")
    loop = make_loop(llm, retries=1)
    with pytest.raises(ModelUnavailable, match=r"500\b.*: model overloaded"):
        await asyncio.wait_for(loop.run(USER, ctx()), 30)
    tries = 1 if llm.server is None else 2  # one try plus the SDK's configured retry, no more
    assert len(llm.sent) == tries


async def test_history_pairing_is_repaired_before_sending(llm: Backend) -> None:
    from engine import ToolCall

    broken = [
        Message.user("hi"),
        Message.assistant(None, [ToolCall("c9", "add", "{}")]),
        Message.user("again"),
    ]
    llm.script(text("fine"))
    await make_loop(llm, add).run(broken, ctx())
    sent = llm.sent[0]
    assert [(r.call_id, r.text) for r in sent.results] == [("c9", NO_RESULT)]
    assert sent.messages[-1].text == "again"


async def test_a_repaired_history_is_logged_once_not_with_every_turn(
    llm: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """The same broken history goes out with every later turn of the chat: one ERROR for it
    (the fault soak counted 28 to 149 per run), and one more for a new break."""
    from engine import ToolCall

    def broken(call_id: str) -> list[Message]:
        return [Message.assistant(None, [ToolCall(call_id, "add", "{}")]), Message.user("hi")]

    first, second = (f"c{secrets.token_hex(4)}" for _ in range(2))
    llm.script(*(text("fine") for _ in range(4)))
    loop = make_loop(llm, add)
    for history in (broken(first), broken(first), broken(first), broken(first) + broken(second)):
        await loop.run(history, ctx())
    said = [r for r in caplog.records if "broke the tool-call pairing" in r.getMessage()]
    assert [r.levelno for r in said] == [logging.ERROR, logging.ERROR]
    assert all(sent.results[0].text == NO_RESULT for sent in llm.sent)  # still repaired


async def test_a_streamed_request_is_retried_by_the_sdk_only(llm: Backend) -> None:
    """The SDK retries a failed streamed request itself; relaybot adds no retries around it
    (it used to wrap them: an endpoint answering 500 received 9 requests instead of 3)."""
    http_only(llm)
    llm.default = lambda sent: error(500, "down", headers={"retry-after-ms": "1"})
    loop = make_loop(llm, retries=2, stream=True)
    with pytest.raises(LLMError):
        await asyncio.wait_for(loop.run(USER, ctx()), 30)
    assert len(llm.sent) == 3
