"""Reasoning models end to end: the Responses API (stateless, encrypted reasoning) and Anthropic
with extended thinking through the real App, a daemon restart in the middle of a tool loop, a
failover across the three APIs in one conversation, open models' thoughts kept from users who
did not ask, and the tokens spent thinking in /usage. The fakes refuse every malformed history
the way the real APIs do (tests/fakes/responses_rules.py, tests/fakes/anthropic_server.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from bot.app import App
from bot.config import Config, parse_config
from bot.web._conversations import _said
from engine import Command, Image, MediaKind
from engine.loop import ConversationKey, ToolLoop, TurnContext
from engine.models import (
    AnthropicModel,
    FailoverModel,
    Message,
    OpenAIModel,
    ResponsesModel,
)
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.media import png
from tests.fakes.openai_responses import REASONING_TOKENS, FakeResponses
from tests.fakes.openai_server import FakeOpenAI, error, hold, text, tool_call, tool_calls
from tests.fakes.recording_channel import RecordingChannel
from tools import tool
from tools.errors import ConfigError
from tools.registry import ToolRegistry

KEY = ConversationKey("test", "c1")


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def section(server: FakeOpenAI, api: str, **extra: Any) -> dict[str, Any]:
    """[llm] on a fake: "responses" (OpenAI's Responses API) or "anthropic" with thinking."""
    base = {
        "base_url": server.base_url,
        "api_key": "sk-test-key-123456",
        "model": "fake-model",
        "max_retries": 0,
        "request_timeout_s": 10,
        "vision": True,
    }
    if api == "anthropic":
        return {**base, "provider": "anthropic", "thinking_tokens": 2048, **extra}
    return {**base, "provider": "openai", "api": api, "reasoning_effort": "low", **extra}


def config(tmp_path: Path, llm: dict[str, Any]) -> Config:
    return parse_config(
        {
            "llm": llm,
            "storage": {"path": str(tmp_path / "relaybot.db")},
            "tools": {"builtins": []},
            "engine": {"shutdown_grace_s": 0},  # a stop cuts the turn off, as a crash would
        }
    )


@asynccontextmanager
async def running(cfg: Config) -> AsyncIterator[tuple[App, RecordingChannel]]:
    channel = RecordingChannel()
    async with App(cfg, channels=[channel], extra_tools=(add,)) as app:
        app.dispatcher.settings.allowed_users["test"] = {"u1"}
        yield app, channel


@asynccontextmanager
async def server(api: str) -> AsyncIterator[FakeOpenAI]:
    fake: FakeOpenAI = FakeAnthropic() if api == "anthropic" else FakeResponses()
    async with fake:
        yield fake


def thinking_of(api: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The reasoning items (Responses) or thinking blocks (Anthropic) a request carried."""
    if api == "anthropic":
        blocks = [
            b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]
        ]
        return [b for b in blocks if b["type"] in ("thinking", "redacted_thinking")]
    return [i for i in body["input"] if i.get("type") == "reasoning"]


# -- a conversation with tools, an image and a restart in the middle of the tool loop -----------


@pytest.mark.parametrize("api", ["responses", "anthropic"])
async def test_a_restart_in_the_middle_of_a_tool_loop_sends_the_reasoning_back(
    tmp_path, api
) -> None:
    """The model thinks, calls two tools at once on a picture the user sent; the daemon stops
    while the model is asked for the answer. After the restart the turn is finished from the
    stored history: the reasoning goes back verbatim before its calls (the fake refuses the
    calls without it), and the user gets one answer."""
    async with server(api) as llm:
        gate = asyncio.Event()
        llm.script(
            tool_calls([("add", {"a": 2, "b": 3}), ("add", {"a": 4, "b": 5})]),
            hold(gate, text("too late")),
        )
        cfg = config(tmp_path, section(llm, api))
        async with running(cfg) as (app, channel):
            photo = channel.upload(MediaKind.IMAGE, "sum.png", "image/png", png("2+3"))
            await app.dispatcher.handle_inbound(channel.message("add these", attachments=[photo]))
            await llm.wait_requests(2)  # the calls ran; the answer is being asked for
        gate.set()
        llm.script(text("5 and 9."))
        async with running(cfg) as (app, channel):
            shown = await channel.wait_for("send")
        assert [s.text for s in shown] == ["5 and 9."]
        first, before, after = llm.requests
        assert json.dumps(first).count("image") >= 1  # the picture went to the model
        kept = thinking_of(api, before)
        assert len(kept) == 1 and thinking_of(api, after) == kept  # the same item, verbatim
        assert getattr(llm, "refusals", []) == []
        if api == "responses":
            assert after["store"] is False and after["include"] == ["reasoning.encrypted_content"]
            assert "previous_response_id" not in after
            outputs = [i for i in after["input"] if i.get("type") == "function_call_output"]
            assert [o["output"] for o in outputs] == ["5", "9"]
        else:
            assert after["thinking"] == {"type": "enabled", "budget_tokens": 2048}


# -- what the fakes refuse, as the real APIs do ------------------------------------------------


async def test_the_responses_fake_refuses_a_call_without_its_reasoning_item() -> None:
    async with FakeResponses() as llm:
        model = ResponsesModel(base_url=llm.base_url, api_key="k", model="m", max_retries=0)
        try:
            llm.script(tool_call("add", {"a": 1, "b": 2}))
            history = [Message.user("1+2?")]
            reply = await model.complete(request(history))
            calls = reply.tool_calls
            bare = [*history, Message.assistant(None, calls), Message.tool_result(calls[0].id, "3")]
            with pytest.raises(Exception, match="without its required 'reasoning' item"):
                await model.complete(request(bare))
            item = json.loads(reply.reasoning[0].item)
            item["item"]["encrypted_content"] = "x" + item["item"]["encrypted_content"][1:]
            forged = dataclasses.replace(reply.reasoning[0], item=json.dumps(item))
            tampered = [*history, Message.assistant(None, calls, [forged]), bare[-1]]
            with pytest.raises(Exception, match="could not be verified"):
                await model.complete(request(tampered))
        finally:
            await model.aclose()
        assert len(llm.refusals) == 2


def request(history: list[Message]) -> Any:
    from engine.models import ModelRequest, ToolSpec

    spec = ToolSpec(
        "add",
        "Add two integers.",
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    )
    return ModelRequest("sys", history, [spec])


# -- shown on request, and what the user sees of it -------------------------------------------


async def test_thoughts_are_shown_only_where_a_chat_asked_and_usage_counts_them(tmp_path) -> None:
    """Off by default: the answer alone. /settings thinking on: a short view of the reasoning
    before the answer (the channel folds it away). /usage says how many tokens went to it."""
    async with FakeResponses() as llm:
        async with running(config(tmp_path, section(llm, "responses"))) as (app, channel):
            await app.dispatcher.handle_inbound(channel.message("first"))
            await channel.wait_for("send")
            assert channel.texts("thoughts") == []
            said = await app.dispatcher.handle_command(
                channel.message("/settings thinking on"), Command.SETTINGS
            )
            assert "Saved." in said.text
            await app.dispatcher.handle_inbound(channel.message("second"))
            shown = await channel.wait_for("send", 2)
            usage = await app.dispatcher.handle_command(channel.message("/usage"), Command.USAGE)
            conv = await app.store.conversations.active("test", "c1")
            stored = await app.store.browse.messages(conv.id)
        assert channel.texts("thoughts") == ["Thinking about: second"]
        # The console's conversation page: the thinking, folded, for owners (who see texts).
        page = str(_said(stored[-1], sees_text=True))
        assert "<details><summary>thinking</summary><pre>Thinking about: second" in page
        assert "Thinking about" not in str(_said(stored[-1], sees_text=False))
        assert "encrypted" not in page
        assert [s.text for s in shown] == ["echo: first", "echo: second"]
        assert f"{2 * REASONING_TOKENS} tokens spent reasoning" in usage.text


@pytest.mark.parametrize("stream", [False, True])
async def test_an_open_models_think_block_never_reaches_a_user_who_did_not_ask(
    tmp_path, llm, stream
) -> None:
    llm.stream_chunk_chars = 3  # the tags arrive in pieces
    llm.script(text("<think>The user wants a greeting. Be brief.</think>\n\nHello there!"))
    llm.script(text("Still <think>hm</think>here."))
    chat = {
        "provider": "openai",
        "base_url": llm.base_url,
        "api_key": "k",
        "model": "fake-model",
        "max_retries": 0,
        "stream": stream,
    }
    async with running(config(tmp_path, chat)) as (app, channel):
        await app.dispatcher.handle_inbound(channel.message("hi"))
        await channel.wait_for("send")
        await app.dispatcher.handle_inbound(channel.message("again"))
        await channel.wait_for("send", 2)
        history = await app.store.conversations.history(
            (await app.store.conversations.active("test", "c1")).id
        )
    everything = [s.text for s in channel.log]
    assert not any("think" in t or "greeting" in t for t in everything), everything
    assert channel.texts("send")[-2:] == ["Hello there!", "Still here."]
    assert [r.summary for r in history[1].reasoning] == ["The user wants a greeting. Be brief."]
    assert "think" not in json.dumps(llm.requests[-1]["messages"])  # not sent back either


# -- one conversation across the three APIs ----------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_conversation_fails_over_across_the_three_apis(llm) -> None:
    """Responses thinks and calls a tool, then goes down: Chat Completions goes on with the
    loop (no reasoning items sent there), then goes down too: Anthropic with thinking finishes
    the loop (begun without thinking: it goes on without, as the API requires). Back on the
    Responses API later, another provider's thinking blocks are dropped. No fake refused."""
    clock = Clock()
    async with FakeResponses() as responses, FakeAnthropic() as claude:
        first = ResponsesModel(base_url=responses.base_url, api_key="k", model="o", max_retries=0)
        second = OpenAIModel(base_url=llm.base_url, api_key="k", model="c", max_retries=0)
        third = AnthropicModel(
            base_url=claude.base_url, api_key="k", model="a", max_retries=0, thinking=1024
        )
        model = FailoverModel([first, second, third], cooldown_s=60, clock=clock)
        registry = ToolRegistry()
        registry.register(add)
        loop = ToolLoop(model, registry)
        responses.script(tool_call("add", {"a": 1, "b": 2}), error(503, "down"))
        llm.script(tool_call("add", {"a": 3, "b": 4}), error(503, "down"))
        claude.script(tool_call("add", {"a": 5, "b": 6}), text("3, 7 and 11."))
        try:
            turn = await loop.run([Message.user("sums")], TurnContext(KEY, "u1"))
            assert turn.text == "3, 7 and 11."
            clock.now += 61  # the Responses API is tried first again
            responses.script(text("Yes."))
            history = [Message.user("sums"), *turn.messages, Message.user("sure?")]
            again = await loop.run(history, TurnContext(KEY, "u1"))
            assert again.text == "Yes."
        finally:
            await model.aclose()
    assert responses.refusals == []
    chat_sent = json.dumps(llm.requests)
    assert "reasoning" not in chat_sent and "encrypted" not in chat_sent
    assert [("thinking" in r) for r in claude.requests] == [False, False]  # begun without it
    last = responses.requests[-1]
    assert [i["type"] for i in last["input"] if i.get("type") == "reasoning"] == []  # older turn
    assert "thinking" not in json.dumps(last["input"]) and "signature" not in json.dumps(last)


async def test_the_anthropic_fake_refuses_a_tool_turn_without_its_thinking_block() -> None:
    import anthropic

    async with FakeAnthropic() as claude:
        client = anthropic.AsyncAnthropic(base_url=claude.base_url, api_key="k", max_retries=0)
        turns = [
            {"role": "user", "content": "1+2?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Adding."},
                    {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1}},
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "3"}],
            },
        ]
        tools = [{"name": "add", "input_schema": {"type": "object"}}]
        thinking = {"type": "enabled", "budget_tokens": 1024}
        try:
            with pytest.raises(anthropic.BadRequestError, match="but found `text`"):
                await client.messages.create(
                    model="m", max_tokens=2048, messages=turns, tools=tools, thinking=thinking
                )
            forged = {"type": "thinking", "thinking": "I add.", "signature": "0" * 64}
            turns[1]["content"] = [forged, *turns[1]["content"]]  # type: ignore[list-item]
            with pytest.raises(anthropic.BadRequestError, match="Invalid `signature`"):
                await client.messages.create(
                    model="m", max_tokens=2048, messages=turns, tools=tools, thinking=thinking
                )
        finally:
            await client.close()


