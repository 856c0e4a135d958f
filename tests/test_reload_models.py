"""Live reload of the model and tools (issue 29): SIGHUP builds the new model and tool registry
(a plugin added) and puts them in force for turns that start afterwards; a turn running across
the reload keeps the model and tools it started with to its end; no message is lost or
answered twice. The real CLI in a subprocess, python-telegram-bot against the fake Bot API, the
fake LLM over HTTP."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.notify_socket import NotifySocket
from tests.fakes.openai_server import FakeOpenAI, hold, text, tool_call
from tests.fakes.telegram_server import FakeTelegram
from tests.test_reload import Lines, config_text, to

ALICE, BOB = 101, 202
PLUGIN = '''
from tools import tool


@tool
def order_status(order_id: str) -> str:
    """Where an order is: packed, shipped or delivered."""
    return f"order {order_id} is shipped"
'''


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


def _tools(request: dict[str, Any]) -> list[str]:
    return sorted(t["function"]["name"] for t in request.get("tools", []))


async def test_sighup_changes_the_model_and_adds_a_plugin_tool_for_new_turns_only(
    tmp_path: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    cfg = tmp_path / "config.toml"
    users = f'"{ALICE}", "{BOB}"'
    first = config_text(tmp_path, llm, tg, users, "You are A.")
    first = first.replace('model = "fake-model"', 'model = "model-a"')
    cfg.write_text(first.replace("builtins = []", 'builtins = ["current_time"]'))
    with NotifySocket(tmp_path) as sock:
        env = {
            **os.environ,
            "NOTIFY_SOCKET": sock.address,
            "RB_TEST_API_KEY": "sk-reload-key-123456",
            "RB_TEST_TG_TOKEN": tg.token,
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot",
            "run",
            "-c",
            str(cfg),
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        assert proc.stderr is not None
        err = Lines(proc.stderr)
        try:
            await asyncio.to_thread(sock.wait_for, "READY", None, 30)
            # A turn that asks for a tool while the reload happens: its next request, after
            # the reload, still goes to model-a with the old tools.
            release = asyncio.Event()
            llm.script(
                hold(release, tool_call("current_time", {})),
                text("held answer"),
                tool_call("order_status", {"order_id": "7"}),
                text("Order 7 is shipped."),
                text("Bob, hello."),
            )
            tg.inject_message(ALICE, ALICE, "what time is it?")
            await llm.wait_requests(1, timeout=20)
            tg.inject_message(ALICE, ALICE, "where is order 7?")  # queued behind it
            (tmp_path / "shop_tools.py").write_text(PLUGIN)  # next to the config
            second = config_text(tmp_path, llm, tg, users, "You are A.")
            second = second.replace('model = "fake-model"', 'model = "model-b"')
            cfg.write_text(
                second.replace(
                    "builtins = []", 'builtins = ["current_time"]\nplugins = ["shop_tools"]'
                )
            )
            proc.send_signal(signal.SIGHUP)
            await asyncio.to_thread(sock.wait_for, "RELOADING", None, 20)
            await asyncio.to_thread(sock.wait_for, "READY", None, 20)
            await err.wait_for("config reloaded")
            [changed] = await err.wait_for("model: model-b")
            assert "was model-a" in changed
            release.set()
            await tg.wait_for_call("sendMessage", to(ALICE, "held answer"))
            await tg.wait_for_call("sendMessage", to(ALICE, "Order 7 is shipped."))
            tg.inject_message(BOB, BOB, "hi")  # another chat, after the reload
            await tg.wait_for_call("sendMessage", to(BOB, "Bob, hello."))
            proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(proc.wait(), 30) == 0
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    logged = "".join(err.lines)
    assert "Traceback" not in logged and "replaced failed" not in logged, logged
    requests = llm.requests
    assert len(requests) == 5, [r["messages"][-1] for r in requests]
    held, after_tool = requests[0], requests[1]
    assert held["model"] == after_tool["model"] == "model-a"  # the whole turn on model-a
    assert _tools(held) == _tools(after_tool) == ["current_time"]
    assert after_tool["messages"][-1]["role"] == "tool"  # the held turn's second request
    for later in requests[2:]:
        assert later["model"] == "model-b"
        assert _tools(later) == ["current_time", "order_status"]
    assert requests[3]["messages"][-1]["content"] == "order 7 is shipped"  # the plugin ran
    answers = [c.params["text"] for c in tg.calls_of("sendMessage")]
    for each in ("held answer", "Order 7 is shipped.", "Bob, hello."):
        assert answers.count(each) == 1, answers
