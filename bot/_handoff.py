"""The daemon `relaybot upgrade` and `relaybot rollback` switch: found through its store's lock,
stopped and started through systemd when systemd runs it, else by itself.

Without systemd (`relaybot run` in a terminal or a container) the running daemon is stopped
with SIGTERM (it finishes its running turns, as on Ctrl-C) and the new one is started detached
(its own session, its output appended to <home>/relaybot.log), in the upgrade command's
directory and environment (the daemon's own are hidden: it is not dumpable, and it forgets its
secrets' variables), with NOTIFY_SOCKET naming a socket of the upgrade's own: the new daemon
says READY=1 there once it runs, as it would to systemd. Started again, the previous one runs
the program its command line named. Under systemd (the daemon's control group is a
relaybot*.service) the switch is `systemctl restart` of that unit, which waits for READY=1.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bot._lock import TAKE_OVER, WAITING

_FIRST = asyncio.FIRST_COMPLETED
_UNIT = re.compile(r"/([^/]*relaybot[^/]*\.service)$")


@dataclass(frozen=True, slots=True)
class Daemon:
    """A running daemon and how to start it the same way again."""

    pid: int
    argv: tuple[str, ...]
    unit: str | None  # the systemd unit running it, if any
    user: bool  # a user unit (systemctl --user)


def inspect(pid: int) -> Daemon | None:
    """What /proc says of `pid` (None when it is gone, or not ours to read)."""
    proc = Path("/proc", str(pid))
    try:
        argv = tuple(a.decode() for a in proc.joinpath("cmdline").read_bytes().split(b"\0") if a)
        cgroup = proc.joinpath("cgroup").read_text()
    except OSError:
        return None
    unit = None
    for line in cgroup.splitlines():
        found = _UNIT.search(line.rsplit(":", 1)[-1])
        if found:
            unit = found[1]
    return Daemon(pid, argv, unit, "/user@" in cgroup)


def restart_command(daemon: Daemon, config: Path) -> list[str]:
    """The program `daemon` ran (its interpreter and script, as its command line named them),
    to `run` with `config`."""
    argv = list(daemon.argv)
    return [*(argv[: argv.index("run")] if "run" in argv else argv[:1]), "run", "-c", str(config)]


async def gone(pid: int, timeout: float) -> bool:
    """Whether process `pid` has exited within `timeout` seconds (waits on its pidfd)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    loop = asyncio.get_running_loop()
    exited = loop.create_future()
    loop.add_reader(fd, _settle, exited)
    try:
        await asyncio.wait_for(exited, timeout)
        return True
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def stop(pid: int, grace_s: float) -> None:
    """SIGTERM, and SIGKILL after `grace_s` seconds; returns once the process is gone."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if not await gone(pid, grace_s):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        await gone(pid, 10)


@dataclass(slots=True)
class Started:
    pid: int | None  # None: it did not become ready (then it has been stopped)
    why: str = ""  # why not
    replaced: bool = True  # the daemon it takes over from was stopped
    took: float = 0.0  # seconds from stopping that one to READY=1: no daemon meanwhile


async def start(
    argv: list[str], log: Path, timeout: float, grace_s: float, *, replaces: int | None = None
) -> Started:
    """Start a daemon detached and wait for its READY=1: the pid, or why not (it exited, or was
    not ready within `timeout` seconds: then it is stopped). `replaces`: the pid of the daemon
    it takes over from, stopped once the new one has loaded and waits for the store
    (RELAYBOT_TAKE_OVER, bot/_lock.py): a new one that fails before that leaves it running."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    began = None if replaces else clock()
    with tempfile.TemporaryDirectory(prefix="relaybot-switch-") as private:
        address = os.path.join(private, "notify")
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.bind(address)
            sock.setblocking(False)
            env = {**os.environ, "NOTIFY_SOCKET": address}
            if replaces:
                env[TAKE_OVER] = "1"
            log.parent.mkdir(parents=True, exist_ok=True)
            out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:  # the daemon's log: its owner's only
                proc = await asyncio.create_subprocess_exec(
                    *argv,
                    env=env,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                    start_new_session=True,
                )
            finally:
                os.close(out)
            exited = asyncio.ensure_future(proc.wait())
            while True:
                got = asyncio.ensure_future(loop.sock_recv(sock, 4096))
                left = max(deadline - loop.time(), 0)
                done, _ = await asyncio.wait({got, exited}, timeout=left, return_when=_FIRST)
                got.cancel()
                if exited.done() or got not in done:
                    break
                lines = got.result().decode(errors="replace").split("\n")
                if "READY=1" in lines:
                    exited.cancel()
                    if began is None:  # it did not wait (PostgreSQL: no lock): both ran a moment
                        began = clock()
                        await stop(replaces or 0, grace_s)
                    return Started(proc.pid, took=clock() - began)
                if replaces and began is None and f"STATUS={WAITING}" in lines:
                    began = clock()
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(replaces, signal.SIGTERM)  # it lets go of the store as it exits
            if exited.done():
                why = f"it exited with status {exited.result()} before it was ready"
            else:
                why = f"it was not ready within {timeout:g} s"
                await stop(proc.pid, grace_s)
                await exited
            if replaces and began is not None:  # sent SIGTERM above: gone before it starts again
                if not await gone(replaces, grace_s):  # a second SIGTERM cut its exit short
                    await stop(replaces, grace_s)
            return Started(None, why, began is not None)


async def finished(argv: list[str], timeout: float | None) -> tuple[int, str] | None:
    """Run `argv` (no input): its exit status and output (stderr among stdout); None when it
    took more than `timeout` seconds (it is killed)."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return None
    return proc.returncode or 0, out.decode(errors="replace").strip()


async def systemctl(daemon: Daemon, *args: str, timeout: float) -> tuple[int, str]:
    assert daemon.unit is not None
    user = ["--user"] if daemon.user else []
    done = await finished(["systemctl", *user, *args, daemon.unit], timeout)
    return done or (124, f"systemctl {args[0]} took more than {timeout:g} s")


async def restart_unit(daemon: Daemon, timeout: float) -> Started:
    """`systemctl restart` (it waits for READY=1), then is the unit active?"""
    began = clock()
    code, said = await systemctl(daemon, "restart", timeout=timeout)
    took = clock() - began
    if code != 0:
        return Started(None, said or f"systemctl restart exited with status {code}", took=took)
    code, said = await systemctl(daemon, "show", "-p", "MainPID", "--value", timeout=30)
    pid = int(said) if said.isdigit() and int(said) else None
    return Started(pid, "it is not active", took=took)


def clock() -> float:
    return time.monotonic()
