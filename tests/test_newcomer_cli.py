"""The rest of issue 29's newcomer pass, through the real CLI: `relaybot chat` needs no channel
token; /stop on a terminal stops a running turn; a base_url without http:// is refused by init
and check-config with the fix; invalid UTF-8 on standard input does not end the chat; one name
for the API key variable; `relaybot tools` and /help label and describe plugin tools whole;
the README's status example shows the current schema version."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path

from engine.store.postgres._schema import MIGRATIONS as PG_MIGRATIONS
from engine.store.sqlite._schema import MIGRATIONS
from tests.fakes.openai_server import FakeOpenAI, hold, text
from tests.test_cli import finish, relaybot, write_config
from tests.test_console import Terminal

ROOT = Path(__file__).resolve().parent.parent

PLUGIN = '''
from tools import tool


@tool
def order_status(order_id: str) -> str:
    """Look up where an order is, e.g. packed, shipped or
    delivered. Needs the order's number.

    Args:
        order_id: the order's number.
    """
    return "shipped"
'''


async def test_chat_starts_without_the_token_of_an_enabled_channel(
    tmp_path: Path, llm: FakeOpenAI
) -> None:
    cfg = write_config(tmp_path, llm)
    with cfg.open("a") as f:
        f.write('[telegram]\nenabled = true\ntoken_env = "RB_ABSENT_TG"\nallowed_users = ["1"]\n')
    code, out, err = await finish(*await relaybot("chat", "-c", str(cfg), stdin=b"hello\n"))
    assert code == 0, err
    assert out.splitlines() == ["echo: hello"]
    code, _, err = await finish(*await relaybot("check-config", "-c", str(cfg)))
    assert code == 78 and "RB_ABSENT_TG is not set" in err  # run still needs it


async def test_stop_on_a_terminal_stops_a_running_turn(tmp_path: Path, llm: FakeOpenAI) -> None:
    cfg = write_config(tmp_path, llm, "builtins = []\n[engine]\nshutdown_grace_s = 90")
    stuck = asyncio.Event()
    llm.script(hold(stuck, text("too late")))
    term = Terminal()
    env = {**os.environ, "TERM": "xterm", "RELAYBOT_TEST_KEY": "sk-test-key-123456"}
    io = {"stdin": term.child, "stdout": term.child, "stderr": term.child, "env": env}
    command = (sys.executable, "-m", "bot", "chat", "-c", str(cfg))
    proc = await asyncio.create_subprocess_exec(*command, **io)
    try:
        await term.expect(b"you> ")
        term.type(b"think hard\r")
        await llm.wait_requests(1, timeout=20)  # the model hangs
        term.type(b"/stop\r")
        await term.expect(b"Stopped.")
        await term.expect(b"you> ")
        term.type(b"and now?\r")
        await term.expect(b"echo: ")  # without the stopped message (tests/test_stop.py)
        await term.expect(b"and now?")
        # Ctrl-C while a turn runs: stopped and left at once (the grace is 90 s).
        llm.script(hold(stuck, text("too late")))
        await term.expect(b"you> ")
        term.type(b"think again\r")
        await llm.wait_requests(3, timeout=20)
        proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(proc.wait(), 10) == 0
        assert b"too late" not in term.screen and b"Traceback" not in term.screen
    finally:
        stuck.set()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        term.close()


async def test_a_base_url_without_a_scheme_is_refused_with_the_fix(
    tmp_path: Path, llm: FakeOpenAI
) -> None:
    cfg = write_config(tmp_path, llm)
    cfg.write_text(cfg.read_text().replace(llm.base_url, "localhost:8080/v1"))
    code, _, err = await finish(*await relaybot("check-config", "-c", str(cfg)))
    assert code == 78
    assert "llm.base_url: 'localhost:8080/v1' is not a URL: it must start with http://" in err
    assert 'e.g. base_url = "http://localhost:8080/v1"' in err
    target = tmp_path / "new" / "config.toml"
    # nothing listens there: kept when asked (the server may not be running yet)
    answers = b"localhost:8080/v1\nhttp://localhost:8080/v1\ny\nm\n\nn\nn\n"
    code, out, err = await finish(*await relaybot("init", "-c", str(target), stdin=answers))
    assert code == 0, err
    assert out.count("is not a URL") == 1  # asked again, then accepted
    assert 'base_url = "http://localhost:8080/v1"' in target.read_text()


async def test_invalid_utf8_on_stdin_does_not_end_the_chat(tmp_path: Path, llm: FakeOpenAI) -> None:
    cfg = write_config(tmp_path, llm)
    stdin = b"hello\ncaf\xe9 \xff\xfe\nlast\n"
    code, out, err = await finish(*await relaybot("chat", "-c", str(cfg), stdin=stdin))
    assert code == 0 and "Traceback" not in err, err
    assert out.splitlines() == ["echo: hello", "echo: caf\ufffd \ufffd\ufffd", "echo: last"]


async def test_one_name_for_the_api_key_variable(tmp_path: Path) -> None:
    target = tmp_path / "config.toml"
    code, _, err = await finish(*await relaybot("init", "-c", str(target), stdin=b""))
    assert code == 0, err
    [written] = re.findall(r'api_key_env = "(\w+)"', target.read_text())
    example = (ROOT / "config.example.toml").read_text()
    assert re.search(r'^api_key_env = "(\w+)"', example, re.M).group(1) == written  # type: ignore[union-attr]
    env = (ROOT / "deploy" / "relaybot.env.example").read_text()
    assert f"\n{written}=\n" in env
    assert "RELAYBOT_LLM_API_KEY" not in env + (ROOT / "README.md").read_text()


async def test_tools_and_help_label_plugins_and_keep_descriptions_whole(
    tmp_path: Path, llm: FakeOpenAI
) -> None:
    (tmp_path / "shop_tools.py").write_text(PLUGIN)
    cfg = write_config(tmp_path, llm, 'builtins = ["current_time"]\nplugins = ["shop_tools"]')
    code, out, err = await finish(*await relaybot("tools", "-c", str(cfg)))
    assert code == 0, err
    assert "order_status  [safe]  (plugin)" in out
    assert "current_time  [safe]  (built-in)" in out
    whole = (
        "Look up where an order is, e.g. packed, shipped or delivered. Needs the order's number."
    )
    assert f"    {whole}\n" in out
    code, out, err = await finish(*await relaybot("chat", "-c", str(cfg), stdin=b"/help\n"))
    assert code == 0, err
    assert "• Look up where an order is, e.g. packed, shipped or delivered\n" in out


def test_the_readme_status_example_shows_the_current_schema_version() -> None:
    assert len(MIGRATIONS) == len(PG_MIGRATIONS)
    readme = (ROOT / "README.md").read_text()
    shown = re.findall(r"^store: .*\(schema version (\d+)\)$", readme, re.M)
    assert shown == [str(len(MIGRATIONS))]
