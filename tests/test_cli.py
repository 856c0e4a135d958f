"""The `relaybot` command as a user runs it: subprocesses, piped stdin, signals, crashes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from bot.config import parse_config
from engine import Command
from tests.fakes.openai_server import FakeOpenAI, hold, text, tool_call
from tools.errors import ConfigError


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
    *args: str, stdin: bytes | None = None, cwd: Path | None = None
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
        cwd=cwd,
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


async def test_chat_confirmation_is_a_yes_no_question(tmp_path: Path, llm: FakeOpenAI) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "old.txt").write_text("bye")
    cfg = write_config(tmp_path, llm, f'builtins = ["delete_file"]\nworkspace = "{workspace}"')
    llm.script(tool_call("delete_file", {"path": "old.txt"}), text("Deleted old.txt."))
    proc, io = await relaybot("chat", "-c", str(cfg), stdin=b"delete old.txt\ny\n")
    code, out, err = await finish(proc, io)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[:5] == [
        "relaybot wants to: Delete the workspace file old.txt",
        "    delete_file {",  # the whole action under it, as Telegram shows it
        '      "path": "old.txt"',
        "    }",
        "Allow it? [y/n]",
    ]
    assert not any("Confirmed" in line for line in lines)  # the typed "y" is not echoed back
    assert "Deleted old.txt." in lines
    assert not (workspace / "old.txt").exists()


async def test_chat_repeats_the_question_until_answered(tmp_path: Path, llm: FakeOpenAI) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "keep.txt").write_text("stay")
    cfg = write_config(tmp_path, llm, f'builtins = ["delete_file"]\nworkspace = "{workspace}"')
    llm.script(tool_call("delete_file", {"path": "keep.txt"}), text("Kept it."))
    stdin = b"delete keep.txt\nmaybe later\nNO\n"
    proc, io = await relaybot("chat", "-c", str(cfg), stdin=stdin)
    code, out, err = await finish(proc, io)
    assert code == 0, err
    assert out.count("Please answer y (yes) or n (no). Allow it? [y/n]") == 1
    assert (workspace / "keep.txt").exists()
    assert "Kept it." in out.splitlines()
    assert len(llm.requests) == 2  # "maybe later" was never sent to the model
    assert "maybe later" not in json.dumps(llm.requests)


async def test_chat_commands_are_handled_not_sent(tmp_path: Path, llm: FakeOpenAI) -> None:
    cfg = write_config(tmp_path, llm)
    llm.script(text("Hi."), text("A fresh start."))
    stdin = b"hello\n/help\n/bogus\n/reset\nagain\n/stop\n"
    proc, io = await relaybot("chat", "-c", str(cfg), stdin=stdin)
    code, out, err = await finish(proc, io)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "Hi." and lines[-2] == "A fresh start."
    assert f"Unknown command /bogus. Commands: {', '.join('/' + c for c in Command)}." in lines
    assert len(lines) > 5  # /help, /reset and /stop each answered
    assert len(llm.requests) == 2
    sent = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "user"]
    assert sent == ["again"]  # /reset cleared "hello"; no command reached the model


async def test_ctrl_c_leaves_chat_at_once(tmp_path: Path, llm: FakeOpenAI) -> None:
    cfg = write_config(tmp_path, llm, "builtins = []\n[engine]\nshutdown_grace_s = 90")
    # Idle at the prompt, the read still pending: Ctrl-C leaves.
    proc, io = await relaybot("chat", "-c", str(cfg), stdin=None)
    io.cancel()
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"hello\n")
    await proc.stdin.drain()
    assert await asyncio.wait_for(proc.stdout.readline(), 30) == b"echo: hello\n"
    proc.send_signal(signal.SIGINT)
    assert await asyncio.wait_for(proc.wait(), 10) == 0
    # In the middle of a turn: the turn is stopped, not waited for (the grace is 90 s).
    stuck = asyncio.Event()
    llm.script(hold(stuck, text("too late")))
    proc, io = await relaybot("chat", "-c", str(cfg), stdin=None)
    io.cancel()
    assert proc.stdin is not None
    proc.stdin.write(b"think hard\n")
    await proc.stdin.drain()
    await llm.wait_requests(2, timeout=20)  # the turn is in flight
    proc.send_signal(signal.SIGINT)
    assert await asyncio.wait_for(proc.wait(), 10) == 0
    stuck.set()


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
    assert "llm.request_timeout_s: must be a number, e.g. request_timeout_s = 60" in err
    assert "Traceback" not in err
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
    assert "[safe]" in heads["current_time"] and "(built-in)" in heads["current_time"]
    assert "(plugin)" in heads["roll_dice"] and "(plugin)" in heads["greet"]
    assert "[destructive]" in heads["forget"]
    assert "[safe]" in heads["roll_dice"] and "[destructive]" in heads["greet"]
    assert "[safe]" in heads["notes__lookup"] and "(mcp:notes)" in heads["notes__lookup"]
    assert "[destructive]" in heads["notes__write_note"]  # no readOnlyHint: it must ask
    assert "relaybot_broken_plugin" in err  # the broken plugin is named, the rest still loads


async def test_global_options_before_or_after_the_command(tmp_path: Path, llm: FakeOpenAI) -> None:
    cfg = str(write_config(tmp_path, llm))
    other = str(tmp_path / "missing.toml")
    for args in (
        ("-c", cfg, "check-config"),
        ("check-config", "-c", cfg),
        ("-c", other, "check-config", "-c", cfg),  # after the command wins
    ):
        proc, io = await relaybot(*args)
        code, out, err = await finish(proc, io)
        assert code == 0, (args, err)  # found and read: a chat-only config, noted
        assert f"{cfg}: OK" in out and "note: no channel is enabled" in out
    for args in (
        ("--log-level", "LOUD", "-c", cfg, "doctor"),
        ("doctor", "-c", cfg, "--log-level", "LOUD"),
    ):
        proc, io = await relaybot(*args)
        code, _, err = await finish(proc, io)
        assert code == 2 and "unknown log level 'LOUD'" in err, args  # the option was read


def channel_config(tmp_path: Path, llm: FakeOpenAI, tools: str, telegram: str = "") -> Path:
    path = write_config(tmp_path, llm, tools)
    section = f'[telegram]\nenabled = true\ntoken_env = "RELAYBOT_TEST_KEY"\n{telegram}\n'
    path.write_text(path.read_text() + section)
    return path


async def test_check_config_refuses_what_run_refuses(tmp_path: Path, llm: FakeOpenAI) -> None:
    cases = {
        'builtins = ["current_time", "web_serch"]': "tools.builtins: unknown built-in tool "
        "'web_serch'; did you mean 'web_search'?",
        'builtins = ["write_file"]': "tools.workspace: write_file need a workspace directory",
    }
    for tools, expected in cases.items():
        cfg = str(channel_config(tmp_path, llm, tools, 'allowed_users = ["1"]'))
        for command in ("check-config", "run", "doctor"):
            proc, io = await relaybot(command, "-c", cfg)
            code, out, err = await finish(proc, io)
            assert expected in out + err, (command, out, err)
            assert code == (1 if command == "doctor" else 78), (command, err)
            assert "Traceback" not in err


async def test_run_without_a_channel_says_which_to_enable(tmp_path: Path, llm: FakeOpenAI) -> None:
    cfg = str(write_config(tmp_path, llm))
    proc, io = await relaybot("run", "-c", cfg)
    code, _, err = await finish(proc, io)
    assert code == 78
    assert "no channel is enabled" in err and "[telegram] or [discord]" in err
    assert "`relaybot chat` needs no channel" in err


async def test_allowed_users_nobody_or_names(tmp_path: Path, llm: FakeOpenAI) -> None:
    cfg = str(channel_config(tmp_path, llm, "builtins = []"))  # allowed_users: the default []
    proc, io = await relaybot("check-config", "-c", cfg)
    code, out, err = await finish(proc, io)
    assert code == 0, err
    assert "warning: telegram.allowed_users is empty, so nobody can use the bot" in out
    cfg = str(channel_config(tmp_path, llm, "builtins = []", 'allowed_users = ["@alice"]'))
    proc, io = await relaybot("check-config", "-c", cfg)
    code, out, err = await finish(proc, io)
    assert code == 78
    assert "telegram.allowed_users: '@alice' is not a numeric user id" in err
    assert "send /start to your bot" in err


async def test_config_errors_show_the_right_form(tmp_path: Path) -> None:
    cases = {
        '[llm]\nstream = "yes"\n': "llm.stream: must be true or false, without quotes, "
        "e.g. stream = true",
        'modle = "gpt-4o"\n': "llm.modle: unknown key (did you mean 'model'?",  # in [llm] too
        '[discord]\nallowed_users = "123"\n': "discord.allowed_users: must be a list, "
        'e.g. allowed_users = ["123456789"]',
    }
    cfg = tmp_path / "config.toml"
    cfg.write_text("".join(cases))  # every mistake is named at once: one run shows each form
    proc, io = await relaybot("check-config", "-c", str(cfg))
    code, _, err = await finish(proc, io)
    assert code == 78 and f"{len(cases)} problems:" in err, err
    for expected in cases.values():
        assert f"\n  {expected}" in err, err


PLUGIN = '''
from tools import tool


@tool
def shout(text: str) -> str:
    """Say it louder."""
    return text.upper()
'''


async def test_plugins_next_to_the_config_file(tmp_path: Path, llm: FakeOpenAI) -> None:
    (tmp_path / "team_tools.py").write_text(PLUGIN)
    (tmp_path / "team_broken.py").write_text("import relaybot_no_such_dependency\n")
    tools = 'builtins = []\nplugins = ["team_tools", "team_broken", "team_missing"]'
    cfg = str(write_config(tmp_path, llm, tools))
    proc, io = await relaybot("tools", "-c", cfg)  # no PYTHONPATH: found next to config.toml
    code, out, err = await finish(proc, io)
    assert code == 0, err
    assert out.splitlines()[0] == "shout  [safe]  (plugin)"
    problems = [line for line in err.splitlines() if "team_" in line]
    assert len(problems) == 2 and "Traceback" not in err  # one line each
    assert "plugin 'team_broken': ModuleNotFoundError: No module named " in problems[0]
    assert "fix: install the package that provides 'relaybot_no_such_dependency'" in problems[0]
    assert f"fix: put team_missing.py in {tmp_path}" in problems[1]
    proc, io = await relaybot("tools", "-c", cfg, "--log-level", "DEBUG")
    code, out, err = await finish(proc, io)
    assert code == 0 and "Traceback" in err  # the traceback, at DEBUG only
    tools += '\nconfirm = ["shuot", "notes__write"]\n[[mcp.servers]]\nname = "notes"\nurl = "http://127.0.0.1:9/"'
    cfg = str(channel_config(tmp_path, llm, tools, 'allowed_users = ["1"]'))
    proc, io = await relaybot("check-config", "-c", cfg)
    code, out, err = await finish(proc, io)
    assert code == 0, err  # run starts without them: warnings
    warnings = [line for line in out.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 3 and "plugin 'team_broken'" in warnings[0]
    assert "plugin 'team_missing'" in warnings[1]
    assert warnings[2] == "warning: tools.confirm: no tool named 'shuot'"  # MCP's taken on trust


async def test_one_process_per_store(tmp_path: Path, llm: FakeOpenAI) -> None:
    cfg = str(channel_config(tmp_path, llm, "builtins = []", 'allowed_users = ["1"]'))
    first, io = await relaybot("chat", "-c", cfg, stdin=None)
    io.cancel()
    assert first.stdin is not None and first.stdout is not None
    first.stdin.write(b"hello\n")
    await first.stdin.drain()
    assert await asyncio.wait_for(first.stdout.readline(), 30) == b"echo: hello\n"
    for command in ("run", "chat"):
        proc, io = await relaybot(command, "-c", cfg, stdin=b"")
        code, out, err = await finish(proc, io)
        assert code == 1, err
        assert f"another relaybot (pid {first.pid}) is already using the store" in err
    first.stdin.close()
    assert await asyncio.wait_for(first.wait(), 30) == 0
    proc, io = await relaybot("chat", "-c", cfg, stdin=b"again\n")  # free once it exits
    code, out, err = await finish(proc, io)
    assert code == 0 and out == "echo: again\n", err


def test_reading_commands_load_neither_the_engine_nor_an_http_client(tmp_path: Path) -> None:
    """check-config and status (run by scripts and health checks, often) start in about half the
    CPU of the daemon's imports: no aiohttp (its SSL contexts alone cost ~0.1 s), no engine
    rooms a turn needs, no MCP or web console; and the Telegram adapter polls before it loads the
    Markdown parser it needs only to send."""
    import subprocess

    cfg = tmp_path / "config.toml"
    cfg.write_text(
        '[llm]\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "sk-x"\nmodel = "m"\n'
        f'[storage]\npath = "{tmp_path / "state.db"}"\n'
    )
    heavy = ("aiohttp", "engine.chat", "engine.loop", "mcp", "bot.web", "bot.app", "markdown_it")
    probe = (
        "import sys; from bot.__main__ import main\n"
        f"for command in ('check-config', 'status'):\n"
        f"    sys.argv = ['relaybot', command, '-c', {str(cfg)!r}]\n"
        "    print(command, main())\n"
        f"print(sorted(m for m in sys.modules if m.startswith({heavy!r})))\n"
        "import channels.telegram\n"
        "print(sorted(m for m in sys.modules if m.startswith('markdown_it')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    lines = out.stdout.strip().splitlines()
    assert "check-config 0" in lines and "status 1" in lines, out.stdout + out.stderr
    assert "there is no store" in out.stderr
    assert lines[-2:] == ["[]", "[]"]
