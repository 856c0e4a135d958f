"""The faults a sick machine deals the daemon, as mechanisms shared by the fault tests
(tests/test_faults_*.py) and the soak's fault parts (benchmarks/soak_faults.py):

- a small file system (a tmpfs) for the store, filled up with a ballast file mid-burst;
- another program holding the SQLite store's write lock;
- model requests that never get an answer (the daemon's request timeout ends them);
- a memory cgroup with a limit, as systemd's ``MemoryMax=`` makes one: the daemon runs in it,
  and the kernel's OOM killer kills it when it passes the limit.

Those that need what the machine may not grant (root, a memory controller) raise
:class:`Unavailable` saying what was refused: the tests skip on it, the soak stops on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import secrets
import sqlite3
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from tests.fakes.openai_server import Reply

MIB = 2**20


class Unavailable(RuntimeError):
    """The machine does not allow this fault here (the reason is the message)."""


# -- the disk ------------------------------------------------------------------------------------


@contextlib.contextmanager
def small_fs(where: Path, size: str = "4m") -> Iterator[Path]:
    """A tmpfs of `size` mounted at `where` (made), unmounted afterwards."""
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise Unavailable(
            f"a small file system is needed and mounting a tmpfs was refused: {done.stderr}"
        )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def remount(where: Path, mode: str) -> None:
    """Make the file system at `where` read-only ("ro") or writable again ("rw")."""
    subprocess.run(["mount", "-o", f"remount,{mode}", str(where)], check=True)


def fill(path: Path) -> int:
    """Write `path` until the file system is full; returns the bytes written."""
    written = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            written += os.write(fd, bytes(64 * 1024))
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
    finally:
        os.close(fd)
    return written


class StoreLock:
    """Another program's write transaction on a SQLite store (its readers go on: WAL)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None

    def take(self) -> None:
        """BEGIN IMMEDIATE, waiting up to 30 s for the daemon's own writer (blocks)."""
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        db.execute("BEGIN IMMEDIATE")
        self._db = db

    def release(self) -> None:
        if self._db is not None:
            with contextlib.closing(self._db) as db:
                db.execute("COMMIT")
            self._db = None


# -- the model -----------------------------------------------------------------------------------


class Hang:
    """A model endpoint (FakeOpenAI's `default`) that answers as `model` does, except that
    requests `when` picks never get an answer: `times` of them (``arm`` adds more). The
    daemon's request timeout ends them; `hung` holds their bodies."""

    def __init__(
        self,
        model: Callable[[dict[str, Any]], Awaitable[Reply]],
        when: Callable[[dict[str, Any]], bool] = lambda _: True,
        times: int = 0,
    ) -> None:
        self.model, self.when, self.times = model, when, times
        self.hung: list[dict[str, Any]] = []
        self.listeners: list[Callable[[dict[str, Any]], None]] = []  # told as one hangs
        self._never = asyncio.Event()

    def arm(self, times: int = 1) -> None:
        self.times += times

    def release(self) -> None:
        """Let the hung requests go (the daemon gave up on them long ago)."""
        self._never.set()

    async def __call__(self, body: dict[str, Any]) -> Reply:
        if self.times > 0 and self.when(body):
            self.times -= 1
            self.hung.append(body)
            for listener in list(self.listeners):
                listener(body)
            await self._never.wait()
        return await self.model(body)


# -- memory --------------------------------------------------------------------------------------