def test_init_offers_the_responses_api_for_openai(monkeypatch) -> None:
    from bot._init_render import Answers, render

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    written = render(Answers(model="gpt-5-mini", api="responses"))
    assert 'api = "responses"' in written
    cfg = parse_config(tomllib.loads(written))
    assert (cfg.llm.provider, cfg.llm.api) == ("openai", "responses")
    assert 'api = "' not in render(Answers())  # Chat Completions stays the default, unwritten
    with pytest.raises(ConfigError, match='needs provider = "openai"'):
        parse_config({"llm": {"provider": "anthropic", "model": "claude", "api": "responses"}})


async def test_a_streamed_responses_answer_shows_its_text_as_it_comes() -> None:
    async with FakeResponses(stream_chunk_chars=4) as llm:
        model = ResponsesModel(
            base_url=llm.base_url, api_key="k", model="m", max_retries=0, effort="low"
        )
        shown: list[str] = []
        try:
            llm.script(text("Streaming works here."))
            reply = await model.complete(
                dataclasses.replace(request([Message.user("go")]), stream=True), shown.append
            )
        finally:
            await model.aclose()
    assert len(shown) > 1 and "".join(shown) == reply.text == "Streaming works here."
    assert reply.thoughts == "Thinking about: go"  # the reasoning item, read from the stream
    assert reply.usage.reasoning_tokens == REASONING_TOKENS
    assert llm.requests[0]["stream"] is True and llm.requests[0]["reasoning"]["summary"] == "auto"


