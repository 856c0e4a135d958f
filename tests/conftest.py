"""Shared fixtures: a fake OpenAI server, configs pointing at it, and a network guard; and the
run's own machinery: what is missing said once at the start (tests/prerequisites.py), tests made
safe to run in parallel workers (`make test` runs pytest-xdist), and children that stop on SIGINT.

Parallel-safe by default: each test gets its own XDG config and state directories (nothing
reaches the real ~/.config/relaybot or ~/.local/state/relaybot, nor another worker's), ports that
must be known ahead come from tests/ports.py, and each worker has its own PostgreSQL server.
"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.config import Config, parse_config
from tests.fakes.openai_server import FakeOpenAI
from tests.postgres import PostgresServer, start_or_skip
from tests.prerequisites import missing_line, require

_real_connect = socket.socket.connect
_LOCAL = ("127.", "::1", "localhost")


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    """Tests never leave the machine: a connection to anything but loopback fails loudly."""
    if self.family in (socket.AF_INET, socket.AF_INET6):
        host = str(address[0])
        if not host.startswith(_LOCAL):
            raise OSError(f"test tried to reach {host}: only 127.0.0.1 is allowed in tests")
    return _real_connect(self, address)


@pytest.fixture(autouse=True)
def network_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)


_ELSEWHERE = (
    "RELAYBOT_CONFIG",
    "STATE_DIRECTORY",
    "CREDENTIALS_DIRECTORY",
    "RUNTIME_DIRECTORY",
    "RELAYBOT_MCP_OAUTH_KEY",  # set by a daemon with an OAuth MCP server (bot/_mcp_oauth.py)
)


@pytest.fixture(autouse=True)
def private_dirs(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The test's own $XDG_CONFIG_HOME and $XDG_STATE_HOME (created when first written), and
    none of the variables that would point relaybot at the machine's config, store or secrets: a
    default path never reaches the real home, nor a path another worker is using. (HOME itself
    stays: pip and npm find their caches and settings through it.)"""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "state"))
    for name in _ELSEWHERE:
        monkeypatch.delenv(name, raising=False)


def pytest_configure(config: pytest.Config) -> None:
    # A shell starts a background job with SIGINT ignored, and a child inherits that: the tests
    # that press Ctrl-C on a `relaybot` child (as a terminal would, where SIGINT is default)
    # then waited forever. The test process takes Python's own handler back, which a child
    # resets to the default at exec.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """What the run lacks, in one line at its start (by the controller only, under xdist)."""
    line = missing_line()
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if line and reporter is not None and "PYTEST_XDIST_WORKER" not in os.environ:
        reporter.write_line(f"relaybot tests: {line}", yellow=True, bold=True)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """`@pytest.mark.needs("postgresql", ...)`: skipped (failed under CI=true) without them."""
    for mark in item.iter_markers("needs"):
        for name in mark.args:
            require(name)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server for the whole session, one per worker (tests/postgres.py); each test
    that uses it makes its own database with `postgres.new_database()`."""
    server = start_or_skip()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def llm() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


@pytest.fixture
def make_config(tmp_path: Path, llm: FakeOpenAI) -> Callable[..., Config]:
    """Config for a daemon talking to the fake LLM, with its store in tmp_path."""

    def make(**sections: Any) -> Config:
        base = {
            "llm": {
                "base_url": llm.base_url,
                "api_key": "sk-test-key-123456",
                "model": "fake-model",
                "max_retries": 0,
                "request_timeout_s": 10,
            },
            "storage": {"path": str(tmp_path / "relaybot.db")},
            "tools": {"builtins": [], "allow_private_urls": True},
        }
        return parse_config(deep_merge(base, sections))

    return make
