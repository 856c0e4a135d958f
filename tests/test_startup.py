"""Start-up of the `relaybot` command: what it loads and how. The daemon runs as a subprocess
against the fake Bot API and the fake LLM; what it loaded is read from the process itself."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

# The `relaybot` command, telling on exit which modules it loaded (one JSON line on stdout).
TELLING = """
import atexit, json, sys
atexit.register(lambda: print(json.dumps(sorted(sys.modules))))
sys.argv = ["relaybot", *sys.argv[1:]]
from bot.__main__ import main
sys.exit(main())
"""

# What a Telegram daemon on an OpenAI-compatible endpoint without built-in tools never uses.
NOT_LOADED = (
    "click",  # httpx's command-line client (bot/app.py)
    "pygments",
    "cryptography",  # Telegram Passport
    "docstring_parser",  # only once a tool is made from a function
    "selectolax",  # fetch_url's HTML parser
    "engine.models._anthropic",
    "tools.builtins._fetch",
    "tools.builtins._command",
    "tools.builtins._sandbox",
    "tools.builtins._search",
    "tools.builtins._workspace",
    "openai",  # a plain request needs no SDK (engine/models/_openai.py)
)


async def test_run_loads_nothing_it_does_not_use(tmp_path: Path, llm: FakeOpenAI) -> None:
    async with FakeTelegram() as tg:
        config = tmp_path / "config.toml"
        config.write_text(
            f"""
[llm]
base_url = "{llm.base_url}"
api_key = "sk-test-key-123456"
model = "fake-model"

[storage]
path = "{tmp_path / "relaybot.db"}"

[telegram]
enabled = true
token = "{tg.token}"
api_base_url = "{tg.base_url}"
allowed_users = ["*"]

[tools]
builtins = []
"""
        )
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            TELLING,
            "run",
            "-c",
            str(config),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            await tg.wait_for_call("getUpdates", timeout=30)
            tg.inject_message(1, 1, "hello")
            await tg.wait_for_call("sendMessage", timeout=30)  # a message answered meanwhile
        finally:
            proc.send_signal(signal.SIGTERM)
            out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    loaded = set(json.loads(out.decode().splitlines()[-1]))
    assert "channels.telegram" in loaded and "engine.models._openai" in loaded
    assert [m for m in NOT_LOADED if m in loaded] == []


async def test_the_modules_load_without_a_full_collection_and_then_stay_out_of_them() -> None:
    probe = """
import gc, json, sys
full = []
gc.callbacks.append(lambda phase, info: phase == "start" and full.append(info["generation"] == 2))
usual = gc.get_threshold()
import bot._collector as collector
loaded = collector.loaded
def when_loaded():
    full_before = sum(full)
    loaded()
    young, *older = gc.get_threshold()
    now = young == collector.YOUNG and older == list(usual[1:])
    print(json.dumps([full_before, gc.get_freeze_count(), now]))
collector.loaded = when_loaded  # what bot/cli.py imports: it is not imported yet
sys.argv = ["relaybot", "--version"]
from bot.__main__ import main
main()
"""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", probe, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    full_collections, frozen, usual = json.loads(out.decode().splitlines()[0])
    assert (full_collections, usual) == (0, True), err.decode()
    assert frozen > 20_000  # the command's modules, out of later collections