async def test_the_responses_fake_refuses_an_unknown_field() -> None:
    import openai

    async with FakeResponses() as llm:
        client = openai.AsyncOpenAI(base_url=llm.base_url, api_key="k", max_retries=0)
        try:
            with pytest.raises(
                openai.BadRequestError, match=re.escape("Unknown parameter: 'input[0].foo'.")
            ):
                await client.responses.create(
                    model="m",
                    input=[{"role": "user", "content": "hi", "foo": 1}],  # type: ignore[list-item]
                )
        finally:
            await client.close()


@pytest.mark.parametrize("stream", [False, True])
async def test_an_open_models_reasoning_field_is_kept_apart_and_sent_back_only_if_asked(
    llm, stream
) -> None:
    """DeepSeek-style ``reasoning_content``: not the answer, counted in usage, not sent back by
    default (servers refuse it), sent back with the loop's calls with `reasoning_back`."""
    for back in (False, True):
        model = OpenAIModel(
            base_url=llm.base_url, api_key="k", model="m", max_retries=0, reasoning_back=back
        )
        registry = ToolRegistry()
        registry.register(add)
        llm.script(
            tool_call("add", {"a": 1, "b": 2}, reasoning="I should add."),
            text("It is 3.", reasoning="Done adding."),
        )
        try:
            turn = await ToolLoop(model, registry, stream=stream).run(
                [Message.user("1+2?")], TurnContext(KEY, "u1")
            )
        finally:
            await model.aclose()
        assert turn.text == "It is 3." and turn.thoughts == "I should add.\n\nDone adding."
        assert turn.usage.reasoning_tokens > 0
        sent = [m for m in llm.requests[-1]["messages"] if m["role"] == "assistant"]
        assert [m.get("reasoning_content") for m in sent] == ["I should add." if back else None]


