"""The `relaybot` command as a user runs it: subprocesses, piped stdin, signals, crashes."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from bot.config import parse_config
from tests.fakes.openai_server import FakeOpenAI, hold, text, tool_call
from tools import ConfigError


def write_config(
    tmp_path: Path, llm: FakeOpenAI, tools: str = 'builtins = ["current_time"]'
) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        f"""
[llm]
base_url = "{llm.base_url}"
api_key_env = "RELAYBOT_TEST_KEY"
model = "fake-model"
max_retries = 0

[storage]
path = "{tmp_path / "state.db"}"

[tools]
{tools}
"""
    )
    return path


async def relaybot(
    *args: str, stdin: bytes | None = None
) -> tuple[asyncio.subprocess.Process, asyncio.Task[tuple[bytes, bytes]]]:
    env = {**os.environ, "RELAYBOT_TEST_KEY": "sk-secret-test-key-987654"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    return proc, asyncio.create_task(proc.communicate(stdin))


async def finish(proc: asyncio.subprocess.Process, io: asyncio.Task) -> tuple[int, str, str]:
    out, err = await asyncio.wait_for(io, 30)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_chat_answers_piped_lines(tmp_path: Path, llm: FakeOpenAI) -> None:
    cfg = write_config(tmp_path, llm)
    llm.script(text("Hi! I'm relaybot."), tool_call("current_time", {}), text("It is noon."))
    proc, io = await relaybot("chat", "-c", str(cfg), stdin=b"hello\nwhat time is it?\n")
    code, out, err = await finish(proc, io)
    assert code == 0, err
    assert out.splitlines() == ["Hi! I'm relaybot.", "It is noon."]
    assert llm.auth_headers[0] == "Bearer sk-secret-test-key-987654"
    assert "sk-secret-test-key-987654" not in err  # the key never reaches the logs


async def test_chat_confirmation_prompt(tmp_path: Path, llm: FakeOpenAI) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "old.txt").write_text("bye")
    cfg = write_config(tmp_path, llm, f'builtins = ["delete_file"]\nworkspace = "{workspace}"')
    llm.script(tool_call("delete_file", {"path": "old.txt"}), text("Deleted old.txt."))
    proc, io = await relaybot("chat", "-c", str(cfg), stdin=b"delete old.txt\ny\n")
    code, out, err = await finish(proc, io)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("Confirm:") and "old.txt" in lines[0] and lines[0].endswith("[y/n]")
    assert "Deleted old.txt." in lines
    assert not (workspace / "old.txt").exists()


async def test_unfinished_turn_recovered_after_kill(tmp_path: Path, llm: FakeOpenAI) -> None:
    cfg = write_config(tmp_path, llm)
    stuck = asyncio.Event()
    llm.script(hold(stuck, text("too late")))
    proc, io = await relaybot("chat", "-c", str(cfg), stdin=None)
    assert proc.stdin is not None
    io.cancel()
    proc.stdin.write(b"are you there?\n")
    await proc.stdin.drain()
    await llm.wait_requests(1, timeout=20)  # the turn is in flight...
    proc.kill()  # ...and the process dies (SIGKILL: nothing gets to clean up)
    await proc.wait()
    # Restarted with no new input: the message that never got its answer is answered now.
    llm.script(text("Yes, I'm here."))
    proc2, io2 = await relaybot("chat", "-c", str(cfg), stdin=b"")
    code, out, err = await finish(proc2, io2)
    assert code == 0, err
    assert out.splitlines() == ["Yes, I'm here."]
    assert llm.requests[-1]["messages"][-1] == {"role": "user", "content": "are you there?"}


async def test_sigterm_lets_the_running_turn_finish(tmp_path: Path, llm: FakeOpenAI) -> None:
    cfg = write_config(tmp_path, llm)
    release = asyncio.Event()
    llm.script(hold(release, text("finished anyway")))
    proc, io = await relaybot("chat", "-c", str(cfg), stdin=None)
    assert proc.stdin is not None and proc.stdout is not None
    io.cancel()
    proc.stdin.write(b"long question\n")
    await proc.stdin.drain()
    await llm.wait_requests(1, timeout=20)
    proc.send_signal(signal.SIGTERM)
    release.set()
    out = await asyncio.wait_for(proc.stdout.read(), 30)
    assert await proc.wait() == 0
    assert out.decode().splitlines() == ["finished anyway"]


def test_config_errors_name_the_key() -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config({"llm": {"max_iterations": 0}})
    assert exc.value.key == "llm.max_iterations" and "greater than or equal to 1" in str(exc.value)
    with pytest.raises(ConfigError, match=r"^telegram\.tokn: unknown key"):
        parse_config({"telegram": {"tokn": "x"}})
    with pytest.raises(ConfigError, match="set token or token_env"):
        parse_config({"telegram": {"enabled": True}})


async def test_check_config_explains_a_broken_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[llm]\nmodel = "m"\nrequest_timeout_s = "soon"\n')
    proc, io = await relaybot("check-config", "-c", str(bad))
    code, _, err = await finish(proc, io)
    assert code == 78
    assert "llm.request_timeout_s" in err and "valid number" in err and "Traceback" not in err
    bad.write_text("[llm\n")
    proc, io = await relaybot("check-config", "-c", str(bad))
    code, _, err = await finish(proc, io)
    assert code == 78 and "not valid TOML" in err
    proc, io = await relaybot("check-config", "-c", str(tmp_path / "missing.toml"))
    code, _, err = await finish(proc, io)
    assert code == 78 and "no config file" in err


async def test_tools_lists_builtins_plugins_and_mcp_with_tiers(tmp_path: Path) -> None:
    plugins = Path(__file__).parent / "fixtures" / "plugins"
    mcp = Path(__file__).parent / "fakes" / "mcp_server.py"
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        f"""
[storage]
path = "{tmp_path / "state.db"}"
[tools]
builtins = ["current_time", "forget"]
plugins = ["relaybot_demo_plugin", "relaybot_broken_plugin"]
[[mcp.servers]]
name = "notes"
command = "{sys.executable}"
args = ["{mcp}"]
"""
    )
    env = {**os.environ, "PYTHONPATH": str(plugins)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "tools",
        "-c",
        str(cfg),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out_b, err_b = await asyncio.wait_for(proc.communicate(), 60)
    out, err = out_b.decode(), err_b.decode()
    assert proc.returncode == 0, err
    heads = {line.split()[0]: line for line in out.splitlines() if not line.startswith(" ")}
    assert "[safe]" in heads["current_time"] and "(local)" in heads["current_time"]
    assert "[destructive]" in heads["forget"]
    assert "[safe]" in heads["roll_dice"] and "[destructive]" in heads["greet"]
    assert "[safe]" in heads["notes__lookup"] and "(mcp:notes)" in heads["notes__lookup"]
    assert "[destructive]" in heads["notes__write_note"]  # no readOnlyHint: it must ask
    assert "relaybot_broken_plugin" in err  # the broken plugin is named, the rest still loads
