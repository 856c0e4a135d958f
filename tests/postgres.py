"""A real PostgreSQL server for the tests: Debian's `postgresql` package, one server per test
process (each parallel worker has its own) in a temporary directory, listening on a Unix socket
only (nothing on the network).

A test that fails a server over makes a pair of its own: a primary listening on 127.0.0.1 too,
and a streaming-replication standby copied from it (:meth:`PostgresServer.standby`,
`pg_basebackup -R`), synchronous so that a commit is on both before it returns.

The server refuses to run as root, so under root (CI, this machine) it runs as the `postgres`
system user the package creates (`runuser`); otherwise as the current user. Each test gets its
own database, copied from a template that is already migrated (`CREATE DATABASE … TEMPLATE`),
which takes a few tens of milliseconds.

Without the package the PostgreSQL tests skip, except under CI=true, where they must run
(tests/prerequisites.py); a server that cannot start fails them with its log.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import itertools
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ports import free_port
from tests.prerequisites import require

TEMPLATE = "relaybot_template"


def binaries() -> Path | None:
    """The directory holding initdb and pg_ctl (the newest installed version)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=_version)
    if found:
        return Path(found[-1]).parent
    pg_ctl = shutil.which("pg_ctl")
    return Path(pg_ctl).resolve().parent if pg_ctl else None


def _version(path: str) -> float:
    part = path.split("/")[4]
    return float(part) if part.replace(".", "").isdigit() else 0.0


class PostgresServer:
    """One server in a temporary directory. `tcp`: it listens on 127.0.0.1 too (a port of its
    own, `port`), for URLs that name hosts; `settings` are more ``-c`` options."""

    def __init__(self, *, tcp: bool = False, settings: tuple[str, ...] = ()) -> None:
        bindir = binaries()
        if bindir is None:
            raise RuntimeError("PostgreSQL is not installed (apt-get install postgresql)")
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="relaybot-pg-"))
        self.data = self.root / "data"
        self.port = free_port()  # names the socket file; on TCP only with `tcp`
        self.as_root = os.geteuid() == 0
        self._names = itertools.count(1)
        listen = "127.0.0.1" if tcp else ""
        self._options = " ".join(
            (
                f"-k {self.root} -c listen_addresses='{listen}' -p {self.port} -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300",
                *(f"-c {setting}" for setting in settings),
            )
        )

    def _run(self, *argv: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if self.as_root else []
        subprocess.run([*prefix, *argv], check=True, capture_output=True, timeout=120)

    def _own_root(self) -> None:
        if self.as_root:
            shutil.chown(self.root, "postgres")
        self.root.chmod(0o755)

    def start(self) -> None:
        self._own_root()
        self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-sync",
        )
        self._start()
        self.psql(f"CREATE DATABASE {TEMPLATE}")
        _in_thread(_migrate(self.url(TEMPLATE)))

    def _start(self) -> None:
        try:
            self.resume()
        except subprocess.CalledProcessError as exc:
            raise RuntimeError(f"PostgreSQL did not start:\n{self.log()}") from exc

    def standby(self, *, settings: tuple[str, ...] = ()) -> PostgresServer:
        """A streaming-replication standby of this server (which must listen on TCP), started:
        a base backup with `-R` (it follows this one), read-only until :meth:`promote`."""
        other = PostgresServer(tcp=True, settings=settings)
        try:
            other._own_root()
            self._run(
                str(self.bindir / "pg_basebackup"),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-D",
                str(other.data),
                "-R",
                "-X",
                "stream",
                "--checkpoint=fast",
                "--no-sync",
            )
            other._start()
        except BaseException:
            other.stop()
            raise
        return other

    def promote(self) -> None:
        """Make this standby a primary (waits until it accepts writes)."""
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60", "promote")

    def halt(self, mode: str = "fast") -> None:
        """Stop the server, keeping its data (the database becomes unreachable); `immediate`:
        as a crash, every connection cut without a word."""
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def resume(self) -> None:
        """Start the halted server again."""
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            self._options,
            "-l",
            str(self.root / "server.log"),
            "-w",
            "-t",
            "60",
            "start",
        )

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    def log(self) -> str:
        try:
            return (self.root / "server.log").read_text(errors="replace")[-4000:]
        except OSError:
            return "(no server log)"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@/{database}?host={self.root}&port={self.port}"

    def psql(self, sql: str, database: str = "postgres") -> str:
        done = subprocess.run(
            [
                "psql",
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                str(self.root),
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-d",
                database,
                "-c",
                sql,
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return done.stdout.strip()

    def new_database(self, *, migrated: bool = True) -> str:
        """A fresh database (migrated to the current schema, or empty); returns its URL."""
        name = f"t{os.getpid()}_{next(self._names)}"
        template = TEMPLATE if migrated else "template0"
        self.psql(f"CREATE DATABASE {name} TEMPLATE {template}")
        return self.url(name)


async def _migrate(url: str) -> None:
    from engine.store.postgres import PgStore

    async with PgStore(url):
        pass


def _in_thread(coro: Any) -> None:
    """Run `coro` to the end in a loop of its own (the caller may be inside a running loop)."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(coro)
        except BaseException as exc:
            failed.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    if failed:
        raise RuntimeError(f"could not migrate the template database: {failed[0]}")


def start_or_skip(**options: Any) -> PostgresServer:
    """The session's server (`options`: :class:`PostgresServer`'s); skips without PostgreSQL,
    fails under CI=true."""
    require("postgresql")
    with _needed():
        server = PostgresServer(**options)
    with _needed(server):
        server.start()
    return server


def start_pair_or_skip() -> tuple[PostgresServer, PostgresServer]:
    """A primary on 127.0.0.1 and its synchronous standby, both started: a commit returns once
    the standby has applied it (reads there see it too), so a failover loses nothing committed.
    Stop both when done."""
    primary = start_or_skip(tcp=True, settings=("synchronous_commit=remote_apply",))
    try:
        with _needed():
            standby = primary.standby()
            # set now, not at start: the template's migration would wait for a standby
            primary.psql("ALTER SYSTEM SET synchronous_standby_names = '*'")
            primary.psql("SELECT pg_reload_conf()")
            deadline = time.monotonic() + 60
            while primary.psql("SELECT sync_state FROM pg_stat_replication") != "sync":
                if time.monotonic() > deadline:
                    why = f"the standby is not synchronous:\n{standby.log()}"
                    standby.stop()
                    raise RuntimeError(why)
                time.sleep(0.05)  # the server's state, polled: nothing to wait on
    except BaseException:
        primary.stop()
        raise
    return primary, standby


@contextlib.contextmanager
def _needed(server: PostgresServer | None = None) -> Iterator[None]:
    """A server that cannot start skips the test, or fails it under CI=true (and is stopped)."""
    must = os.environ.get("CI", "").lower() == "true"
    try:
        yield
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        if server is not None:
            server.stop()
        if must:
            pytest.fail(f"CI=true needs the PostgreSQL tests, and the server failed: {exc}")
        pytest.skip(f"no PostgreSQL server for these tests: {exc}")
