"""A broken MCP server is reported where an operator looks (issue 42): `check-config` fails when
a server cannot even start, `relaybot tools` exits non-zero naming it, `relaybot doctor` names
it; the real commands, a real server (tests/fakes/mcp_server.py) beside the broken one."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI
from tests.test_cli import finish, relaybot, write_config

FAKE = Path(__file__).parent / "fakes" / "mcp_server.py"
GOOD = f'[[mcp.servers]]\nname = "notes"\ncommand = "{sys.executable}"\nargs = ["{FAKE}"]\n'
GHOST = '[[mcp.servers]]\nname = "ghost"\ncommand = "relaybot-no-such-mcp-server"\n'


def config(tmp_path: Path, llm: FakeOpenAI, servers: str) -> str:
    return str(write_config(tmp_path, llm, f"builtins = []\n{servers}"))


async def run(*args: str) -> tuple[int, str, str]:
    return await finish(*await relaybot(*args))


async def test_check_config_fails_on_a_server_that_cannot_start(
    tmp_path: Path, llm: FakeOpenAI
) -> None:
    code, out, err = await run("check-config", "-c", config(tmp_path, llm, GOOD))
    assert code == 0, err
    code, out, err = await run("check-config", "-c", config(tmp_path, llm, GOOD + GHOST))
    assert code != 0 and "OK" not in out
    assert err.strip() == (
        "relaybot: config error: mcp.servers: server 'ghost' cannot start: "
        "no command 'relaybot-no-such-mcp-server' found"
    )
    where = tmp_path / "gone"
    cwd = f'[[mcp.servers]]\nname = "moved"\ncommand = "{sys.executable}"\ncwd = "{where}"\n'
    code, out, err = await run("check-config", "-c", config(tmp_path, llm, cwd))
    assert code != 0 and f"server 'moved' cannot start: cwd {where} is not a folder" in err


async def test_tools_exits_non_zero_naming_the_server(tmp_path: Path, llm: FakeOpenAI) -> None:
    code, out, err = await run("tools", "-c", config(tmp_path, llm, GOOD + GHOST))
    assert code == 1
    assert out.startswith("notes__")  # the servers that started are listed
    assert (
        "MCP server ghost did not start: FileNotFoundError: "
        "no command 'relaybot-no-such-mcp-server' found"
    ) in err


async def test_doctor_names_a_broken_server(tmp_path: Path, llm: FakeOpenAI) -> None:
    quits = f'[[mcp.servers]]\nname = "quitter"\ncommand = "{sys.executable}"\nargs = ["-c", ""]\n'
    code, out, err = await run("doctor", "-c", config(tmp_path, llm, GOOD + quits))
    assert code == 1, out + err
    assert "mcp:notes: OK - started, " in out and " tools offered" in out
    assert "mcp:quitter: FAILED - did not start: " in out
    assert "fix: check the server's command, args and cwd" in out
    assert "1 problem(s): mcp:quitter" in err
