"""Shared fixtures: a fake OpenAI server, configs pointing at it, and a network guard."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.config import Config, parse_config
from tests.fakes.openai_server import FakeOpenAI
from tests.postgres import PostgresServer, start_or_skip

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


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server for the whole session (tests/postgres.py); each test that uses it
    makes its own database with `postgres.new_database()`."""
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
