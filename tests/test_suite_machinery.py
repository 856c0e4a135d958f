"""The test run's own machinery (tests/ports.py, tests/prerequisites.py, tests/conftest.py): what
makes a test safe beside others in parallel, and what a missing program looks like."""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import prerequisites
from tests.ports import free_port


def test_free_ports_are_distinct_bindable_and_never_ephemeral() -> None:
    low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    assert all(port < low or port > high for port in ports), ports
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", ports[-1] + 1))  # bound already: passed over
        assert free_port() not in (ports[-1] + 1, *ports)
    for port in ports[:5]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_each_test_has_its_own_xdg_dirs_and_none_of_the_machines(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    base = tmp_path_factory.getbasetemp()
    config, state = Path(os.environ["XDG_CONFIG_HOME"]), Path(os.environ["XDG_STATE_HOME"])
    assert config.is_relative_to(base) and state.is_relative_to(base) and config != state
    assert "RELAYBOT_CONFIG" not in os.environ and "STATE_DIRECTORY" not in os.environ


@pytest.fixture
def nothing_installed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    table = {
        name: dataclasses.replace(p, present=lambda: False)
        for name, p in prerequisites.PREREQUISITES.items()
    }
    monkeypatch.setattr(prerequisites, "PREREQUISITES", table)
    prerequisites.missing.cache_clear()
    yield
    prerequisites.missing.cache_clear()


def test_what_is_missing_is_one_line_naming_the_packages(
    nothing_installed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    line = prerequisites.missing_line()
    assert line is not None and "\n" not in line
    assert "postgresql, chromium, bubblewrap, node, mcp-servers, systemd-analyze" in line
    assert "apt-get install postgresql postgresql-client chromium bubblewrap nodejs npm sys" in line
    assert "; make test, or npm ci --prefix tests/mcp_servers)" in line
    assert line.endswith("they skip (with CI=true they fail)")
    with pytest.raises(pytest.skip.Exception, match="bubblewrap is not installed"):
        prerequisites.require("bubblewrap")
    monkeypatch.setenv("CI", "true")
    assert prerequisites.missing_line().endswith("they FAIL (CI=true)")  # type: ignore[union-attr]
    with pytest.raises(pytest.fail.Exception, match="CI=true: chromium is not installed"):
        prerequisites.require("chromium")
