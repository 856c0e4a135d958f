"""Reasoning models end to end: the Responses API (stateless, encrypted reasoning) and Anthropic
with extended thinking through the real App, a daemon restart in the middle of a tool loop, a
failover across the three APIs in one conversation, open models' thoughts kept from users who
did not ask, and the tokens spent thinking in /usage. The fakes refuse every malformed history
the way the real APIs do (tests/fakes/responses_rules.py, tests/fakes/anthropic_server.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from bot.app import App
from bot.config import Config, parse_config
from engine import MediaKind
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
        blocks = [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]
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
            forged = dataclasses_replace_item(reply.reasoning[0], json.dumps(item))
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


def dataclasses_replace_item(r: Any, item: str) -> Any:
    import dataclasses

    return dataclasses.replace(r, item=item)
