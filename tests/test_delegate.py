"""delegate end to end over Telegram (the real App and python-telegram-bot against the fakes): the
helper's request holds the task alone and the tools named, its answer comes back as a follow-up,
a destructive call in it asks the requesting user with buttons, its tokens count in the user's
usage, and a task cut off by a restart runs again after it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from bot.app import App
from bot.config import Config
from engine.chat._jobs._delegate import SYSTEM
from tests.fakes.openai_server import FakeOpenAI, Reply, hold, text, tool_call
from tests.fakes.telegram_server import FakeTelegram
from tools import tool

DM = 1001
deleted: list[str] = []


@tool(destructive=True, summary="Delete the file {name}")
async def delete_file(name: str) -> str:
    """Delete a file for good."""
    deleted.append(name)
    return f"deleted {name}"


@pytest.fixture(autouse=True)
def _reset() -> None:
    deleted.clear()


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
def config(make_config: Callable[..., Config], tg: FakeTelegram) -> Config:
    telegram = {
        "enabled": True,
        "token": tg.token,
        "api_base_url": tg.base_url,
        "allowed_users": ["*"],
        "poll_timeout_s": 5,
    }
    tools = {"builtins": ["current_time", "delegate"], "delegate_max_iterations": 4}
    return make_config(telegram=telegram, tools=tools)


def is_helper(body: dict[str, Any]) -> bool:
    return body["messages"][0]["content"] == SYSTEM


def last(body: dict[str, Any]) -> str:
    return str(body["messages"][-1].get("content") or "")


class Router:
    """Answers the chat's turns and the helper's requests apart (they may come in any order)."""

    def __init__(self, task: dict[str, Any], helper: list[Reply]) -> None:
        self.task = task
        self.helper = helper
        self.gate: asyncio.Event | None = None  # holds the helper's first request when set

    def __call__(self, body: dict[str, Any]) -> Reply:
        if is_helper(body):
            reply = self.helper.pop(0)
            if self.gate is not None:
                gate, self.gate = self.gate, None
                self.helper.insert(0, reply)  # asked again after the restart
                return hold(gate, reply)
            return reply
        if "The delegated task's answer" in last(body):
            return text("The helper reports: " + last(body).split("answer: ")[1])
        if "Started in the background" in last(body):
            return text("A helper is on it.")
        return tool_call("delegate", self.task)


def dm_texts(tg: FakeTelegram) -> list[str]:
    return [c.params["text"] for c in tg.calls_of("sendMessage") if c.params["chat_id"] == DM]


async def test_a_delegated_task_runs_apart_and_its_answer_comes_back(
    config: Config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    task = {"task": "Find out what time it is.", "tools": ["current_time"]}
    llm.default = Router(task, [tool_call("current_time", {}), text("It is noon.")])
    async with App(config) as app:
        tg.inject_message(DM, DM, "what time is it? ask a helper")
        await tg.wait_for_call("sendMessage", lambda p: "reports" in p.get("text", ""))
        await app.dispatcher.wait_idle("telegram", str(DM))  # the follow-up turn recorded
        usage = await app.store.usage.totals("telegram", str(DM), "20")
    assert dm_texts(tg) == ["A helper is on it.", "The helper reports: It is noon."]
    first, second = [b for b in llm.requests if is_helper(b)]
    assert [m["role"] for m in first["messages"]] == ["system", "user"]  # the task alone
    assert last(first) == "Find out what time it is."
    assert [t["function"]["name"] for t in first["tools"]] == ["current_time"]
    assert second["messages"][-1]["role"] == "tool"  # the helper ran its tool
    assert usage.prompt_tokens == sum(llm.prompt_counts)  # the helper's requests count too


async def test_a_destructive_call_in_a_delegated_task_asks_the_user(
    config: Config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    task = {"task": "Delete the file a.txt.", "tools": ["delete_file"]}
    llm.default = Router(task, [tool_call("delete_file", {"name": "a.txt"}), text("Deleted.")])
    async with App(config, extra_tools=(delete_file,)):
        tg.inject_message(DM, DM, "have a helper delete a.txt")
        asked = await tg.wait_for_call("sendMessage", lambda p: "reply_markup" in p)
        buttons = [b for row in asked.params["reply_markup"]["inline_keyboard"] for b in row]
        assert "Delete the file a.txt" in asked.params["text"] and deleted == []
        allow = next(b for b in buttons if b["text"] == "Allow once")
        prompt = max(mid for chat, mid in tg.messages if chat == DM)
        tg.inject_callback(DM, 2002, prompt, allow["callback_data"])  # not theirs to answer
        tg.inject_callback(DM, DM, prompt, allow["callback_data"])
        await tg.wait_for_call("sendMessage", lambda p: "reports" in p.get("text", ""))
        await tg.wait_for_call("editMessageText", lambda p: "Done" in p["text"])
    assert deleted == ["a.txt"]
    assert dm_texts(tg)[-1] == "The helper reports: Deleted."
    answers = [c.params.get("text", "") for c in tg.calls_of("answerCallbackQuery")]
    assert answers[0].startswith("Only") and answers[1] == "Confirmed."


async def test_a_delegated_task_cut_off_by_a_restart_runs_again(
    config: Config, tg: FakeTelegram, llm: FakeOpenAI
) -> None:
    router = Router({"task": "Say hello."}, [text("Hello from the helper.")])
    router.gate = asyncio.Event()  # never set: the first try is cut off by the restart
    llm.default = router
    async with App(config):
        tg.inject_message(DM, DM, "get a helper to say hello")
        await tg.wait_for_call("sendMessage", lambda p: p.get("chat_id") == DM)
        await llm.wait_requests(3)  # the helper's first request, held
    async with App(config):
        await tg.wait_for_call("sendMessage", lambda p: "reports" in p.get("text", ""))
    assert dm_texts(tg) == ["A helper is on it.", "The helper reports: Hello from the helper."]
