"""`relaybot run` as systemd runs it: READY after the channels connect, watchdog pings from the
event loop, STOPPING and a clean exit on SIGTERM with the running turn's answer delivered."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from tests.fakes.discord_server import FakeDiscord
from tests.fakes.notify_socket import NotifySocket
from tests.fakes.openai_server import FakeOpenAI, hold, text

GUILD, CHANNEL, DM, ALICE = 1001, 2001, 3001, 4001


async def test_run_notifies_systemd_and_stops_cleanly(tmp_path: Path, llm: FakeOpenAI) -> None:
    async with FakeDiscord(guilds={GUILD: [CHANNEL]}, users={ALICE: "Alice"}) as dc:
        cfg = tmp_path / "config.toml"
        cfg.write_text(
            f"""
[llm]
base_url = "{llm.base_url}"
api_key = "sk-test"
model = "fake-model"
max_retries = 0
[storage]
path = "{tmp_path / "state.db"}"
[discord]
enabled = true
token_env = "RB_DISCORD_TOKEN"
api_base_url = "{dc.api_base_url}"
allowed_users = ["{ALICE}"]
[tools]
builtins = []
"""
        )
        with NotifySocket(tmp_path) as sock:
            env = {
                **os.environ,
                "NOTIFY_SOCKET": sock.address,
                "WATCHDOG_USEC": "400000",  # systemd would restart us after 0.4 s of silence
                "RB_DISCORD_TOKEN": dc.token,
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
            try:
                ready = await asyncio.to_thread(sock.wait_for, "READY", None, 30)
                assert ready.pid == proc.pid  # NotifyAccess=main
                assert any(op.get("op") == 2 for op in dc.gateway_ops)  # identified before READY
                assert "discord" in ready.fields.get("STATUS", "")
                for _ in range(3):  # pings keep coming at half the watchdog period
                    await asyncio.to_thread(sock.wait_for, "WATCHDOG", None, 2)

                release = asyncio.Event()
                llm.script(hold(release, text("here is your answer")))
                await dc.inject_message(DM, ALICE, "one last question")
                await llm.wait_requests(1, timeout=20)
                proc.send_signal(signal.SIGTERM)
                await asyncio.to_thread(sock.wait_for, "STOPPING", None, 10)
                release.set()  # the turn in flight finishes and is delivered before exit
                call = await dc.wait_for_call("POST", rf"/channels/{DM}/messages", timeout=20)
                assert call.json["content"] == "here is your answer"
                assert await asyncio.wait_for(proc.wait(), 30) == 0
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
            assert proc.stderr is not None
            err = (await proc.stderr.read()).decode()
            assert dc.token not in err and "sk-test" not in err
