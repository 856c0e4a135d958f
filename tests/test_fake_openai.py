"""Checks the fake OpenAI server against the real openai SDK."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import aiohttp
import openai
import pytest

from tests.fakes.media import png
from tests.fakes.openai_server import (
    FakeOpenAI,
    error,
    hold,
    images_in,
    text,
    tool_call,
    tool_calls,
)

MSGS = [{"role": "user", "content": "hello there"}]


@pytest.fixture
async def llm():
    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def client(llm: FakeOpenAI):
    c = openai.AsyncOpenAI(base_url=llm.base_url, api_key="test", max_retries=0)
    yield c
    await c.close()


async def ask(client: openai.AsyncOpenAI, content: str = "hello there", **kw: Any):
    return await client.chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": content}], **kw
    )


async def stream_and_assemble(client: openai.AsyncOpenAI, **kw: Any) -> dict[str, Any]:
    """Reassemble a streamed reply the way a client must: content concatenated, tool calls
    merged by index."""
    stream = await client.chat.completions.create(
        model="fake-model", messages=MSGS, stream=True, **kw
    )
    content = ""
    calls: dict[int, dict[str, str]] = {}
    finish = None
    usage = None
    n_content_deltas = 0
    roles = []
    async for chunk in stream:
        assert chunk.object == "chat.completion.chunk"
        if chunk.usage is not None:
            usage = chunk.usage
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        delta = choice.delta
        if delta.role:
            roles.append(delta.role)
        if delta.content:
            content += delta.content
            n_content_deltas += 1
        for tc in delta.tool_calls or []:
            slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
            if tc.id:
                assert not slot["id"], "id sent twice for one index"
                slot["id"] = tc.id
            if tc.function and tc.function.name:
                slot["name"] += tc.function.name
            if tc.function and tc.function.arguments:
                slot["arguments"] += tc.function.arguments
        if choice.finish_reason:
            finish = choice.finish_reason
    return {
        "content": content,
        "calls": [calls[i] for i in sorted(calls)],
        "finish": finish,
        "usage": usage,
        "n_content_deltas": n_content_deltas,
        "roles": roles,
    }


async def test_text_reply(llm: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    llm.script(text("hi"))
    resp = await ask(client, temperature=0.5)
    assert resp.object == "chat.completion"
    assert resp.model == "fake-model"
    assert resp.choices[0].message.role == "assistant"
    assert resp.choices[0].message.content == "hi"
    assert resp.choices[0].message.tool_calls is None
    assert resp.choices[0].finish_reason == "stop"
    assert resp.usage is not None and resp.usage.total_tokens > 0
    assert llm.requests == [
        {"model": "fake-model", "messages": MSGS, "temperature": 0.5},
    ]
    assert llm.auth_headers == ["Bearer test"]
    assert llm.remaining == 0


async def test_default_echo_and_finish_reason(llm: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    llm.script(text("cut", finish_reason="length"))
    first = await ask(client)
    assert first.choices[0].finish_reason == "length"
    second = await ask(client, "ping")
    assert second.choices[0].message.content == "echo: ping"


async def test_tool_call_reply(llm: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    llm.script(
        tool_call("add", {"a": 1, "b": 2}),
        tool_call("add", "{not json", id="call_custom", content="thinking"),
        tool_calls([("a", {}), ("b", {"x": [1]})]),
    )
    r1 = await ask(client)
    msg = r1.choices[0].message
    assert r1.choices[0].finish_reason == "tool_calls"
    assert msg.content is None
    assert len(msg.tool_calls) == 1
    call = msg.tool_calls[0]
    assert call.type == "function"
    assert call.id == "call_1"
    assert call.function.name == "add"
    assert json.loads(call.function.arguments) == {"a": 1, "b": 2}

    r2 = await ask(client)
    msg = r2.choices[0].message
    assert msg.content == "thinking"
    assert msg.tool_calls[0].id == "call_custom"
    assert msg.tool_calls[0].function.arguments == "{not json"

    r3 = await ask(client)
    calls = r3.choices[0].message.tool_calls
    assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [
        ("call_2", "a", "{}"),
        ("call_3", "b", '{"x": [1]}'),
    ]


async def test_reply_fn_sync_and_async(llm: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    def decide(body: dict[str, Any]):
        if body["messages"][-1]["role"] == "user":
            return tool_call("lookup", {"q": body["messages"][-1]["content"]})
        return text("final")

    async def later(body: dict[str, Any]):
        return text(f"{len(body['messages'])} messages")

    llm.default = decide
    r1 = await ask(client, "cats")
    assert r1.choices[0].message.tool_calls[0].function.arguments == '{"q": "cats"}'
    r2 = await client.chat.completions.create(
        model="fake-model",
        messages=[
            *MSGS,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "x", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c", "content": "42"},
        ],
    )
    assert r2.choices[0].message.content == "final"

    llm.script(later)
    r3 = await ask(client)
    assert r3.choices[0].message.content == "1 messages"


async def test_stream_text(llm: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    sentence = "The quick brown fox jumps over the lazy dog."
    llm.script(text(sentence))
    out = await stream_and_assemble(client)
    assert out["content"] == sentence
    assert out["n_content_deltas"] > 3
    assert out["roles"] == ["assistant"]
    assert out["finish"] == "stop"
    assert out["calls"] == []
    assert out["usage"] is None
    assert llm.requests[0]["stream"] is True


async def test_stream_usage_chunk(llm: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    llm.script(
        text("counted", usage={"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9})
    )
    out = await stream_and_assemble(client, stream_options={"include_usage": True})
    assert out["content"] == "counted"
    assert out["usage"].prompt_tokens == 7
    assert out["usage"].total_tokens == 9


async def test_stream_tool_calls(llm: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    args_a = {"city": "Paris", "units": "metric", "days": [1, 2, 3]}
    llm.script(
        tool_calls(
            [("weather", args_a), ("add", '{"a": 1, "b": 2}'), ("noargs", {})],
            content="Let me check.",
        )
    )
    out = await stream_and_assemble(client)
    assert out["content"] == "Let me check."
    assert out["finish"] == "tool_calls"
    assert [c["name"] for c in out["calls"]] == ["weather", "add", "noargs"]
    assert [c["id"] for c in out["calls"]] == ["call_1", "call_2", "call_3"]
    assert json.loads(out["calls"][0]["arguments"]) == args_a
    assert out["calls"][1]["arguments"] == '{"a": 1, "b": 2}'
    assert out["calls"][2]["arguments"] == "{}"


async def test_stream_wire_format(llm: FakeOpenAI) -> None:
    """The raw SSE shape: role chunk, header delta per tool call, small argument fragments,
    empty final delta, usage chunk, [DONE]."""
    llm.script(tool_call("add", {"a": 1, "b": 2}))
    body = {
        "model": "fake-model",
        "messages": MSGS,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{llm.base_url}/chat/completions", json=body) as resp,
    ):
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        raw = await resp.text()
    events = raw.split("\n\n")
    assert events[-1] == ""
    assert events[-2] == "data: [DONE]"
    chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-2]]
    assert {c["id"] for c in chunks} == {chunks[0]["id"]}
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    head = chunks[1]["choices"][0]["delta"]["tool_calls"][0]
    assert head == {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "add", "arguments": ""},
    }
    frags = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks[2:-2]]
    assert len(frags) > 1
    assert all(
        set(f) == {"index", "function"} and set(f["function"]) == {"arguments"} for f in frags
    )
    assert "".join(f["function"]["arguments"] for f in frags) == '{"a": 1, "b": 2}'
    final = chunks[-2]
    assert final["choices"][0]["delta"] == {}
    assert final["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["total_tokens"] > 0


async def test_error_500(llm: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    llm.script(error(500, "boom"), error(500, "boom again"), error(429, "slow down"))
    with pytest.raises(openai.InternalServerError) as exc_info:
        await ask(client)
    assert exc_info.value.status_code == 500
    assert "boom" in exc_info.value.message
    assert exc_info.value.body["message"] == "boom"

    with pytest.raises(openai.InternalServerError):
        await client.chat.completions.create(model="fake-model", messages=MSGS, stream=True)

    with pytest.raises(openai.RateLimitError):
        await ask(client)
    assert len(llm.requests) == 3  # max_retries=0: no retries happened


async def test_hold_waits_for_event(llm: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    release = asyncio.Event()
    reached = asyncio.Event()
    llm.script(hold(release, text("released"), started=reached))
    task = asyncio.create_task(ask(client))
    requests = await llm.wait_requests(1)
    assert requests[0]["messages"] == MSGS
    await reached.wait()
    assert not task.done()
    release.set()
    resp = await task
    assert resp.choices[0].message.content == "released"


async def test_hold_overlap_and_order(llm: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    """Two requests in flight at once; the second one is released first."""
    first_ev, second_ev = asyncio.Event(), asyncio.Event()
    llm.script(hold(first_ev, text("one")), hold(second_ev, text("two")))
    done: list[str] = []

    async def run(content: str) -> None:
        resp = await ask(client, content)
        done.append(resp.choices[0].message.content)

    t1 = asyncio.create_task(run("a"))
    await llm.wait_requests(1)
    t2 = asyncio.create_task(run("b"))
    await llm.wait_requests(2)
    second_ev.set()
    await t2
    assert done == ["two"]
    assert not t1.done()
    first_ev.set()
    await t1
    assert done == ["two", "one"]


async def test_wait_requests_timeout(llm: FakeOpenAI) -> None:
    with pytest.raises(TimeoutError):
        await llm.wait_requests(1, timeout=0.05)


async def test_models(llm: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    llm.models.append("other-model")
    page = await client.models.list()
    assert [m.id for m in page.data] == ["fake-model", "other-model"]
    model = await client.models.retrieve("fake-model")
    assert model.id == "fake-model"
    with pytest.raises(openai.NotFoundError) as exc_info:
        await client.models.retrieve("nope")
    assert exc_info.value.body["code"] == "model_not_found"


async def test_api_key_checked() -> None:
    async with FakeOpenAI(api_key="right") as llm:
        bad = openai.AsyncOpenAI(base_url=llm.base_url, api_key="wrong", max_retries=0)
        good = openai.AsyncOpenAI(base_url=llm.base_url, api_key="right", max_retries=0)
        async with bad, good:
            with pytest.raises(openai.AuthenticationError):
                await ask(bad)
            with pytest.raises(openai.AuthenticationError):
                await bad.models.list()
            resp = await ask(good, "ok")
            assert resp.choices[0].message.content == "echo: ok"
        assert llm.auth_headers == ["Bearer wrong", "Bearer wrong", "Bearer right"]
        assert len(llm.requests) == 1  # rejected requests are not recorded


async def test_delay(client: openai.AsyncOpenAI, llm: FakeOpenAI) -> None:
    llm.delay_s = 0.1
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await ask(client)
    assert loop.time() - t0 >= 0.1


async def test_many_concurrent_requests(llm: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    results = await asyncio.gather(*(ask(client, str(i)) for i in range(50)))
    assert sorted(r.choices[0].message.content for r in results) == sorted(
        f"echo: {i}" for i in range(50)
    )
    assert len(llm.requests) == 50


async def test_stop_with_unreleased_hold_does_not_hang() -> None:
    async with FakeOpenAI() as llm:
        client = openai.AsyncOpenAI(base_url=llm.base_url, api_key="test", max_retries=0)
        llm.script(hold(asyncio.Event(), text("never")))
        task = asyncio.create_task(ask(client))
        await llm.wait_requests(1)
    with pytest.raises(openai.InternalServerError):  # 503 "shutting down"
        await task
    await client.close()


# ---- images and transcriptions, as the SDK sends them


def picture_message(url: str) -> list[dict[str, Any]]:
    parts = [
        {"type": "text", "text": "what is it?"},
        {"type": "image_url", "image_url": {"url": url}},
    ]
    return [{"role": "user", "content": parts}]


async def test_image_parts_are_accepted_only_when_valid(
    llm: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    picture = png("fake-check")
    good = "data:image/png;base64," + base64.b64encode(picture).decode()
    reply = await client.chat.completions.create(model="fake-model", messages=picture_message(good))
    assert reply.choices[0].message.content == "echo: what is it?"
    assert images_in(llm.requests[0]) == [("image/png", picture)]

    not_png = "data:image/png;base64," + base64.b64encode(b"GIF89a....").decode()
    for url in ("data:image/png;base64,%%%", not_png, "data:image/bmp;base64,Qk0="):
        with pytest.raises(openai.BadRequestError):
            await client.chat.completions.create(model="fake-model", messages=picture_message(url))

    llm.vision = False  # a model that cannot see refuses any image
    with pytest.raises(openai.BadRequestError, match="only supported by certain models"):
        await client.chat.completions.create(model="fake-model", messages=picture_message(good))


async def test_audio_transcriptions_answer_as_scripted(
    llm: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    llm.script_transcription("hello there", error(500, "decoder crashed"))
    audio = b"OggS" + b"\0" * 100
    done = await client.audio.transcriptions.create(
        model="whisper-1", file=("note.ogg", audio, "audio/ogg")
    )
    assert done.text == "hello there"
    with pytest.raises(openai.InternalServerError):
        await client.audio.transcriptions.create(model="whisper-1", file=("b.ogg", audio))
    default = await client.audio.transcriptions.create(model="whisper-1", file=("c.ogg", audio))
    assert default.text == "transcript of c.ogg"
    first = llm.transcriptions[0]
    assert (first.model, first.filename, first.content_type, first.data) == (
        "whisper-1",
        "note.ogg",
        "audio/ogg",
        audio,
    )
