"""The context budget: long chats stay within the model's window and keep what matters.

The long conversations run on the in-process ScriptedModel made to behave like a server with a
window (the fake server's own token count and refusal, its summariser), so 300 turns take
seconds; what depends on the SDK (usage, error bodies, discovery, restarts) runs against the
fake OpenAI server through the real App.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import re
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from bot._engine import build_engine
from bot.app import App
from bot.config import Config
from engine import Command, FinishReason, ModelRequest, ModelResponse, Role, ToolCall, Usage
from engine.chat import Dispatcher, LimitSettings, Settings
from engine.context import (
    ContextBudget,
    ContextSettings,
    Window,
    WindowInfo,
    WindowSource,
    discover_window,
)
from engine.context._tokens import overflow_facts
from engine.loop import ConversationKey, ToolLoop, TurnContext
from engine.models import Message, OpenAIModel, ScriptedModel, reply
from engine.models._openai_shapes import to_openai
from engine.store import SqliteStore
from tests.fakes.openai_server import (
    FakeOpenAI,
    count_tokens,
    is_summary_request,
    summarize,
    text,
    tool_call,
    tool_calls,
)
from tests.fakes.recording_channel import RecordingChannel
from tools import tool
from tools.errors import ContextOverflow, LLMError
from tools.registry import ToolRegistry

WORDS = (
    "the river town keeps a small market every morning where farmers sell apples bread cheese "
    "honey and warm soup while children run between the stalls and the old bell rings twice"
).split()


def prose(chars: int, seed: int = 0) -> str:
    """Readable filler text of about `chars` characters (different for each seed)."""
    out: list[str] = []
    size = 0
    i = seed
    while size < chars:
        word = WORDS[(i * 7 + seed) % len(WORDS)]
        out.append(word)
        size += len(word) + 1
        i += 1
    return " ".join(out) + "."


@tool
async def fetch_page(n: int) -> str:
    """Fetch page n of the town chronicle."""
    return f"Page {n}: " + prose(3_500, n)


@tool
async def fetch_numbers(n: int) -> str:
    """Fetch a table of numbers."""
    return ",".join(str(i % 10) for i in range(n))


def spec_json(request: ModelRequest) -> dict[str, Any]:
    tools = [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in request.tools
    ]
    body: dict[str, Any] = {"messages": to_openai(request.system, request.messages)}
    if tools:
        body["tools"] = tools
    return body


class WindowedModel(ScriptedModel):
    """A ScriptedModel that counts, refuses and summarises like the fake server does."""

    def __init__(self, window: int, answer: Callable[[ModelRequest], ModelResponse]) -> None:
        super().__init__(self._respond)
        self.window = window
        self.answer = answer
        self.counts: list[int] = []
        self.refused = 0
        self.summaries = 0

    def _respond(self, request: ModelRequest) -> ModelResponse | LLMError:
        body = spec_json(request)
        count = count_tokens(body)
        self.counts.append(count)
        if count > self.window:
            self.refused += 1
            return ContextOverflow(
                f"the model endpoint answered 400: This model's maximum context length is "
                f"{self.window} tokens. However, your messages resulted in {count} tokens."
            )
        if is_summary_request(body):
            self.summaries += 1
            return ModelResponse(summarize(body).content, [], FinishReason.STOP, Usage(count, 50))
        return dataclasses.replace(self.answer(request), usage=Usage(count, 10))


_call_ids = itertools.count(1)


def calls(name: str, args: dict[str, Any]) -> ModelResponse:
    """A tool call with an id of its own, as a provider gives it."""
    call = ToolCall(f"call_{next(_call_ids)}", name, json.dumps(args))
    return ModelResponse(None, [call], FinishReason.TOOL_CALLS)


def reads_a_page(request: ModelRequest) -> ModelResponse:
    """Call fetch_page after a user message, answer after its result."""
    last = request.messages[-1]
    if last.role is Role.USER:
        return calls("fetch_page", {"n": len(request.messages)})
    return reply("I read it: the market is busy.")


@asynccontextmanager
async def dispatcher(
    tmp_path: Path, model: ScriptedModel, context: ContextSettings, *tools: Any
) -> AsyncIterator[tuple[Dispatcher, RecordingChannel]]:
    registry = ToolRegistry()
    for t in tools:
        registry.register(t)
    async with SqliteStore(tmp_path / "relaybot.db") as store:
        settings = Settings(
            system_prompt="You are a helpful bot.",
            allowed_users={"test": {"u1"}},
            context=context,
            limits=LimitSettings(messages_per_minute=100_000),  # one user types fast here
        )
        d = build_engine(store, model, registry, settings)
        channel = RecordingChannel()
        d.add_channel(channel)
        await d.prepare()
        await d.start()
        try:
            yield d, channel
        finally:
            await d.aclose()


def pairs_intact(messages: list[dict[str, Any]]) -> bool:
    """Every tool call answered right after its message, every result answering a call."""
    expected: list[str] = []
    for m in messages:
        if m["role"] == "tool":
            if not expected or m["tool_call_id"] != expected.pop(0):
                return False
            continue
        if expected:
            return False
        expected = [c["id"] for c in m.get("tool_calls") or ()]
    return not expected


# -- long conversations (scripted) --------------------------------------------------------


async def test_a_300_turn_chat_with_large_tool_results_stays_in_its_window_and_keeps_turn_1(
    tmp_path: Path,
) -> None:
    model = WindowedModel(6_000, reads_a_page)
    context = ContextSettings(window=6_000)
    async with dispatcher(tmp_path, model, context, fetch_page) as (d, ch):
        await d.handle_inbound(
            ch.message("Please remember: my locker code is 4711.", message_id="m0")
        )
        await ch.wait_for("send", 1)
        for i in range(1, 300):
            await d.handle_inbound(
                ch.message(f"Read page {i} of the chronicle.", message_id=f"m{i}")
            )
            await ch.wait_for("send", i + 1)
    answers = ch.texts()
    assert len(answers) == 300 and all(a == "I read it: the market is busy." for a in answers)
    assert model.refused == 0 and max(model.counts) <= 6_000
    # folded again and again, but no more than once in ten turns: each fold is a request
    assert 10 <= model.summaries <= 30, model.summaries
    last = model.requests[-1]
    assert "4711" in last.system  # turn 1, through the summary, 299 turns later
    assert "locker code" not in " ".join(m.text or "" for m in last.messages)
    assert all(pairs_intact(spec_json(r)["messages"][1:]) for r in model.requests)


async def test_messages_past_history_limit_are_folded_not_dropped(tmp_path: Path) -> None:
    model = WindowedModel(100_000, lambda _: reply("Sure."))
    context = ContextSettings(window=100_000, history_limit=20)
    async with dispatcher(tmp_path, model, context) as (d, ch):
        await d.handle_inbound(ch.message("My cat is called Miso.", message_id="m0"))
        await ch.wait_for("send", 1)
        for i in range(1, 40):
            await d.handle_inbound(ch.message(f"Small talk {i}.", message_id=f"m{i}"))
            await ch.wait_for("send", i + 1)
    last = model.requests[-1]
    assert model.summaries >= 1 and "Miso" in last.system
    assert len(last.messages) <= 20


async def test_a_turn_of_ten_large_tool_results_is_cut_to_fit_rather_than_refused(
    tmp_path: Path,
) -> None:
    def ten_pages(request: ModelRequest) -> ModelResponse:
        done = sum(1 for m in request.messages if m.role is Role.TOOL)
        if done < 10:
            return calls("fetch_page", {"n": done})
        return reply("All ten pages read.")

    model = WindowedModel(6_000, ten_pages)
    context = ContextSettings(window=6_000)
    async with dispatcher(tmp_path, model, context, fetch_page) as (d, ch):
        await d.handle_inbound(ch.message("Read the first ten pages.", message_id="m1"))
        sent = await ch.wait_for("send")
    assert sent[0].text == "All ten pages read."
    assert model.refused == 0 and len(model.counts) == 11
    last = model.requests[-1].messages
    results = [m.text or "" for m in last if m.role is Role.TOOL]
    assert len(results) == 10  # every result is still there, the earlier ones cut
    assert "more characters cut" in results[0] and len(results[0]) < len(results[-1])


async def test_tool_definitions_over_half_the_budget_are_named_in_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @tool(description="Look things up. " + prose(7_500))
    async def huge_lookup(q: str) -> str:
        return q

    registry = ToolRegistry()
    registry.register(huge_lookup)
    registry.register(fetch_page)
    model = WindowedModel(4_000, lambda _: reply("ok"))
    budget = ContextBudget(model, None, ContextSettings(window=4_000))
    loop = ToolLoop(model, registry, context=budget)
    with caplog.at_level(logging.WARNING, "engine.context._budget"):
        result = await loop.run([Message.user("hi")], TurnContext(ConversationKey("t", "c"), "u"))
    assert result.text == "ok"
    warning = next(r.getMessage() for r in caplog.records if "tool definitions" in r.getMessage())
    assert "huge_lookup" in warning and warning.index("huge_lookup") < warning.index("fetch_page")


async def test_a_chat_on_another_model_is_fitted_to_that_models_window() -> None:
    big = WindowedModel(100_000, lambda _: reply("from big"))
    small = WindowedModel(3_000, lambda _: reply("from small"))
    big.name, small.name = "big", "small"
    windows = {"big": 100_000, "small": 3_000}

    async def discover(name: str) -> WindowInfo:
        return WindowInfo(windows[name], WindowSource.SERVER, "told by the test")

    budget = ContextBudget(big, None, ContextSettings(discover=discover))
    loop = ToolLoop(big, ToolRegistry(), models={"small": small}, context=budget)
    history: list[Message] = []
    for i in range(12):  # about 6,000 tokens: fine for big, twice what small takes
        history += [Message.user(prose(1_000, i)), Message.assistant(prose(1_000, i + 1))]
    history.append(Message.user("And now?"))
    ctx = TurnContext(ConversationKey("t", "c"), "u1", model="small")  # chosen with /settings
    result = await loop.run(history, ctx)
    assert result.text == "from small" and big.requests == []
    assert small.refused == 0 and small.summaries >= 1 and max(small.counts) <= 3_000


# -- against the fake server, through the App ---------------------------------------------


@pytest.fixture
def small(make_config: Callable[..., Config], llm: FakeOpenAI) -> Config:
    llm.context_window = 3_000
    return make_config(llm={"context_window": 3_000})


@asynccontextmanager
async def running(config: Config) -> AsyncIterator[tuple[App, RecordingChannel]]:
    channel = RecordingChannel()
    async with App(config, channels=[channel], extra_tools=(fetch_page, fetch_numbers)) as app:
        app.dispatcher.settings.allowed_users["test"] = {"u1"}
        yield app, channel


def page_then_answer(body: dict[str, Any]) -> Any:
    """Two pages at once after a user message, then a third, then the answer."""
    msgs = body["messages"]
    last_user = max(i for i, m in enumerate(msgs) if m["role"] == "user")
    results = sum(m["role"] == "tool" for m in msgs[last_user:])
    if results == 0:
        return tool_calls([("fetch_page", {"n": 1}), ("fetch_page", {"n": 2})])
    if results == 2:
        return tool_call("fetch_page", {"n": 3})
    return text("Done reading.")


async def say(app: App, ch: RecordingChannel, words: str, n: int) -> str:
    """Send `words` as the chat's n-th message to this channel and return the n-th answer."""
    await app.dispatcher.handle_inbound(ch.message(words))
    return (await ch.wait_for("send", n))[-1].text


