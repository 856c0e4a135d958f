"""Issue 40, items 4 and 5, through the real CLI: a store per config file by default (two
configs never share a history; a checkout's config keeps its store beside it, ignored by git;
the store an older relaybot shared stays with the first config that runs after the upgrade),
and the store's files private: 0600 in a 0700 folder, also for a store an older relaybot made
world-readable (fixed at start-up with one log line)."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI, hold, text

ROOT = Path(__file__).resolve().parent.parent


def _config(where: Path, llm: FakeOpenAI, storage: str = "") -> Path:
    where.parent.mkdir(parents=True, exist_ok=True)
    where.write_text(f'[llm]\nbase_url = "{llm.base_url}"\nmodel = "fake-model"\n{storage}')
    return where


def _env(tmp_path: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "RELAYBOT_"))}
    base.pop("STATE_DIRECTORY", None)
    return {
        **base,
        "PYTHONPATH": str(ROOT),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }


async def _relaybot(tmp_path: Path, *args: str, stdin: bytes = b"") -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        *args,
        cwd=tmp_path,
        env=_env(tmp_path),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin), 60)
    return proc.returncode or 0, out.decode(), err.decode()


def _said(llm: FakeOpenAI, request: int) -> list[str]:
    """The user messages the model was sent in request number `request` (0-based)."""
    messages = llm.requests[request]["messages"]
    return [m["content"] for m in messages if m["role"] == "user"]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_two_configs_keep_two_histories(tmp_path: Path, llm: FakeOpenAI) -> None:
    one = _config(tmp_path / "bots" / "shop.toml", llm)
    two = _config(tmp_path / "xdg" / "relaybot" / "support.toml", llm)
    code, out, _ = await _relaybot(tmp_path, "check-config", "-c", str(one))
    assert code == 0 and f"store: {tmp_path / 'bots' / '.relaybot' / 'shop.db'}" in out, out
    code, out, _ = await _relaybot(tmp_path, "check-config", "-c", str(two))
    assert code == 0 and f"store: {tmp_path / 'state' / 'relaybot' / 'support.db'}" in out, out

    assert (await _relaybot(tmp_path, "chat", "-c", str(one), stdin=b"my order is 42\n"))[0] == 0
    code, out, _ = await _relaybot(tmp_path, "chat", "-c", str(two), stdin=b"hello\n")
    assert code == 0 and out == "echo: hello\n"
    assert _said(llm, -1) == ["hello"]  # nothing of the other config's conversation
    assert (await _relaybot(tmp_path, "chat", "-c", str(one), stdin=b"and now?\n"))[0] == 0
    assert _said(llm, -1) == ["my order is 42", "and now?"]  # its own, across a restart


async def test_a_checkout_keeps_its_store_inside_ignored_by_git(
    tmp_path: Path, llm: FakeOpenAI
) -> None:
    checkout = tmp_path / "checkout"
    await asyncio.to_thread(subprocess.run, ["git", "init", "-q", str(checkout)], check=True)
    (checkout / ".gitignore").write_text((ROOT / ".gitignore").read_text())
    config = _config(checkout / "config.toml", llm)
    code, _, err = await _relaybot(checkout, "chat", stdin=b"hi\n")  # as `make chat` runs it
    assert code == 0, err
    store = checkout / ".relaybot" / "config.db"
    assert store.exists() and not (tmp_path / "state").exists()
    git = ["git", "-C", str(checkout), "status", "--porcelain", "--untracked-files=all"]
    status = (await asyncio.to_thread(subprocess.run, git, capture_output=True, text=True)).stdout
    assert status.split() == ["??", ".gitignore"], status  # config.toml and the store ignored
    assert config.exists()


async def test_the_shared_store_of_an_older_relaybot_stays_with_the_first_config(
    tmp_path: Path, llm: FakeOpenAI
) -> None:
    shared = tmp_path / "state" / "relaybot" / "relaybot.db"
    older = _config(tmp_path / "checkout" / "config.toml", llm, f'[storage]\npath = "{shared}"\n')
    assert (await _relaybot(tmp_path, "chat", "-c", str(older), stdin=b"remember 7\n"))[0] == 0
    # upgraded: the same config, with no [storage] path, as it was written before
    mine = _config(tmp_path / "checkout" / "config.toml", llm)
    code, out, err = await _relaybot(tmp_path, "chat", "-c", str(mine), stdin=b"what number?\n")
    assert code == 0 and out == "echo: what number?\n", err
    assert _said(llm, -1) == ["remember 7", "what number?"]  # the history kept
    assert err.count("keeping the store at") == 1 and str(shared) in err
    assert (shared.parent / "relaybot.db.owner").read_text() == f"{mine}\n"
    code, _, err = await _relaybot(tmp_path, "chat", "-c", str(mine), stdin=b"again\n")
    assert code == 0 and "keeping the store" not in err  # said once
    other = _config(tmp_path / "elsewhere" / "config.toml", llm)
    code, out, _ = await _relaybot(tmp_path, "check-config", "-c", str(other))
    assert f"store: {tmp_path / 'elsewhere' / '.relaybot' / 'config.db'}" in out
    assert (await _relaybot(tmp_path, "chat", "-c", str(other), stdin=b"hello\n"))[0] == 0
    assert _said(llm, -1) == ["hello"]  # not the first config's history


async def test_the_store_files_are_private_while_it_runs(tmp_path: Path, llm: FakeOpenAI) -> None:
    config = _config(tmp_path / "conf" / "config.toml", llm)
    folder = tmp_path / "conf" / ".relaybot"
    release = asyncio.Event()
    llm.script(hold(release, text("done")))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "chat",
        "-c",
        str(config),
        cwd=tmp_path,
        env=_env(tmp_path),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None
    proc.stdin.write(b"hello\n")
    await proc.stdin.drain()
    await llm.wait_requests(1, timeout=30)  # a turn in flight: the store is open, with its WAL
    try:
        names = sorted(p.name for p in folder.iterdir())
        assert {"config.db", "config.db-wal", "config.db-shm", "config.db.lock"} <= set(names)
        assert {p.name: _mode(p) for p in folder.iterdir()} == dict.fromkeys(names, 0o600)
        assert _mode(folder) == 0o700
    finally:
        release.set()
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.communicate(), 30)
    backups = tmp_path / "backups"
    backups.mkdir()
    code, _, err = await _relaybot(tmp_path, "backup", str(backups), "-c", str(config))
    assert code == 0, err
    assert [_mode(p) for p in backups.iterdir()] == [0o600]


async def test_a_world_readable_store_is_made_private_at_start(
    tmp_path: Path, llm: FakeOpenAI
) -> None:
    config = _config(tmp_path / "conf" / "config.toml", llm)
    folder = tmp_path / "conf" / ".relaybot"
    assert (await _relaybot(tmp_path, "chat", "-c", str(config), stdin=b"hi\n"))[0] == 0
    folder.chmod(0o755)  # as an older relaybot left them
    for path in folder.iterdir():
        path.chmod(0o644)
    code, _, err = await _relaybot(tmp_path, "chat", "-c", str(config), stdin=b"hi\n")
    assert code == 0
    assert _mode(folder) == 0o700
    assert {p.name: _mode(p) for p in folder.iterdir()} == {
        "config.db": 0o600,
        "config.db.lock": 0o600,
        "config.db.config": 0o600,
    }
    [line] = [line for line in err.splitlines() if "made them private" in line]
    assert "config.db (644 -> 600)" in line and f"{folder} (755 -> 700)" in line
    code, _, err = await _relaybot(tmp_path, "chat", "-c", str(config), stdin=b"hi\n")
    assert code == 0 and "made them private" not in err  # once
