"""What the test run needs beyond the dev extra: programs from Debian packages (`.ci/run` installs
them with apt-get), each found once per run and named here with the package that brings it.

A test that needs one says so with ``@pytest.mark.needs("postgresql")`` (or calls
:func:`require` where a fixture starts the program). When one is missing, the run says so in one
line at its start (tests/conftest.py prints :func:`missing_line`); the tests that need it skip
with the same words, except under CI=true, where they fail: a CI without them has lost tests, and
must say so rather than go green.

Why a table and not a skip in each test: before it, each test file found its program its own way
and a missing one was a quiet skip among hundreds of dots (issue 40).
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Prerequisite:
    """A program the tests need: what it is for and the Debian packages that install it."""

    what: str
    packages: str
    present: Callable[[], bool]
    install: str = ""  # how to get it, when not with apt-get install `packages`

    def how(self) -> str:
        return self.install or f"apt-get install {self.packages}"


# The third-party MCP servers the tests run, pinned in tests/mcp_servers/package-lock.json
MCP_SERVERS = Path(__file__).resolve().parent / "mcp_servers" / "node_modules"
MCP_SERVER_PROGRAMS = ("mcp-server-everything", "mcp-server-filesystem")


def mcp_server(program: str) -> list[str]:
    """The command line that starts one of the pinned npm MCP servers."""
    assert program in MCP_SERVER_PROGRAMS, program
    return [str(MCP_SERVERS / ".bin" / program)]


def _postgres() -> bool:
    servers = glob.glob("/usr/lib/postgresql/*/bin/pg_ctl") or [shutil.which("pg_ctl")]
    return servers[0] is not None and shutil.which("psql") is not None


def _chromium() -> bool:
    return Path("/usr/bin/chromium").exists()


PREREQUISITES: dict[str, Prerequisite] = {
    "postgresql": Prerequisite(
        "the PostgreSQL store and cluster tests", "postgresql postgresql-client", _postgres
    ),
    "chromium": Prerequisite("the web console's browser tests", "chromium", _chromium),
    "bubblewrap": Prerequisite(
        "the sandboxed command tests", "bubblewrap", lambda: shutil.which("bwrap") is not None
    ),
    "node": Prerequisite(
        "the tests that run Node.js programs",
        "nodejs npm",
        lambda: shutil.which("node") is not None and shutil.which("npm") is not None,
    ),
    "mcp-servers": Prerequisite(
        "the tests against the reference MCP servers (npm: server-everything, server-filesystem)",
        "",
        lambda: all((MCP_SERVERS / ".bin" / name).exists() for name in MCP_SERVER_PROGRAMS),
        install="make test, or npm ci --prefix tests/mcp_servers",
    ),
    "systemd-analyze": Prerequisite(
        "the unit-file checks", "systemd", lambda: shutil.which("systemd-analyze") is not None
    ),
}


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


@functools.cache
def missing() -> tuple[str, ...]:
    """The names of the prerequisites not installed here (looked up once per process)."""
    return tuple(name for name, p in PREREQUISITES.items() if not p.present())


def missing_line() -> str | None:
    """The run's one line about what is missing, or None when nothing is."""
    gone = missing()
    if not gone:
        return None
    apt = " ".join(p.packages for n in gone if not (p := PREREQUISITES[n]).install)
    ways = [f"apt-get install {apt}"] if apt else []
    ways += [PREREQUISITES[n].install for n in gone if PREREQUISITES[n].install]
    consequence = "they FAIL (CI=true)" if in_ci() else "they skip (with CI=true they fail)"
    return f"missing for some tests: {', '.join(gone)} ({'; '.join(ways)}); {consequence}"


def require(name: str) -> None:
    """Skip the running test (fail it under CI=true) when prerequisite `name` is missing."""
    prerequisite = PREREQUISITES[name]  # a KeyError names a typo in a test
    if name not in missing():
        return
    why = f"{name} is not installed ({prerequisite.how()})"
    if in_ci():
        pytest.fail(f"CI=true: {why}, and {prerequisite.what} must run", pytrace=False)
    pytest.skip(f"{why}: {prerequisite.what} skip")