def chat_requests(llm: FakeOpenAI) -> list[dict[str, Any]]:
    return [r for r in llm.requests if not is_summary_request(r)]


async def test_tool_call_and_result_pairs_stay_together_after_compaction(
    small: Config, llm: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    llm.default = page_then_answer
    async with running(small) as (app, ch):
        for n in range(1, 16):
            assert await say(app, ch, f"Read pages again, round {n}.", n) == "Done reading."
    assert llm.summary_requests and llm.refused == 0
    for body in chat_requests(llm):
        assert pairs_intact(body["messages"][1:]), body["messages"]
    assert not [r for r in caplog.records if "pairing" in r.getMessage()]
    with sqlite3.connect(small.storage.resolved_path()) as db:
        (spent,) = db.execute("SELECT SUM(prompt_tokens) FROM usage").fetchone()
    assert spent == sum(llm.prompt_counts)  # summaries count against the user's tokens too


async def test_an_overflow_is_learned_then_folded_and_retried_once(
    small: Config, llm: FakeOpenAI
) -> None:
    def answer(body: dict[str, Any]) -> Any:
        last = body["messages"][-1]
        if last["role"] == "user" and "numbers" in last["content"]:
            return tool_call("fetch_numbers", {"n": 3_000})
        if last["role"] == "user":
            return tool_call("fetch_page", {"n": 1})
        return text("Noted.")

    llm.default = answer
    path = small.storage.resolved_path()
    async with running(small) as (app, ch):
        for n in range(1, 4):
            await say(app, ch, f"Read page one, time {n}.", n)
        summaries_before = len(llm.summary_requests)
        # Digits and commas cost the provider far more tokens than their length suggests.
        assert await say(app, ch, "Now read the numbers table.", 4) == "Noted."
    assert llm.refused == 1
    refused_at = llm.prompt_counts.index(next(c for c in llm.prompt_counts if c > 3_000))
    after = llm.prompt_counts[refused_at + 1 :]
    assert len(llm.summary_requests) > summaries_before  # folded harder before the retry
    assert max(after) <= 3_000
    with sqlite3.connect(path) as db:
        (ratio,) = db.execute("SELECT ratio FROM token_ratios WHERE model='fake-model'").fetchone()
    assert ratio > 1.5  # learned from the refusal's own count


async def test_a_window_too_small_for_the_system_prompt_gets_a_clear_message(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    config = make_config(llm={"context_window": 1_000, "system_prompt": prose(5_000)})
    async with running(config) as (app, ch):
        answer = await say(app, ch, "hello?", 1)
    assert "too small even for my instructions" in answer and "context_window" in answer
    assert llm.requests == []  # nothing the model would refuse was sent
    with sqlite3.connect(config.storage.resolved_path()) as db:
        assert db.execute("SELECT content FROM messages").fetchall() == [("hello?",)]


async def test_the_summary_survives_a_restart_and_is_not_recomputed(
    small: Config, llm: FakeOpenAI
) -> None:
    llm.default = lambda body: (
        tool_call("fetch_page", {"n": 4}) if body["messages"][-1]["role"] == "user" else text("ok")
    )
    async with running(small) as (app, ch):
        await say(app, ch, "My name is Ida and I live in Porto.", 1)
        n = 1
        while not llm.summary_requests:
            n += 1
            await say(app, ch, f"Read page four, time {n}.", n)
    with sqlite3.connect(small.storage.resolved_path()) as db:
        (stored,) = db.execute("SELECT text FROM summaries").fetchone()
    assert "Porto" in stored
    summaries = len(llm.summary_requests)
    llm.default = lambda body: text("In Porto.")
    async with running(small) as (app, ch):
        assert await say(app, ch, "Where do I live?", 1) == "In Porto."
    first = chat_requests(llm)[-1]
    assert stored in first["messages"][0]["content"]
    assert "Porto" not in "".join(str(m.get("content")) for m in first["messages"][1:])
    assert len(llm.summary_requests) == summaries


async def test_compact_folds_the_history_and_says_how_much_it_saved(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    llm.default = lambda body: (
        tool_call("fetch_page", {"n": 2}) if body["messages"][-1]["role"] == "user" else text("ok")
    )
    async with running(make_config()) as (app, ch):
        for n in range(1, 4):
            await say(app, ch, f"Please read page two ({n}).", n)
        d = app.dispatcher
        said = (await d.handle_command(ch.message("/compact"), Command.COMPACT)).text
        again = (await d.handle_command(ch.message("/compact"), Command.COMPACT)).text
        await say(app, ch, "And now?", 4)
    assert said.startswith("Condensed 8 messages into a summary") and "saved" in said
    found = re.search(r"about ([\d,]+) tokens of conversation instead of ([\d,]+)", said)
    assert found is not None
    after, before = (int(g.replace(",", "")) for g in found.groups())
    assert before > after
    assert "Nothing to condense" in again
    first = chat_requests(llm)[-2]  # the next turn: the summary, the last turn whole, the new one
    roles = [m["role"] for m in first["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert "Earlier in this conversation, in brief" in first["messages"][0]["content"]
    assert "(3)" in first["messages"][1]["content"]


async def test_compact_says_so_when_the_models_summary_comes_back_cut(
    make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    """A summary cut by the length limit (twice) is not stored: /compact must not claim it
    condensed anything."""
    llm.summarizer = lambda body: text("summary " * 50, finish_reason="length")
    async with running(make_config()) as (app, ch):
        for n in range(1, 4):
            await say(app, ch, f"Tell me more ({n}).", n)
        d = app.dispatcher
        said = (await d.handle_command(ch.message("/compact"), Command.COMPACT)).text
    assert said.startswith("I could not condense the conversation now")
    assert len(llm.summary_requests) == 2  # asked again for fewer words, cut again: not stored


# -- the estimate, the window, the providers' wordings ------------------------------------


async def test_the_estimate_converges_to_the_providers_count(
    tmp_path: Path, llm: FakeOpenAI
) -> None:
    model = OpenAIModel(base_url=llm.base_url, api_key="k", model="fake-model", max_retries=0)
    errors: list[float] = []
    async with SqliteStore(tmp_path / "r.db") as store:
        budget = ContextBudget(model, store.context, ContextSettings(window=100_000))
        history: list[Message] = []
        for i in range(12):
            history += [Message.user(f"Tell me about page {i}."), Message.assistant(prose(900, i))]
            fitted = await budget.fit(Window(), history, "Be brief.", [])
            ratio = (await budget.ratios.get("fake-model")).ratio
            predicted = ratio * fitted.estimate
            response = await model.complete(fitted.request)
            actual = response.usage.prompt_tokens
            assert actual == llm.prompt_counts[-1]
            errors.append(abs(predicted - actual) / actual)
            await budget.learn(fitted, response.usage)
        learned = (await budget.ratios.get("fake-model")).ratio
        again = ContextBudget(model, store.context, ContextSettings(window=100_000))
        remembered = (await again.ratios.get("fake-model")).ratio
    await model.aclose()
    assert errors[0] > 0.15  # the bare estimate is off ...
    assert max(errors[-5:]) < 0.05  # ... the corrected one is not
    assert abs(remembered - learned) / learned < 0.06  # kept in the store


@pytest.mark.parametrize(
    ("kind", "model", "window", "source"),
    [
        ("vllm", "fake-model", 8_192, WindowSource.SERVER),
        ("llama.cpp", "fake-model", 4_096, WindowSource.SERVER),
        ("ollama", "fake-model", 16_384, WindowSource.SERVER),
        ("openai", "gpt-4o-mini", 128_000, WindowSource.TABLE),
        ("openai", "fake-model", 32_000, WindowSource.DEFAULT),
    ],
)
async def test_the_window_is_asked_of_the_server_then_the_table(
    kind: str, model: str, window: int, source: WindowSource
) -> None:
    async with FakeOpenAI(models=[model], context_window=8_192, server_kind=kind) as server:
        if kind != "vllm":
            server.context_window = window if source is WindowSource.SERVER else None
        info = await discover_window(server.base_url, "k", model)
    assert (info.tokens, info.source) == (window, source)
    configured = await discover_window("http://127.0.0.1:9/v1", "k", model, 6_000)
    assert (configured.tokens, configured.source) == (6_000, WindowSource.CONFIG)


@pytest.mark.parametrize("kind", ["openai", "vllm", "llama.cpp"])
async def test_each_servers_refusal_is_an_overflow_with_its_numbers(kind: str) -> None:
    async with FakeOpenAI(context_window=50, server_kind=kind) as server:
        model = OpenAIModel(base_url=server.base_url, api_key="k", model="fake-model")
        with pytest.raises(ContextOverflow) as exc:
            await model.complete(ModelRequest("", [Message.user(prose(400))]))
        await model.aclose()
    facts = overflow_facts(str(exc.value))
    assert facts.window == 50 and facts.prompt_tokens == server.prompt_counts[0]


def test_anthropics_overflow_wording_gives_its_numbers_too() -> None:
    facts = overflow_facts(
        "the model endpoint answered 400: prompt is too long: 210000 tokens > 200000 maximum"
    )
    assert (facts.window, facts.prompt_tokens) == (200_000, 210_000)


async def test_doctor_says_which_window_and_why(
    tmp_path: Path, make_config: Callable[..., Config], llm: FakeOpenAI
) -> None:
    from bot._doctor_llm import check_context as _check_context

    llm.server_kind, llm.context_window = "vllm", 8_192
    check = await _check_context(make_config())
    assert check.status == "OK"
    assert "window 8,192 tokens for fake-model" in check.detail
    assert "max_model_len" in check.detail and "prompt tokens" in check.detail
