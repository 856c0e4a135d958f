"""`[tools.run_command]` is read anew on SIGHUP: a daemon whose commands had no network gets it
after the owner sets `network = true` and reloads, and the command reaches a listener on
127.0.0.1 it could not reach before. The real CLI in a subprocess, the real bwrap, the requester
pressing "Allow once" through python-telegram-bot against the fake Bot API."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.fakes.notify_socket import NotifySocket
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.telegram_server import FakeTelegram
from tests.sandbox import require_bwrap
from tests.test_reload import Lines, config_text, to
from tests.test_security_sandbox import Listener, connect

ALICE = 101


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


def tool_results(llm: FakeOpenAI) -> list[str]:
    return [m["content"] for r in llm.requests for m in r["messages"][-1:] if m["role"] == "tool"]


async def run_allowed(tg: FakeTelegram, llm: FakeOpenAI, nth: int, answer: str) -> None:
    """Alice asks; the model calls run_command; she presses "Allow once"; the answer comes."""
    tg.inject_message(ALICE, ALICE, "please connect")
    call = await tg.wait_for_call(
        "sendMessage", lambda p: "reply_markup" in p, count=nth, timeout=30
    )
    button = call.params["reply_markup"]["inline_keyboard"][0][0]
    assert button["text"] == "Allow once"
    prompt = max(mid for chat, mid in tg.messages if chat == ALICE)
    tg.inject_callback(ALICE, ALICE, prompt, button["callback_data"])
    await tg.wait_for_call("sendMessage", to(ALICE, answer), timeout=30)


async def test_sighup_gives_commands_the_network(
    tmp_path: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    require_bwrap()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    cfg = tmp_path / "config.toml"
    base = config_text(tmp_path, llm, tg, f'"{ALICE}"', "You are A.").replace(
        "builtins = []", f'builtins = ["run_command"]\nworkspace = "{workspace}"'
    )
    cfg.write_text(base)
    listener = Listener()
    async with listener as port:
        command = {"command": connect(port)}
        llm.script(
            tool_call("run_command", command),
            text("first done"),
            tool_call("run_command", command),
            text("second done"),
        )
        with NotifySocket(tmp_path) as sock:
            env = {
                **os.environ,
                "NOTIFY_SOCKET": sock.address,
                "RB_TEST_API_KEY": "sk-reload-key-123456",
                "RB_TEST_TG_TOKEN": tg.token,
            }
            proc = await asyncio.create_subprocess_exec(
                *(sys.executable, "-m", "bot", "run", "-c", str(cfg)),
                env=env,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )
            assert proc.stderr is not None
            err = Lines(proc.stderr)
            try:
                await asyncio.to_thread(sock.wait_for, "READY", None, 30)
                await run_allowed(tg, llm, 1, "first done")
                assert listener.received.empty()

                cfg.write_text(base + "[tools.run_command]\nnetwork = true\n")
                proc.send_signal(signal.SIGHUP)
                await asyncio.to_thread(sock.wait_for, "RELOADING", None, 20)
                await asyncio.to_thread(sock.wait_for, "READY", None, 20)
                await err.wait_for("config reloaded")

                await run_allowed(tg, llm, 2, "second done")
                assert await asyncio.wait_for(listener.received.get(), 10) == b"hello"
                proc.send_signal(signal.SIGTERM)
                assert await asyncio.wait_for(proc.wait(), 30) == 0
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
    first, second = tool_results(llm)
    assert "ConnectionRefusedError" in first and "connected" not in first
    assert second == "Exit code 0.\nconnected\n"
