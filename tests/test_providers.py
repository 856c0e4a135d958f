"""Providers end to end: the Anthropic translation against the strict fake, the SDK's retries,
prompt caching figures, failover between providers, switching provider between restarts, and a
confirmed destructive tool and a streamed answer through the real App and the fake Bot API with
each provider."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from bot._checks import validate
from bot._models import build_model
from bot.app import App
from bot.config import Config, parse_config
from engine import Image, ModelRequest, ToolCall, ToolSpec, parse_decision
from engine.loop import ConversationKey, ToolLoop, TurnContext
from engine.models import AnthropicModel, FailoverModel, Message, OpenAIModel, Role
from engine.models._anthropic import EARLIER, NO_OUTPUT
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.models import HTTP_BACKENDS, Backend, backend, read_anthropic
from tests.fakes.openai_server import FakeOpenAI, error, text, tool_call
from tests.fakes.recording_channel import RecordingChannel
from tests.fakes.telegram_server import FakeTelegram
from tools import File, Tool, ToolResult, tool
from tools.errors import (
    ConfigError,
    ContextOverflow,
    ModelAuthError,
    ModelRateLimited,
    ModelUnavailable,
)
from tools.registry import ToolRegistry

KEY = ConversationKey("test", "c1")
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16
FAST = {"retry-after-ms": "1"}  # the SDK's retry waits what the server asks
ADD = ToolSpec("add", "Add two integers.", {"type": "object", "properties": {}})
deleted: list[str] = []


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(destructive=True, summary="Delete the file {name}")
async def delete_file(name: str) -> str:
    """Delete a file for good."""
    deleted.append(name)
    return f"deleted {name}"


gates: dict[str, asyncio.Event] = {}  # made in each test's own event loop


@tool(background=True)
async def report(topic: str) -> str:
    """Prepare a report in the background."""
    await gates["report"].wait()
    return f"report on {topic}: all good"


@pytest.fixture
async def claude() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


def anthropic_model(llm: FakeAnthropic, **kw: Any) -> AnthropicModel:
    return AnthropicModel(base_url=llm.base_url, api_key="k", model="fake-model", **kw)


def ctx(**kw: Any) -> TurnContext:
    return TurnContext(KEY, "u1", "Alice", **kw)


def loop(model: Any, **options: Any) -> ToolLoop:
    registry = ToolRegistry()
    registry.register(add)
    return ToolLoop(model, registry, **options)


# -- the translation, checked by the fake that refuses what the API refuses ---------------------


async def test_a_history_from_another_provider_goes_out_in_the_api_shape(claude) -> None:
    odd = [ToolCall("functions.add:0", "add", '{"a": 1, "b": 2}'), ToolCall("call 2", "add", "")]
    history = [
        Message.user(
            "what is on these?",
            images=[Image("image/png", PNG), Image("image/png", url="https://x/y.png")],
        ),
        Message.assistant("Let me add.", odd),
        Message.tool_result("functions.add:0", "3"),
        Message.tool_result("call 2", "", is_error=True),  # parallel results: one user turn
        Message.assistant("It is 3."),
        Message.assistant(None, [ToolCall("job_1", "add", "{}")]),  # a background result after it
        Message.tool_result("job_1", "report ready"),
        Message.user("   "),
        Message.user("and now?"),  # two queued messages: one turn
    ]
    model = anthropic_model(claude)
    try:
        reply = await model.complete(ModelRequest("Be brief.", history, [ADD]))
    finally:
        await model.aclose()
    assert reply.text == "echo: and now?"  # the fake took it: nothing it refuses was sent
    body = claude.requests[0]
    turns = body["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user", "assistant", "user"]
    assert [b["type"] for b in turns[0]["content"]] == ["text", "image", "image"]
    assert turns[0]["content"][1]["source"]["type"] == "base64"
    assert turns[0]["content"][2]["source"] == {"type": "url", "url": "https://x/y.png"}
    assert [(b["type"], b.get("id")) for b in turns[1]["content"]] == [
        ("text", None),
        ("tool_use", "functions_add_0"),
        ("tool_use", "call_2"),
    ]
    assert [b["input"] for b in turns[1]["content"][1:]] == [{"a": 1, "b": 2}, {}]
    assert turns[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "functions_add_0", "content": "3"},
        {"type": "tool_result", "tool_use_id": "call_2", "content": NO_OUTPUT, "is_error": True},
    ]
    assert [b["type"] for b in turns[3]["content"]] == ["text", "tool_use"]
    assert [b["type"] for b in turns[4]["content"]] == ["tool_result", "text"]  # blank left out
    # prompt caching: the tools, the system prompt and the newest block are marked
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["system"] == [
        {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
    ]
    assert turns[-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    # read back, it is the conversation the loop meant
    sent = read_anthropic(body)
    assert [r.text for r in sent.results] == ["3", NO_OUTPUT, "report ready"]
    assert [r.is_error for r in sent.results] == [False, True, False]
    assert [c.name for c in sent.calls] == ["add", "add", "add"]


async def test_each_provider_maps_the_registrys_definitions(claude, llm) -> None:
    """One definition per tool (tools.registry); OpenAI strict mode sends its strict variant."""
    registry = ToolRegistry()
    registry.register(add)
    registry.register(delete_file)
    request = ModelRequest("Be brief.", [Message.user("hi")], registry.definitions())
    strict = OpenAIModel(base_url=llm.base_url, api_key="k", model="m", strict_tools=True)
    anthropic = anthropic_model(claude)
    try:
        await strict.complete(request)
        await anthropic.complete(request)
    finally:
        await strict.aclose()
        await anthropic.aclose()
    [add_spec, delete_spec] = request.tools
    assert llm.requests[0]["tools"][0] == {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": add_spec.strict_parameters,
            "strict": True,
        },
    }
    assert [t["name"] for t in claude.requests[0]["tools"]] == ["add", "delete_file"]
    assert claude.requests[0]["tools"][1]["input_schema"] == delete_spec.parameters
    assert delete_spec.tier == "destructive"


async def test_a_history_cut_before_its_first_user_message_is_still_taken(claude) -> None:
    model = anthropic_model(claude)
    try:
        history = [Message.assistant("Earlier answer."), Message.user("go on")]
        await model.complete(ModelRequest("", history))
    finally:
        await model.aclose()
    first = claude.requests[0]["messages"][0]
    assert first == {"role": "user", "content": [{"type": "text", "text": EARLIER}]}
    assert "system" not in claude.requests[0]


async def test_cache_reads_and_writes_are_carried_in_the_turns_usage(claude) -> None:
    claude.script(tool_call("add", {"a": 2, "b": 3}), text("5"))
    model = anthropic_model(claude)
    try:
        result = await loop(model).run([Message.user("2+3?")], ctx(system="Be brief. " * 30))
    finally:
        await model.aclose()
    assert result.text == "5"
    usage = result.usage
    # the first request wrote tools + system (+ the message); the second read them back
    assert usage.cache_write_tokens > 0 and usage.cached_tokens > 0
    assert usage.prompt_tokens >= usage.cached_tokens + usage.cache_write_tokens


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [529, 429])
async def test_overloaded_and_rate_limited_are_retried_by_the_sdk(claude, status) -> None:
    claude.script(error(status, "busy", headers=FAST), error(status, "busy", headers=FAST))
    claude.script(text("there you go"))
    model = anthropic_model(claude, max_retries=2)
    try:
        result = await loop(model).run([Message.user("hi")], ctx())
    finally:
        await model.aclose()
    assert result.text == "there you go" and len(claude.requests) == 3


@pytest.mark.parametrize(
    ("reply", "raised"),
    [
        (error(529, "Overloaded"), ModelUnavailable),
        (error(500, "Internal"), ModelUnavailable),
        (error(429, "slow down"), ModelRateLimited),
        (error(401, "invalid x-api-key"), ModelAuthError),
        (error(403, "not allowed"), ModelAuthError),
        (error(400, "prompt is too long: 210000 tokens > 200000 maximum"), ContextOverflow),
    ],
)
async def test_errors_map_onto_relaybots(claude, reply, raised) -> None:
    claude.default = reply
    model = anthropic_model(claude, max_retries=0)
    try:
        with pytest.raises(raised) as caught:
            await model.complete(ModelRequest("", [Message.user("hi")]))
    finally:
        await model.aclose()
    assert reply.message in str(caught.value)


async def test_an_overload_inside_a_stream_before_any_text_starts_it_again(claude) -> None:
    claude.stream_errors = True
    claude.script(error(529, "Overloaded"), text("streamed after all"))
    deltas: list[str] = []
    model = anthropic_model(claude, max_retries=1)
    try:
        result = await loop(model, stream=True).run(
            [Message.user("hi")], ctx(on_text=deltas.append)
        )
    finally:
        await model.aclose()
    assert result.text == "streamed after all" == "".join(deltas)
    assert len(claude.requests) == 2


# -- failover ----------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_failover_to_the_fallback_and_back_after_the_cool_down(claude, llm, caplog) -> None:
    llm.default = lambda body: error(500, "primary down", headers=FAST)
    clock = Clock()
    primary = OpenAIModel(base_url=llm.base_url, api_key="k", model="primary", max_retries=1)
    fallback = anthropic_model(claude)
    model = FailoverModel([primary, fallback], cooldown_s=60, clock=clock)
    caplog.set_level(logging.INFO, "engine.models._failover")
    try:
        first = await loop(model).run([Message.user("one")], ctx())
        assert first.text == "echo: one" and len(llm.requests) == 2  # its own retry, then over
        second = await loop(model).run([Message.user("two")], ctx())
        assert second.text == "echo: two" and len(llm.requests) == 2  # set aside: not asked
        clock.now += 61
        third = await loop(model).run([Message.user("three")], ctx())
        assert third.text == "echo: three" and len(llm.requests) == 4  # tried again, still down
        clock.now += 61
        llm.default = lambda body: text("primary is back")
        fourth = await loop(model).run([Message.user("four")], ctx())
        assert fourth.text == "primary is back" and len(claude.requests) == 3
    finally:
        await model.aclose()
    said = [r.getMessage() for r in caplog.records if r.name == "engine.models._failover"]
    assert len(said) == 2  # once when it went down, once when it came back
    assert "model primary failed" in said[0] and "requests go to fake-model" in said[0]
    assert "60 s" in said[0] and said[1] == "model primary answers again"


async def test_a_turn_goes_on_with_the_fallback_in_the_middle(claude, llm) -> None:
    llm.script(tool_call("add", {"a": 2, "b": 3}, id="call_Ab.9"), error(503, "gone"))
    primary = OpenAIModel(base_url=llm.base_url, api_key="k", model="primary", max_retries=0)
    model = FailoverModel([primary, anthropic_model(claude)])
    try:
        claude.script(text("It is 5."))
        result = await loop(model).run([Message.user("2+3?")], ctx())
    finally:
        await model.aclose()
    assert result.text == "It is 5."
    sent = read_anthropic(claude.requests[0])  # the primary's call and its result, translated
    assert [(c.name, r.text) for c, r in zip(sent.calls, sent.results, strict=True)] == [
        ("add", "5")
    ]


@pytest.mark.parametrize(
    ("reply", "raised"),
    [
        (error(401, "bad key"), ModelAuthError),
        (error(400, "prompt is too long: 9 > 8"), ContextOverflow),
    ],
)
async def test_what_would_fail_anywhere_is_not_failed_over(claude, reply, raised) -> None:
    claude.default = reply
    async with FakeOpenAI() as other:
        primary = anthropic_model(claude, max_retries=0)
        fallback = OpenAIModel(base_url=other.base_url, api_key="k", model="fake-model")
        model = FailoverModel([primary, fallback])
        try:
            with pytest.raises(raised):
                await model.complete(ModelRequest("", [Message.user("hi")]))
        finally:
            await model.aclose()
        assert other.requests == []


# -- through the real App ----------------------------------------------------------------------


def llm_section(b: Backend, **extra: Any) -> dict[str, Any]:
    assert b.server is not None
    return {
        "provider": b.name,
        "base_url": b.server.base_url,
        "api_key": "sk-test-key-123456",
        "model": "fake-model",
        "max_retries": 0,
        "request_timeout_s": 10,
        **extra,
    }


def app_config(tmp_path: Path, llm: dict[str, Any], **sections: Any) -> Config:
    return parse_config(
        {
            "llm": llm,
            "storage": {"path": str(tmp_path / "relaybot.db")},
            "tools": {"builtins": []},
            **sections,
        }
    )


@asynccontextmanager
async def running(config: Config, *more: Tool) -> AsyncIterator[tuple[App, RecordingChannel]]:
    channel = RecordingChannel()
    tools = (add, delete_file, report, *more)
    async with App(config, channels=[channel], extra_tools=tools) as app:
        app.dispatcher.settings.allowed_users["test"] = {"u1"}
        yield app, channel


async def test_a_dead_primary_fails_over_without_the_user_noticing(tmp_path) -> None:
    async with backend("openai") as primary, backend("anthropic") as fallback:
        primary.default = lambda sent: error(500, "down")
        llm = llm_section(primary, fallback=[llm_section(fallback)])
        async with running(app_config(tmp_path, llm)) as (app, channel):
            await app.dispatcher.handle_inbound(channel.message("hello"))
            shown = await channel.wait_for("send")
        assert [s.text for s in shown] == ["echo: hello"]  # no apology, just the answer
        assert len(primary.sent) == 1 and len(fallback.sent) == 1


@pytest.mark.parametrize("provider", HTTP_BACKENDS)
async def test_a_background_result_is_followed_up_with_each_provider(tmp_path, provider) -> None:
    gates["report"] = asyncio.Event()
    async with backend(provider) as llm:
        llm.script(tool_call("report", {"topic": "sales"}), text("Working on it."))
        async with running(app_config(tmp_path, llm_section(llm))) as (app, channel):
            await app.dispatcher.handle_inbound(channel.message("report please"))
            await channel.wait_for("send")
            llm.script(text("Your report: all good."))
            gates["report"].set()
            shown = await channel.wait_for("send", 2)
        assert [s.text for s in shown] == ["Working on it.", "Your report: all good."]
        follow = llm.sent[-1]  # the result came in as tool data after the answer
        assert follow.calls[-1].name == "background_job_result"
        assert follow.last_result.endswith("finished: report on sales: all good")
        answers = [m.text for m in follow.messages if m.role == "assistant" and m.text]
        assert answers[-1] == "Working on it."  # (Anthropic: the call joined the answer's turn)


class Snapshot(Tool):
    """A tool that returns a picture for the model to look at (an MCP server's screenshot)."""

    name = "snapshot"
    description = "Take a snapshot."
    parameters = {"type": "object", "properties": {}}

    async def execute(self, args: dict[str, Any]) -> ToolResult:
        picture = File("shot.png", PNG)
        return ToolResult("[picture shot.png]", images=(picture,))


@pytest.mark.parametrize("provider", HTTP_BACKENDS)
async def test_a_tools_picture_reaches_each_provider_with_its_result(tmp_path, provider) -> None:
    async with backend(provider) as llm:
        llm.script(tool_call("snapshot", {}), text("A snapshot."), tool_call("snapshot", {}))
        config = app_config(tmp_path, llm_section(llm, vision=True))
        async with running(config, Snapshot()) as (app, channel):
            await app.dispatcher.handle_inbound(channel.message("snap"))
            await channel.wait_for("send")
            await app.dispatcher.wait_idle("test", "c1")
            await app.dispatcher.handle_inbound(channel.message("again"))
            await channel.wait_for("send", 2)
        first, later = llm.sent[1], llm.sent[-1]
        # OpenAI takes pictures from a user alone: a user message after the tool results
        role = Role.USER if provider == "openai" else Role.TOOL
        assert [r for r, _ in first.images] == [role]
        assert first.last_result == "[picture shot.png]"
        assert later.images == [(role, first.images[0][1])]  # the new turn's picture alone
        assert "[picture shot.png]" in [r.text for r in later.results]


@pytest.mark.parametrize(("first", "then"), [("openai", "anthropic"), ("anthropic", "openai")])
async def test_switching_provider_between_restarts_keeps_the_conversation(
    tmp_path, first, then, caplog
) -> None:
    caplog.set_level(logging.INFO, "engine.chat._turns._runner")
    async with backend(first) as before, backend(then) as after:
        before.script(tool_call("add", {"a": 2, "b": 3}), text("It is 5."))
        async with running(app_config(tmp_path, llm_section(before))) as (app, channel):
            await app.dispatcher.handle_inbound(channel.message("2+3?"))
            await channel.wait_for("send")
        after.script(text("Yes, 5."))
        async with running(app_config(tmp_path, llm_section(after))) as (app, channel):
            await app.dispatcher.handle_inbound(channel.message("sure?"))
            shown = await channel.wait_for("send")
        assert [s.text for s in shown] == ["Yes, 5."]
        (sent,) = after.sent  # what the new provider received: the whole conversation
        assert [m.text for m in sent.messages if m.role == "user"][-2:] == ["2+3?", "sure?"]
        assert [(c.name, json.loads(c.arguments)) for c in sent.calls] == [
            ("add", {"a": 2, "b": 3})
        ]
        assert [r.text for r in sent.results] == ["5"]
        assert any(m.text == "It is 5." for m in sent.messages)
    turns = [r.getMessage() for r in caplog.records if "tokens:" in r.getMessage()]
    assert len(turns) == 2 and all("(cache: " in t for t in turns)
    if "anthropic" == first:  # the first turn's second request read what its first wrote
        assert "(cache: 0 read" not in turns[0]


# -- the same chat on Telegram with each provider ---------------------------------------------

DM = 1001


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


def telegram(tg: FakeTelegram) -> dict[str, Any]:
    section = {"enabled": True, "token": tg.token, "api_base_url": tg.base_url}
    return {"telegram": {**section, "allowed_users": ["*"], "poll_timeout_s": 5}}


@pytest.mark.parametrize("provider", HTTP_BACKENDS)
async def test_a_destructive_tool_confirmed_by_button(tmp_path, tg, provider) -> None:
    deleted.clear()
    async with backend(provider) as llm:
        llm.script(tool_call("delete_file", {"name": "notes.txt"}), text("Deleted notes.txt."))
        config = app_config(tmp_path, llm_section(llm), **telegram(tg))
        async with App(config, extra_tools=(delete_file,)):
            tg.inject_message(DM, DM, "delete notes.txt", first_name="Alice")
            asked = await tg.wait_for_call("sendMessage", lambda p: "reply_markup" in p)
            button = asked.params["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
            assert parse_decision(button) is not None and deleted == []
            prompt = max(mid for chat, mid in tg.messages if chat == DM)
            tg.inject_callback(DM, DM, prompt, button)
            await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "Deleted notes.txt.")
        assert deleted == ["notes.txt"]
        assert llm.sent[-1].last_result == "deleted notes.txt"


@pytest.mark.parametrize("provider", HTTP_BACKENDS)
async def test_a_streamed_answer_grows_in_one_message(tmp_path, tg, provider) -> None:
    answer = "Streaming works: " + " ".join(f"word{i}" for i in range(40))
    tg.drafts_supported = False  # a DM streams by drafts where the server has them: edits here
    async with backend(provider, stream_chunk_chars=8, stream_chunk_delay_s=0.02) as llm:
        llm.script(text(answer))
        config = app_config(tmp_path, llm_section(llm, stream=True), **telegram(tg))
        async with App(config):
            tg.inject_message(DM, DM, "stream it")
            await tg.wait_for_call("editMessageText", lambda p: p.get("parse_mode") == "HTML")
        (first,) = tg.calls_of("sendMessage")  # the beginning, then edits up to the whole
        assert answer.startswith(first.params["text"]) and len(first.params["text"]) < len(answer)
        assert tg.chat_texts(DM) == [answer]
        assert llm.server is not None and llm.server.requests[0]["stream"] is True


# -- configuration -----------------------------------------------------------------------------


def test_provider_defaults_and_what_each_needs() -> None:
    config = parse_config({"llm": {"provider": "anthropic", "model": "claude-x"}})
    assert config.llm.base_url == "https://api.anthropic.com"
    assert parse_config({}).llm.base_url == "https://api.openai.com/v1"
    with pytest.raises(ConfigError, match=r"^llm\.model: must be set for provider 'anthropic'"):
        parse_config({"llm": {"provider": "anthropic"}})
    with pytest.raises(ConfigError, match=r"^llm\.fallback\.1\.model: must be set"):
        parse_config({"llm": {"fallback": [{"model": "b"}, {"provider": "anthropic"}]}})
    with pytest.raises(ConfigError, match=r"^llm\.provider: must be 'openai' or 'anthropic'"):
        parse_config({"llm": {"provider": "claude"}})


def test_a_missing_sdk_is_a_config_error_naming_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)  # as if not installed
    fallback = {"provider": "anthropic", "model": "claude-x"}
    with pytest.raises(ConfigError) as caught:
        parse_config({"llm": {"fallback": [fallback]}})
    assert caught.value.key == "llm.fallback.0.provider"
    assert "pip install 'relaybot[anthropic]'" in str(caught.value)


