"""A stop must stop, even while start-up waits for the store (issue 34).

`relaybot run` and `relaybot chat` wait for a PostgreSQL server that cannot be reached yet
(instances may start before it), retrying with backoff. They used to ignore SIGTERM and Ctrl-C
meanwhile, until systemd's SIGKILL. Here the real command runs against a PostgreSQL URL nobody
listens on; once it has said that it waits, SIGTERM or SIGINT ends it within the configured
`shutdown_grace_s`, with exit status 0.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import textwrap
import time
from pathlib import Path

import pytest

from benchmarks._crash_rig import ROOT, wait_for_log
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

GRACE_S = 5


def nobody_listens() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(tmp_path: Path, llm: FakeOpenAI, tg: FakeTelegram) -> Path:
    path = tmp_path / "config.toml"
    url = f"postgresql://relaybot:secret@127.0.0.1:{nobody_listens()}/relaybot"
    path.write_text(
        textwrap.dedent(
            f"""
            [llm]
            base_url = "{llm.base_url}"
            api_key = "sk-faults-0123456789"
            model = "fake-model"

            [storage]
            url = "{url}"

            [telegram]
            enabled = true
            token = "{tg.token}"
            api_base_url = "{tg.base_url}"
            allowed_users = ["*"]

            [engine]
            shutdown_grace_s = {GRACE_S}

            [log]
            level = "INFO"
            """
        )
    )
    return path


@pytest.mark.parametrize(
    ("command", "sig"),
    [
        ("run", signal.SIGTERM),
        ("run", signal.SIGINT),
        ("chat", signal.SIGINT),
        ("chat", signal.SIGTERM),
    ],
)
async def test_a_stop_while_the_store_is_unreachable_at_start_up_stops(
    tmp_path: Path, command: str, sig: signal.Signals
) -> None:
    async with FakeTelegram() as tg, FakeOpenAI() as llm:
        config = write_config(tmp_path, llm, tg)
        log = tmp_path / "relaybot.log"
        with log.open("wb") as out:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bot",
                command,
                "-c",
                str(config),
                "--log-level",
                "INFO",
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                stdin=asyncio.subprocess.PIPE,
                stdout=out,
                stderr=out,
            )
        try:
            await wait_for_log(log, "cannot reach the store", 30)  # start-up waits for the store
            sent = time.monotonic()
            proc.send_signal(sig)
            code = await asyncio.wait_for(proc.wait(), GRACE_S + 5)
            took = time.monotonic() - sent
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        text = log.read_text(errors="replace")
        assert code == 0, text
        assert took < GRACE_S, f"{took:.1f} s to stop (grace {GRACE_S} s)\n{text}"
        assert "secret" not in text  # the URL's password stays out of the log
        print(f"{command}, {sig.name}, store unreachable: stopped in {took:.2f} s")
