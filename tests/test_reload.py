"""Live reload (issue 29): `relaybot run` takes SIGHUP (what `systemctl reload` sends), checks the
file as check-config does, and puts who may use the bot, the system prompt and limits in force
for turns that start afterwards, with no message dropped or answered twice; a file with a
mistake is refused with check-config's words and the running config stays. The real CLI in a
subprocess, the real python-telegram-bot against the fake Bot API, the fake LLM over HTTP."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.notify_socket import NotifySocket
from tests.fakes.openai_server import FakeOpenAI, echo, error, hold, text
from tests.fakes.telegram_server import FakeTelegram
from tests.test_cli import finish, relaybot

ALICE, BOB = 101, 202
NEW = "sk-reloaded-key-987654"  # the key a reload brings


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


def config_text(tmp_path: Path, llm: FakeOpenAI, tg: FakeTelegram, users: str, prompt: str) -> str:
    return f"""
[llm]
base_url = "{llm.base_url}"
api_key_env = "RB_TEST_API_KEY"
model = "fake-model"
max_retries = 0
system_prompt = "{prompt}"
[storage]
path = "{tmp_path / "state.db"}"
[telegram]
enabled = true
token_env = "RB_TEST_TG_TOKEN"
api_base_url = "{tg.base_url}"
poll_timeout_s = 5
allowed_users = [{users}]
[access]
pairing = false
[tools]
builtins = []
"""


class Lines:
    """The daemon's stderr, line by line, with a wait for a line matching a pattern."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self.lines: list[str] = []
        self._changed = asyncio.Condition()
        self._task = asyncio.create_task(self._read(stream))

    async def _read(self, stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            async with self._changed:
                self.lines.append(line.decode(errors="replace"))
                self._changed.notify_all()

    async def wait_for(self, pattern: str, count: int = 1) -> list[str]:
        def found() -> list[str]:
            return [line for line in self.lines if re.search(pattern, line)]

        async with asyncio.timeout(20), self._changed:
            await self._changed.wait_for(lambda: len(found()) >= count)
        return found()


def to(chat: int, part: str) -> Any:
    return lambda p: p.get("chat_id") == chat and part in p.get("text", "")


async def test_sighup_lets_a_user_in_and_changes_the_persona_without_losing_a_message(
    tmp_path: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    llm.default = echo
    cfg = tmp_path / "config.toml"
    cfg.write_text(config_text(tmp_path, llm, tg, f'"{ALICE}"', "You are A."))
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
            tg.inject_message(BOB, BOB, "let me in")
            await tg.wait_for_call("sendMessage", to(BOB, "not allowed"))
            # a turn is running while the reload happens: it finishes as it began, once
            release = asyncio.Event()
            llm.script(hold(release, text("held answer")))
            tg.inject_message(ALICE, ALICE, "first")
            await llm.wait_requests(1, timeout=20)
            tg.inject_message(ALICE, ALICE, "second")  # queued behind the running turn
            cfg.write_text(
                config_text(tmp_path, llm, tg, f'"{ALICE}", "{BOB}"', "You are B.").replace(
                    "poll_timeout_s = 5", "poll_timeout_s = 6"
                )
            )
            proc.send_signal(signal.SIGHUP)
            await asyncio.to_thread(sock.wait_for, "RELOADING", None, 20)
            await asyncio.to_thread(sock.wait_for, "READY", None, 20)
            await err.wait_for("config reloaded")
            [later] = await err.wait_for("not changed until a restart")
            assert "telegram.poll_timeout_s" in later and "allowed_users" not in later
            release.set()
            await tg.wait_for_call("sendMessage", to(ALICE, "held answer"))
            await tg.wait_for_call("sendMessage", to(ALICE, "echo: second"))
            tg.inject_message(BOB, BOB, "now?")
            await tg.wait_for_call("sendMessage", to(BOB, "echo: now?"))
            systems = [r["messages"][0]["content"] for r in llm.requests]
            assert systems[0].startswith("You are A.")  # the turn in flight kept its prompt
            assert systems[-1].startswith("You are B.")  # the new persona, for new turns
            # a mistake: refused with check-config's words, the running config stays
            cfg.write_text(cfg.read_text().replace("pairing = false", 'pairing = "no"'))
            code, _, checked = await finish(*await relaybot("check-config", "-c", str(cfg)))
            assert code == 78
            reason = checked.strip().removeprefix("relaybot: config error: ")
            proc.send_signal(signal.SIGHUP)
            [refused] = await err.wait_for("the running config stays")
            assert reason.split(",")[0] in refused.replace('\\"', '"')
            tg.inject_message(BOB, BOB, "still?")
            await tg.wait_for_call("sendMessage", to(BOB, "echo: still?"))
            cfg.write_text(cfg.read_text().replace('pairing = "no"', "pairing = false"))
            code, out, _ = await finish(*await relaybot("status", "-c", str(cfg)))
            assert f"daemon: running (pid {proc.pid}); config loaded" in out
            assert "waiting for a restart: telegram.poll_timeout_s" in out
            # a key the reload brings is kept out of the log too (an error that echoes it)
            key = cfg.read_text().replace('api_key_env = "RB_TEST_API_KEY"', f'api_key = "{NEW}"')
            cfg.write_text(key)
            proc.send_signal(signal.SIGHUP)
            await err.wait_for("config reloaded", count=2)
            llm.script(error(401, f"Incorrect API key provided: {NEW}."))
            tg.inject_message(BOB, BOB, "and now?")
            await tg.wait_for_call("sendMessage", lambda p: p.get("chat_id") == BOB, count=4)
            await err.wait_for("Incorrect API key provided: \\*\\*\\*")
            proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(proc.wait(), 30) == 0
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    answers = [c.params["text"] for c in tg.calls_of("sendMessage")]
    for each in ("held answer", "echo: second", "echo: now?", "echo: still?"):
        assert answers.count(each) == 1, answers
    assert "sk-reload-key-123456" not in "".join(err.lines)
    assert NEW not in "".join(err.lines)


async def test_sighup_with_a_file_that_cannot_be_read_keeps_the_running_config(
    tmp_path: Path, llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    llm.default = echo
    cfg = tmp_path / "config.toml"
    good = config_text(tmp_path, llm, tg, f'"{ALICE}"', "You are A.")
    cfg.write_text(good)
    env = {**os.environ, "RB_TEST_API_KEY": "sk-reload-key-123456", "RB_TEST_TG_TOKEN": tg.token}
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
        await err.wait_for("relaybot .* running")
        # saved by an editor in Latin-1: "André" is one byte 0xe9, not UTF-8
        cfg.write_bytes(good.replace("You are A.", "You are Andr\xe9.").encode("latin-1"))
        proc.send_signal(signal.SIGHUP)
        [refused] = await err.wait_for("the running config stays")
        assert f"{cfg} is not UTF-8 text: byte 0xe9 on line 7" in refused
        tg.inject_message(ALICE, ALICE, "still there?")
        await tg.wait_for_call("sendMessage", to(ALICE, "echo: still there?"))
        cfg.unlink()
        cfg.mkdir()  # not a file at all
        proc.send_signal(signal.SIGHUP)
        [*_, unreadable] = await err.wait_for("the running config stays", 2)
        assert f"cannot read {cfg}: Is a directory" in unreadable
        cfg.rmdir()
        cfg.write_text(good.replace("You are A.", "You are B."))
        proc.send_signal(signal.SIGHUP)
        await err.wait_for("config reloaded")
        tg.inject_message(ALICE, ALICE, "and now?")
        await tg.wait_for_call("sendMessage", to(ALICE, "echo: and now?"))
        assert llm.requests[-1]["messages"][0]["content"].startswith("You are B.")
        assert proc.returncode is None
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert not [line for line in err.lines if "Traceback" in line], "".join(err.lines)