def test_each_model_is_built_and_its_key_required_at_start(monkeypatch) -> None:
    monkeypatch.setenv("PRIMARY_KEY", "sk-primary-123456")
    monkeypatch.delenv("FALLBACK_KEY", raising=False)
    fallback = {"provider": "anthropic", "model": "claude-x", "api_key_env": "FALLBACK_KEY"}
    llm = {"api_key_env": "PRIMARY_KEY", "fallback": [fallback], "failover_cooldown_s": 42}
    config = parse_config({"llm": llm})
    with pytest.raises(
        ConfigError, match=r"llm\.fallback\.0\.api_key_env: the environment variable"
    ):
        validate(config, need_channel=False)
    monkeypatch.setenv("FALLBACK_KEY", "sk-ant-fallback-123456")
    validate(config, need_channel=False)
    assert {"sk-primary-123456", "sk-ant-fallback-123456"} <= set(config.secrets())  # redacted
    model = build_model(config)
    assert isinstance(model, FailoverModel) and model.cooldown_s == 42
    assert [type(m) for m in model.models] == [OpenAIModel, AnthropicModel]
    alone = build_model(parse_config({"llm": {"api_key_env": "PRIMARY_KEY"}}))
    assert isinstance(alone, OpenAIModel)


def test_the_readme_example_is_a_working_config(monkeypatch) -> None:
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    (block,) = re.findall(r"```toml\n(\[llm\]\nprovider = \"anthropic\".*?)```", readme, re.S)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-example")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-example")
    model = build_model(parse_config(tomllib.loads(block)))
    assert isinstance(model, FailoverModel)
    assert [(type(m), m.name) for m in model.models] == [
        (AnthropicModel, "claude-sonnet-4-5"),
        (OpenAIModel, "gpt-4o-mini"),
    ]
