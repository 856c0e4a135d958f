"""Checks the fake Anthropic server against the real anthropic SDK: replies the SDK parses, streams
its stream helper assembles, errors it classifies and retries, and the histories it refuses."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest

from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import error, text, tool_call, tool_calls

ADD = {
    "name": "add",
    "description": "Add two integers.",
    "input_schema": {"type": "object", "properties": {"a": {"type": "integer"}}},
}
HI = {"role": "user", "content": "hi"}


@pytest.fixture
async def llm() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def client(llm: FakeAnthropic) -> AsyncIterator[anthropic.AsyncAnthropic]:
    c = anthropic.AsyncAnthropic(base_url=llm.base_url, api_key="k", max_retries=0)
    yield c
    await c.close()


def api_error(exc: anthropic.APIStatusError) -> dict[str, Any]:
    """The ``error`` object of the API's error body."""
    assert isinstance(exc.body, dict)
    return exc.body["error"]


async def ask(client: anthropic.AsyncAnthropic, messages: list[Any], **kw: Any) -> Any:
    return await client.messages.create(model="fake-model", max_tokens=100, messages=messages, **kw)


async def test_text_and_tool_use_parse_as_the_sdk_types(client, llm) -> None:
    llm.script(text("hello"), tool_calls([("add", {"a": 1}), ("add", {"a": 2})], content="Sure"))
    first = await ask(client, [HI])
    assert [b.type for b in first.content] == ["text"] and first.content[0].text == "hello"
    assert first.stop_reason == "end_turn" and first.usage.input_tokens > 0
    second = await ask(client, [HI], tools=[ADD])
    assert [b.type for b in second.content] == ["text", "tool_use", "tool_use"]
    assert [(b.id, b.input) for b in second.content[1:]] == [
        ("toolu_01", {"a": 1}),
        ("toolu_02", {"a": 2}),
    ]
    assert second.stop_reason == "tool_use"
    assert llm.api_keys == ["k", "k"] and all(llm.versions)  # the SDK's auth and version headers


async def test_the_stream_helper_assembles_text_and_tool_input(client, llm) -> None:
    llm.stream_chunk_chars = 3
    llm.script(tool_call("add", {"a": 12345}, content="Adding it up"))
    pieces = []
    async with client.messages.stream(
        model="fake-model", max_tokens=100, messages=[HI], tools=[ADD]
    ) as stream:
        async for delta in stream.text_stream:
            pieces.append(delta)
        final = await stream.get_final_message()
    assert "".join(pieces) == "Adding it up" and len(pieces) > 2
    assert final.content[1].input == {"a": 12345} and final.stop_reason == "tool_use"
    assert final.usage.output_tokens > 1  # message_delta's count replaced message_start's


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (529, anthropic.OverloadedError),
        (429, anthropic.RateLimitError),
        (500, anthropic.InternalServerError),
    ],
)
async def test_errors_are_classified_and_retried_by_the_sdk(llm, status, kind) -> None:
    fast = {"retry-after-ms": "1"}
    llm.script(error(status, "try later", headers=fast), text("after the retry"))
    retrying = anthropic.AsyncAnthropic(base_url=llm.base_url, api_key="k", max_retries=1)
    try:
        reply = await ask(retrying, [HI])
        assert reply.content[0].text == "after the retry" and len(llm.requests) == 2
        llm.script(error(status, "still busy", headers=fast), error(status, "still busy"))
        with pytest.raises(kind) as caught:
            await ask(retrying, [HI])
        assert api_error(caught.value)["message"] == "still busy"
    finally:
        await retrying.close()


async def test_wrong_key_and_an_error_inside_a_stream(client, llm) -> None:
    llm.api_key = "the-right-one"
    with pytest.raises(anthropic.AuthenticationError):
        await ask(client, [HI])
    llm.api_key = None
    llm.stream_errors = True
    llm.script(error(529, "Overloaded"))
    with pytest.raises(anthropic.APIStatusError) as caught:
        async with client.messages.stream(model="fake-model", max_tokens=9, messages=[HI]) as s:
            await s.get_final_message()
    assert api_error(caught.value)["type"] == "overloaded_error"


async def test_prompt_caching_reads_what_an_earlier_request_wrote(client, llm) -> None:
    system = [
        {"type": "text", "text": "You are helpful. " * 40, "cache_control": {"type": "ephemeral"}}
    ]
    first = await ask(client, [HI], system=system)
    second = await ask(client, [{"role": "user", "content": "other"}], system=system)
    assert (
        first.usage.cache_creation_input_tokens > 100 and first.usage.cache_read_input_tokens == 0
    )
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert second.usage.cache_creation_input_tokens == 0


USE: dict[str, Any] = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "toolu_1", "name": "add", "input": {}}],
}
RESULT: dict[str, Any] = {
    "role": "user",
    "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "3"}],
}
MARK = {"type": "ephemeral"}


@pytest.mark.parametrize(
    ("messages", "extra", "refused"),
    [
        ([HI, USE, {"role": "user", "content": "go on"}], {}, "`tool_use` ids were found without"),
        ([HI, {"role": "assistant", "content": "ok"}, RESULT], {}, "unexpected `tool_use_id`"),
        ([HI, HI], {}, 'found multiple "user" roles in a row'),
        ([HI, {"role": "assistant", "content": []}, HI], {}, "must have non-empty content"),
        ([{"role": "user", "content": [{"type": "text", "text": "  "}]}], {}, "non-whitespace"),
        ([{"role": "assistant", "content": "hi"}, HI], {}, 'first message must use the "user"'),
        ([HI, USE, RESULT], {"tools": None}, "must define tools"),
        (
            [HI, {**USE, "content": [{**USE["content"][0], "id": "functions.add:0"}]}],
            {},
            "tool_use.id: String should match",
        ),
        (
            [
                HI,
                USE,
                {"role": "user", "content": [{"type": "text", "text": "x"}, *RESULT["content"]]},
            ],
            {},
            "at the beginning of this message",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "x", "cache_control": MARK}] * 5,
                }
            ],
            {},
            "A maximum of 4 blocks with cache_control",
        ),
    ],
    ids=[
        "use-without-result",
        "result-without-use",
        "same-role-twice",
        "empty-content",
        "blank-text",
        "assistant-first",
        "tool-blocks-without-tools",
        "bad-tool-id",
        "result-not-first",
        "five-cache-marks",
    ],
)
async def test_refuses_what_the_real_api_refuses(client, llm, messages, extra, refused) -> None:
    options = {"tools": [ADD], **extra}
    options = {k: v for k, v in options.items() if v is not None}
    with pytest.raises(anthropic.BadRequestError) as caught:
        await ask(client, messages, **options)
    assert refused in api_error(caught.value)["message"]
    assert api_error(caught.value)["type"] == "invalid_request_error"


async def test_takes_a_well_formed_history_with_tools(client, llm) -> None:
    reply = await ask(client, [HI, USE, RESULT], tools=[ADD])
    assert reply.content[0].text == "echo: "  # the last user turn holds only a tool result
    none = {"type": "none"}
    await ask(client, [HI, USE, RESULT], tools=[ADD], tool_choice=none)


async def test_a_prompt_longer_than_the_window_is_refused(client, llm) -> None:
    llm.context_window = 50
    with pytest.raises(anthropic.BadRequestError, match="prompt is too long"):
        await ask(client, [{"role": "user", "content": "word " * 200}])


async def test_lists_its_models(client, llm) -> None:
    assert [m.id async for m in client.models.list()] == ["fake-model"]