class MemoryCage:
    """A memory cgroup made under this process's own, with a limit (cgroup v1's
    memory.limit_in_bytes, v2's memory.max) and no swap: what systemd's ``MemoryMax=`` makes
    for a service. A process started with :meth:`prefix` before its command runs in it from
    its first instruction; the kernel kills it when the processes in it pass the limit."""

    def __init__(self, path: Path, v2: bool) -> None:
        self.path, self.v2 = path, v2

    @classmethod
    def create(cls, limit: int, name: str = "relaybot-test") -> MemoryCage:
        parent, v2 = _own_memory_cgroup()
        path = parent / f"{name}-{os.getpid()}-{secrets.token_hex(3)}"
        try:
            path.mkdir()
        except OSError as exc:
            raise Unavailable(f"a memory cgroup cannot be made in {parent}: {exc}") from None
        cage = cls(path, v2)
        try:
            cage.set_limit(limit)
        except OSError as exc:
            cage.remove()
            raise Unavailable(f"the memory cgroup {path} refused a limit: {exc}") from None
        return cage

    def prefix(self) -> list[str]:
        """A command prefix that moves the process into the cage, then runs the command (the
        shell's pid is the command's after exec)."""
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.path / "cgroup.procs")]

    def set_limit(self, limit: int) -> None:
        if self.v2:
            self._write("memory.max", limit)
            with contextlib.suppress(FileNotFoundError):  # no swap accounting: nothing to do
                self._write("memory.swap.max", 0)
            return
        self._write("memory.limit_in_bytes", limit)
        # Swap would hold the excess instead of the kill: none (memsw exists with swap
        # accounting; swappiness 0 where it does not).
        with contextlib.suppress(FileNotFoundError, OSError):
            self._write("memory.memsw.limit_in_bytes", limit)
        with contextlib.suppress(FileNotFoundError, OSError):
            self._write("memory.swappiness", 0)

    @property
    def limit(self) -> int:
        return self._read("memory.max" if self.v2 else "memory.limit_in_bytes")

    def usage(self) -> int:
        """Bytes charged now (the processes' memory and the page cache they filled)."""
        return self._read("memory.current" if self.v2 else "memory.usage_in_bytes")

    def peak(self) -> int | None:
        """The most ever charged (None where the kernel does not say: v2 before 5.19)."""
        try:
            return self._read("memory.peak" if self.v2 else "memory.max_usage_in_bytes")
        except FileNotFoundError:
            return None

    def oom_kills(self) -> int:
        """Processes the kernel's OOM killer killed in the cage."""
        name = "memory.events" if self.v2 else "memory.oom_control"
        for line in (self.path / name).read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def pids(self) -> list[int]:
        return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]

    def remove(self) -> None:
        """Remove the cage; processes still in it are moved to the parent first."""
        parent = self.path.parent / "cgroup.procs"
        with contextlib.suppress(OSError):
            for pid in self.pids():
                with contextlib.suppress(OSError):
                    parent.write_text(str(pid))
        with contextlib.suppress(OSError):
            self.path.rmdir()

    def _write(self, name: str, value: int) -> None:
        (self.path / name).write_text(str(value))

    def _read(self, name: str) -> int:
        text = (self.path / name).read_text().strip()
        return 2**63 - 1 if text == "max" else int(text)


def _own_memory_cgroup() -> tuple[Path, bool]:
    """The directory of this process's memory cgroup, and whether it is cgroup v2."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError as exc:
        raise Unavailable(f"no cgroups here: {exc}") from None
    own = {}  # controller ("" for v2) → path
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    for mount in mounts:
        fields, _, fs = mount.partition(" - ")
        root, point = fields.split()[3:5]
        fstype, _, options = fs.split()[:3]
        if fstype == "cgroup" and "memory" in options.split(",") and "memory" in own:
            return _under(Path(point), root, own["memory"]), False
        if fstype == "cgroup2" and "" in own:
            here = _under(Path(point), root, own[""])
            if "memory" not in _words(here / "cgroup.controllers"):
                continue  # v2 mounted, but the memory controller is not given here
            if "memory" not in _words(here / "cgroup.subtree_control"):
                try:
                    (here / "cgroup.subtree_control").write_text("+memory")
                except OSError as exc:
                    raise Unavailable(
                        f"the memory controller cannot be enabled below {here}: {exc}"
                    ) from None
            return here, True
    raise Unavailable("no memory controller is mounted (cgroup v1 memory or v2 with memory)")


def _under(point: Path, root: str, path: str) -> Path:
    relative = path[len(root) :] if root != "/" and path.startswith(root) else path
    return point / relative.lstrip("/")


def _words(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except OSError:
        return []


def rss_mib(pid: int) -> float:
    """A process's resident memory in MiB (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0
