"""The tool-call loop against the real openai SDK and the fake OpenAI server."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from engine import ConversationKey, Job, JobRunner, Message, OpenAIModel, ToolLoop, TurnContext
from tests.fakes.openai_server import FakeOpenAI, error, text, tool_call, tool_calls
from tools import LLMError, ToolRegistry, ToolResult, tool

KEY = ConversationKey("test", "c1")


_clients: list[OpenAIModel] = []


def make_loop(llm: FakeOpenAI, *tools: Any, retries: int = 0, **options: Any) -> ToolLoop:
    registry = ToolRegistry()
    for t in tools:
        registry.register(t)
    client = OpenAIModel(
        base_url=llm.base_url, api_key="k", model="fake-model", max_retries=retries, timeout_s=5
    )
    _clients.append(client)
    return ToolLoop(client, registry, **options)


@pytest.fixture(autouse=True)
async def _close_clients() -> Any:
    yield
    while _clients:
        await _clients.pop().aclose()


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


async def test_text_reply(llm: FakeOpenAI) -> None:
    llm.script(text("hello there"))
    result = await make_loop(llm).run(USER, ctx())
    assert result.text == "hello there"
    assert [m.role for m in result.messages] == ["assistant"]
    assert "tools" not in llm.requests[0]


async def test_one_safe_tool(llm: FakeOpenAI) -> None:
    llm.script(tool_call("add", {"a": 2, "b": 3}), text("it is 5"))
    result = await make_loop(llm, add).run(USER, ctx())
    assert result.text == "it is 5"
    second = llm.requests[1]["messages"]
    assert second[-1] == {"role": "tool", "content": "5", "tool_call_id": "call_1"}
    assert llm.requests[0]["tools"][0]["function"]["name"] == "add"


async def test_two_safe_tools_overlap(llm: FakeOpenAI) -> None:
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
    results = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in results] == [
        ("call_1", "a"),
        ("call_2", "b"),
    ]


async def test_unknown_tool_goes_back_to_model(llm: FakeOpenAI) -> None:
    llm.script(tool_call("nope", {}), text("sorry"))
    result = await make_loop(llm, add).run(USER, ctx())
    assert result.text == "sorry"
    err = llm.requests[1]["messages"][-1]["content"]
    assert "Unknown tool 'nope'" in err and "add" in err


async def test_non_json_arguments_are_explained_and_stored_valid(llm: FakeOpenAI) -> None:
    llm.script(tool_call("add", '{"a": 1, "b": '), text("oops"))
    result = await make_loop(llm, add).run(USER, ctx())
    err = llm.requests[1]["messages"][-1]["content"]
    assert "not valid JSON" in err and '{"a": 1, "b":' in err
    stored = result.messages[0].tool_calls[0].arguments
    assert json.loads(stored) == {"invalid_json": '{"a": 1, "b":'}
    sent = llm.requests[1]["messages"][-2]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(sent)["invalid_json"]


async def test_empty_arguments_count_as_empty_object(llm: FakeOpenAI) -> None:
    @tool
    async def ping() -> str:
        return "pong"

    llm.script(tool_call("ping", ""), text("done"))
    await make_loop(llm, ping).run(USER, ctx())
    assert llm.requests[1]["messages"][-1]["content"] == "pong"


async def test_invalid_arguments_name_each_field(llm: FakeOpenAI) -> None:
    llm.script(tool_call("add", {"a": "x"}), text("fixed"))
    await make_loop(llm, add).run(USER, ctx())
    err = llm.requests[1]["messages"][-1]["content"]
    assert "Invalid arguments for 'add'" in err
    assert "a: Input should be a valid integer" in err and "b: Field required" in err


async def test_tool_exception_is_terminal_and_reported(llm: FakeOpenAI) -> None:
    @tool
    async def broken() -> str:
        raise ValueError("disk on fire")

    llm.script(tool_call("broken", {}), text("it broke"))
    result = await make_loop(llm, broken).run(USER, ctx())
    assert result.text == "it broke"
    err = llm.requests[1]["messages"][-1]["content"]
    assert err == "Tool 'broken' failed: ValueError: disk on fire"
    assert "Traceback" not in err


async def test_tool_timeout(llm: FakeOpenAI) -> None:
    never = asyncio.Event()

    @tool(timeout_s=0.05)
    async def stuck() -> str:
        await never.wait()
        return "never"

    llm.script(tool_call("stuck", {}), text("timed out"))
    await make_loop(llm, stuck).run(USER, ctx())
    assert "timed out after 0.05 s" in llm.requests[1]["messages"][-1]["content"]


async def test_destructive_halts_then_approve_runs_it_and_the_rest(llm: FakeOpenAI) -> None:
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
    results = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert [r["content"] for r in results] == ["2", "deleted x", "4"]


async def test_destructive_declined_records_refusal(llm: FakeOpenAI) -> None:
    llm.script(tool_call("delete_item", {"name": "x"}), text("ok, kept it"))
    loop = make_loop(llm, delete_item)
    first = await loop.run(USER, ctx())
    assert first.pending is not None
    second = await loop.resume([*USER, *first.messages], first.pending, False, ctx())
    assert deleted == [] and second.text == "ok, kept it"
    assert "declined" in llm.requests[1]["messages"][-1]["content"]


async def test_destructive_expired_never_runs(llm: FakeOpenAI) -> None:
    llm.script(tool_call("delete_item", {"name": "x"}), text("expired"))
    loop = make_loop(llm, delete_item, confirmation_timeout_s=0.0)
    first = await loop.run(USER, ctx())
    assert first.pending is not None and first.pending.expires_at <= time.time()
    await loop.resume(
        [*USER, *first.messages], first.pending, False, ctx(), reason="expired: not confirmed"
    )
    assert deleted == []
    assert llm.requests[1]["messages"][-1]["content"] == "expired: not confirmed"


async def test_destructive_with_invalid_arguments_asks_nobody(llm: FakeOpenAI) -> None:
    llm.script(tool_call("delete_item", {"nam": "x"}), text("fixed"))
    result = await make_loop(llm, delete_item).run(USER, ctx())
    assert result.pending is None and result.text == "fixed"
    assert "Invalid arguments" in llm.requests[1]["messages"][-1]["content"]


async def test_background_job_reports_through_callback(llm: FakeOpenAI) -> None:
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
    client = OpenAIModel(base_url=llm.base_url, api_key="k", model="fake-model", max_retries=0)
    _clients.append(client)
    loop = ToolLoop(client, registry, jobs=JobRunner(registry, on_done))
    llm.script(tool_call("slow_report", {"topic": "sales"}), text("started it"))
    result = await loop.run(USER, ctx())
    assert result.text == "started it"
    started = llm.requests[1]["messages"][-1]["content"]
    assert "Started in the background" in started
    job_id = started.split("job id ")[1].split(".")[0]
    assert done.empty()
    release.set()
    key, got_id, job_result = await asyncio.wait_for(done.get(), 5)
    assert (key, got_id, job_result.for_llm) == (KEY, job_id, "report on sales")


async def test_iteration_bound_sums_up_without_tools(llm: FakeOpenAI) -> None:
    llm.default = lambda body: (
        tool_call("add", {"a": 1, "b": 1}) if body.get("tools") else text("summary")
    )
    result = await make_loop(llm, add, max_iterations=3).run(USER, ctx())
    assert result.text == "summary"
    assert len(llm.requests) == 4 and "tools" not in llm.requests[-1]
    system = llm.requests[-1]["messages"][0]
    assert system["role"] == "system" and "used all the tool calls" in system["content"]


async def test_length_cut_calls_are_not_executed(llm: FakeOpenAI) -> None:
    llm.script(tool_call("delete_item", {"name": "x"}, finish_reason="length"), text("retrying"))
    result = await make_loop(llm, delete_item).run(USER, ctx())
    assert result.pending is None and deleted == []
    assert "cut off by the length limit" in llm.requests[1]["messages"][-1]["content"]


async def test_empty_reply_gets_fallback(llm: FakeOpenAI) -> None:
    llm.script(text(""))
    result = await make_loop(llm).run(USER, ctx())
    assert result.text and "rephrase" in result.text


async def test_tool_output_truncated_with_marker(llm: FakeOpenAI) -> None:
    @tool
    async def big() -> str:
        return "x" * 50_000

    llm.script(tool_call("big", {}), text("ok"))
    await make_loop(llm, big, max_output_chars=1000).run(USER, ctx())
    content = llm.requests[1]["messages"][-1]["content"]
    assert content.startswith("x" * 1000) and "[truncated: 49000 more characters]" in content


async def test_governor_stops_repeated_identical_failures(llm: FakeOpenAI) -> None:
    @tool
    async def flaky(n: int) -> str:
        raise RuntimeError("backend down")

    llm.default = lambda body: tool_call("flaky", {"n": 1})
    result = await make_loop(llm, flaky, retry_budget=10).run(USER, ctx())
    assert len(llm.requests) == 3
    assert result.text is not None and "kept failing" in result.text
    assert "backend down" in result.text


async def test_retry_budget_makes_errors_terminal(llm: FakeOpenAI) -> None:
    calls = iter(range(100))
    llm.default = lambda body: (
        tool_call("add", {"a": "bad", "b": next(calls)}) if body.get("tools") else text("gave up")
    )
    await make_loop(llm, add, retry_budget=2, max_iterations=4).run(USER, ctx())
    contents = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert "Retry limit reached" in contents[1]
    assert "do not call it again" in contents[2]


async def test_streaming_gives_same_transcript(llm: FakeOpenAI) -> None:
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


async def test_server_error_is_retried_by_the_sdk(llm: FakeOpenAI) -> None:
    llm.script(error(500, "boom"), text("recovered"))
    result = await make_loop(llm, retries=2).run(USER, ctx())
    assert result.text == "recovered" and len(llm.requests) == 2


async def test_server_error_forever_is_a_clear_error(llm: FakeOpenAI) -> None:
    llm.default = lambda body: error(500, "model overloaded")
    loop = make_loop(llm, retries=1)
    with pytest.raises(LLMError, match="500: model overloaded"):
        await asyncio.wait_for(loop.run(USER, ctx()), 30)
    assert len(llm.requests) == 2  # one try plus the configured retry, no more


async def test_history_pairing_is_repaired_before_sending(llm: FakeOpenAI) -> None:
    from engine import ToolCall

    broken = [
        Message.user("hi"),
        Message.assistant(None, [ToolCall("c9", "add", "{}")]),
        Message.user("again"),
    ]
    llm.script(text("fine"))
    await make_loop(llm, add).run(broken, ctx())
    sent = llm.requests[0]["messages"]
    assert sent[2] == {
        "role": "tool",
        "content": "No result was recorded for this call.",
        "tool_call_id": "c9",
    }


async def test_a_streamed_request_is_retried_by_the_sdk_only(llm: FakeOpenAI) -> None:
    """The SDK retries a failed streamed request itself; relaybot adds no retries around it
    (it used to wrap them: an endpoint answering 500 received 9 requests instead of 3)."""
    llm.default = lambda body: error(500, "down")
    loop = make_loop(llm, retries=2, stream=True)
    with pytest.raises(LLMError):
        await asyncio.wait_for(loop.run(USER, ctx()), 30)
    assert len(llm.requests) == 3
