"""Tool progress (issue 33): while a turn runs tools, one status message with a line per step,
edited in place within the platform's edit rate and deleted once the turn is over; it never holds
up the answer. End to end through the real daemon and python-telegram-bot against the fake Bot
API; synchronisation on recorded calls and on events the test tools wait for, never on sleeps."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from bot.app import App
from bot.config import Config
from engine.chat._turns._progress import Progress, step_line
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.telegram_server import FakeTelegram
from tests.test_telegram import telegram_config
from tools import Tool, ToolResult, tool

DM = 1001
gates: dict[str, asyncio.Event] = {}


@tool
async def lookup(query: str) -> str:
    """Look something up."""
    await gates[query].wait()
    return f"found {query}"


class ArchiveSearch(Tool):
    """A tool that says in its own words what it is doing."""

    name = "archive_search"
    description = "Search the archive."
    parameters = {"type": "object", "properties": {"term": {"type": "string"}}}

    async def execute(self, args: dict[str, Any]) -> ToolResult:
        await gates[args["term"]].wait()
        return ToolResult(for_llm=f"found {args['term']}")

    def describe_step(self, args: dict[str, Any]) -> str | None:
        return f"Searching the archive for “{args['term']}”"


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
def config(
    make_config: Callable[..., Config], tg: FakeTelegram, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Config]:
    gates.clear()
    monkeypatch.setattr(Progress, "show_after_s", 0.0)  # show the first step at once
    return functools.partial(telegram_config, make_config, tg)


@contextlib.asynccontextmanager
async def daemon(cfg: Config) -> AsyncIterator[App]:
    async with App(cfg, extra_tools=(lookup, ArchiveSearch())) as app:
        yield app


def status(p: dict[str, Any]) -> bool:
    return p.get("text", "").startswith("⏳")


def test_a_step_line_names_the_tool_and_its_first_text_argument() -> None:
    assert step_line("web_search", {"query": "relaybot release notes"}) == (
        "🔎 web_search: relaybot release notes"
    )
    assert step_line("slow_report", {"n": 3}) == "⏳ slow_report"
    long = step_line("lookup", {"q": "word " * 40})
    assert long.endswith("…") and len(long) < 80


async def test_a_status_line_per_step_edited_in_place_then_removed(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    gates["first"], gates["second"] = asyncio.Event(), asyncio.Event()
    llm.script(
        tool_call("lookup", {"query": "first"}),
        tool_call("lookup", {"query": "second"}),
        text("Both found."),
    )
    async with daemon(config()):
        tg.inject_message(DM, DM, "look both up")
        shown = await tg.wait_for_call("sendMessage", status)
        assert shown.params["text"] == "⏳ lookup: first"
        gates["first"].set()
        await tg.wait_for_call("editMessageText", lambda p: p["text"].endswith("second"))
        gates["second"].set()
        answer = await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "Both found.")
        await tg.wait_for_call("deleteMessage")
    status_id = next(c for c in tg.calls_of("deleteMessage")).params["message_id"]
    edit = tg.calls_of("editMessageText")[0].params
    assert edit["message_id"] == status_id and edit["text"] == "⏳ lookup: first\n⏳ lookup: second"
    assert tg.chat_texts(DM) == ["Both found."]  # the status message is gone
    assert (
        answer.params["reply_parameters"]["message_id"]
        == shown.params["reply_parameters"]["message_id"]
    )


async def test_a_tool_may_describe_its_own_step(config, tg: FakeTelegram, llm: FakeOpenAI) -> None:
    gates["tea"] = asyncio.Event()
    llm.script(tool_call("archive_search", {"term": "tea"}), text("Found it."))
    async with daemon(config()):
        tg.inject_message(DM, DM, "search the archive for tea")
        shown = await tg.wait_for_call("sendMessage", status)
        gates["tea"].set()
        await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "Found it.")
    assert shown.params["text"] == "⏳ Searching the archive for “tea”"


async def test_a_slow_status_message_never_holds_up_the_answer(
    config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    gates["x"] = asyncio.Event()
    llm.script(tool_call("lookup", {"query": "x"}), text("Found x."))
    held = tg.hold("sendMessage", status)  # Telegram is slow to take the status message
    async with daemon(config()):
        tg.inject_message(DM, DM, "look x up")
        await asyncio.wait_for(held.arrived.wait(), 5)
        gates["x"].set()  # the tool is done while the status message is still on its way
        await tg.wait_for_call("sendMessage", lambda p: p.get("text") == "Found x.")
        assert held.call is not None and not held.call.answered
        tg.unhold(held)
        await tg.wait_for_call("deleteMessage")
    assert tg.chat_texts(DM) == ["Found x."]


async def test_tool_progress_off_shows_nothing(config, tg: FakeTelegram, llm: FakeOpenAI) -> None:
    gates["x"] = asyncio.Event()
    gates["x"].set()
    llm.script(tool_call("lookup", {"query": "x"}), text("Found x."))
    cfg = config()
    cfg.engine.tool_progress = False
    async with daemon(cfg):
        tg.inject_message(DM, DM, "look x up")
        await tg.wait_for_call("sendMessage")
    assert [c.params["text"] for c in tg.calls_of("sendMessage")] == ["Found x."]