async def test_a_model_that_does_not_reason_is_asked_once_for_its_encrypted_reasoning() -> None:
    async with FakeResponses() as llm:
        llm.thinks = False  # gpt-4o: "Encrypted content is not supported with this model."
        model = ResponsesModel(base_url=llm.base_url, api_key="k", model="m", max_retries=0)
        try:
            first = await model.complete(request([Message.user("one")]))
            second = await model.complete(request([Message.user("two")]))
        finally:
            await model.aclose()
    assert (first.text, second.text) == ("echo: one", "echo: two")
    assert ["include" in body for body in llm.requests] == [True, False, False]


async def test_with_server_storage_a_tool_loop_goes_on_from_the_previous_response() -> None:
    async with FakeResponses() as llm:
        model = ResponsesModel(
            base_url=llm.base_url, api_key="k", model="m", max_retries=0, store=True
        )
        llm.script(tool_call("add", {"a": 1, "b": 2}), text("3."))
        try:
            history = [Message.user("1+2?")]
            reply = await model.complete(request(history))
            history += [
                Message.assistant(None, reply.tool_calls, reply.reasoning),
                Message.tool_result(reply.tool_calls[0].id, "3"),
            ]
            answer = await model.complete(request(history))
        finally:
            await model.aclose()
    assert answer.text == "3." and llm.refusals == []
    first, second = llm.requests
    assert first["store"] is True and "include" not in first
    assert second["previous_response_id"] == "resp_0001"
    assert [i["type"] for i in second["input"]] == ["function_call_output"]


async def test_a_tools_picture_goes_in_its_function_call_output() -> None:
    async with FakeResponses() as llm:
        model = ResponsesModel(base_url=llm.base_url, api_key="k", model="m", max_retries=0)
        try:
            llm.script(tool_call("add", {"a": 1, "b": 2}), text("A picture of 3."))
            history = [Message.user("1+2?")]
            reply = await model.complete(request(history))
            call = reply.tool_calls[0]
            result = Message.tool_result(call.id, "[picture sum.png]")
            result.parts.append(Image("image/png", png()))
            turn = [*history, Message.assistant(None, [call], reply.reasoning), result]
            answer = await model.complete(request(turn))
        finally:
            await model.aclose()
    assert answer.text == "A picture of 3."  # the fake took the output's parts
    [output] = [i for i in llm.requests[-1]["input"] if i.get("type") == "function_call_output"]
    assert [p["type"] for p in output["output"]] == ["input_text", "input_image"]
    assert output["output"][1]["image_url"].startswith("data:image/png;base64,")
