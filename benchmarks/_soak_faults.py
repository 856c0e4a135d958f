"""The soak's fault parts (`benchmarks/soak.py --faults disk-full,model-hang,store-locked,oom`):
the faults of a sick machine, injected mid-burst in every other cycle, in turn, with the
mechanisms the fault tests use (benchmarks/_faults.py).

- disk-full: the store lives on a small tmpfs; a ballast file fills it mid-burst, and is removed
  once the daemon says the store cannot be written or updates are not confirmed.
- store-locked: another program takes the store's write lock mid-burst and lets go once the
  daemon says so (after its 5 s busy timeout).
- model-hang: the next model request never gets an answer; the daemon's request timeout (3 s
  here) ends it with an apology.
- oom: the daemon runs in a memory cgroup with a limit (systemd's MemoryMax=) all along; a
  message mid-burst makes a tool allocate past it and the kernel kills the daemon, which the
  soak starts again as systemd's Restart= would.

After the first three the daemon must carry on by itself: every message said so far answered
(or apologised for) without a restart, within a minute; then the cycle goes on with its SIGKILL
as any other. Each part's messages are those said from its start until then (for oom, until
the daemon runs again), and are reported in the soak's terms: lost, out of order, twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import statistics
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._crash_rig import Daemon, Kind, Ledger, Life
from benchmarks._faults import MIB, Hang, MemoryCage, StoreLock, fill, rss_mib, small_fs

FAULTS = ("disk-full", "store-locked", "model-hang", "oom")
MEMORY_LIMIT = 256 * MIB  # as in tests/test_faults_memory.py: ~2.5 times what the daemon needs
HANG_TIMEOUT_S = 3.0  # [llm] request_timeout_s when model-hang is among the faults
FELT_S = 30.0  # how long a fault waits for the daemon to show it noticed
RECOVER_S = 60.0  # how long the daemon has to answer everything once a fault is lifted
# what the daemon says when the store refuses writes (the store's line is said once per episode,
# the poller's when a batch of updates could not be recorded)
REFUSED = ("cannot be written:", "Telegram: updates not confirmed")


def parse(text: str) -> list[str]:
    """`--faults`: names separated by commas, or "all"."""
    names = list(FAULTS) if text.strip() == "all" else [n.strip() for n in text.split(",") if n]
    unknown = [n for n in names if n not in FAULTS]
    if unknown or not names:
        raise ValueError(f"unknown fault {', '.join(unknown)}: choose from {', '.join(FAULTS)}")
    return names


@dataclass
class Part:
    """One fault's cycles and what they showed."""

    name: str
    spans: list[tuple[int, int]] = field(default_factory=list)  # people.said[start:end]
    felt: int = 0  # cycles in which the daemon showed it noticed (or was killed: oom)
    recovered_s: list[float] = field(default_factory=list)  # lifted → all answered, same life
    stuck: int = 0  # cycles after which it did not carry on by itself
    notes: list[str] = field(default_factory=list)


class Parts:
    """The fault parts of one soak run: made before the daemon starts, used cycle by cycle."""

    def __init__(self, names: Sequence[str], directory: Path) -> None:
        self.names = list(names)
        self.directory = directory
        self.parts = {name: Part(name) for name in names}
        self.store: Path | None = None  # on the small disk (disk-full)
        self.cage: MemoryCage | None = None  # oom
        self.hang: Hang | None = None  # model-hang: wraps the model
        self._ballast: Path | None = None
        self._seen = 0  # REFUSED lines in the log before the fault
        self._apologies = 0  # apologies delivered before it

    @classmethod
    @contextlib.asynccontextmanager
    async def made(
        cls, names: Sequence[str], directory: Path, keep: bool = False
    ) -> AsyncIterator[Parts]:
        """The small disk and the memory cgroup the faults need (raises
        benchmarks._faults.Unavailable when the machine refuses them); `keep`: the store is
        copied off the small disk before it goes."""
        parts = cls(names, directory)
        with contextlib.ExitStack() as stack:
            if "disk-full" in names:
                disk = stack.enter_context(small_fs(directory / "disk", "64m"))
                parts.store = disk / "relaybot.db"
                parts._ballast = disk / "ballast"
                if keep:
                    stack.callback(_copy_store, disk, directory)
            if "oom" in names:
                parts.cage = MemoryCage.create(MEMORY_LIMIT, name="relaybot-soak")
                stack.callback(parts.cage.remove)
            yield parts

    def write_options(self, llm_timeout_s: float) -> dict[str, Any]:
        """write_files' keyword arguments for these faults."""
        options: dict[str, Any] = {"llm_timeout_s": llm_timeout_s}
        if self.store is not None:
            options["store_path"] = self.store
        if self.cage is not None:
            options["load_mib"] = 4 * MEMORY_LIMIT // MIB
        if "model-hang" in self.names:
            options["llm_timeout_s"] = min(llm_timeout_s, HANG_TIMEOUT_S)
        return options

    def prefix(self) -> list[str]:
        return self.cage.prefix() if self.cage is not None else []

    def model(self, model: Any, on_hung: Callable[[dict[str, Any]], None]) -> Any:
        """The model endpoint: `model`, behind a Hang when model-hang is among the faults."""
        if "model-hang" not in self.names:
            return model
        self.hang = Hang(model)
        self.hang.listeners.append(on_hung)
        return self.hang

    def pick(self, cycle: int) -> str | None:
        """The fault of a cycle: every other one, in turn."""
        if cycle % 2 == 0:
            return None
        return self.names[(cycle // 2) % len(self.names)]

    async def inject(
        self,
        name: str,
        people: Any,
        daemon: Daemon,
        ledger: Ledger,
        coverage: Any,
        burst: int,
        span_s: float,
    ) -> Life | None:
        """One fault part: a burst with the fault injected part-way. Returns the daemon's life
        when the kernel killed it (oom; the caller starts it again), else None once the daemon
        has answered everything said so far, or given up waiting. The part's messages run
        until :meth:`close`."""
        part = self.parts[name]
        part.spans.append((len(people.said), len(people.said)))
        before = people.rng.randint(1, max(burst - 1, 1))
        each_s = span_s / burst
        await people.burst(before, each_s * before)
        if name == "oom":
            return await self._oom(part, people, daemon, burst - before, each_s)
        lift = await self._apply(name, part, daemon, ledger)
        await people.burst(burst - before, each_s * (burst - before))
        await self._felt(name, part, daemon, ledger)
        await lift()
        loop = asyncio.get_running_loop()
        lifted, life = loop.time(), len(daemon.lives)
        done, done_with = coverage.done, coverage.covered.__contains__
        try:
            await ledger.wait_until(done, RECOVER_S)
        except TimeoutError:
            part.stuck += 1
            left = [s.token for s in people.said if not done_with(s.token)]
            part.notes.append(
                f"not all answered {RECOVER_S:g} s after it was lifted ({' '.join(left[:4])})"
            )
        else:
            if len(daemon.lives) == life and daemon.running:
                part.recovered_s.append(loop.time() - lifted)
            else:
                part.stuck += 1
                part.notes.append("the daemon died during it")
        return None

    def close(self, name: str, people: Any) -> None:
        """The part's messages end here (for oom: once the daemon runs again)."""
        part = self.parts[name]
        start, _ = part.spans[-1]
        part.spans[-1] = (start, len(people.said))

    async def _apply(
        self, name: str, part: Part, daemon: Daemon, ledger: Ledger
    ) -> Callable[[], Any]:
        """Inject the fault; returns what lifts it."""
        self._seen = _count(daemon.files.log, REFUSED)
        self._apologies = len(ledger.of(Kind.APOLOGY))
        if name == "disk-full":
            assert self._ballast is not None
            ballast = self._ballast
            filled = await asyncio.to_thread(fill, ballast)
            part.notes.append(f"{filled / MIB:.0f} MiB of ballast")

            async def lift() -> None:
                ballast.unlink()

            return lift
        if name == "store-locked":
            lock = StoreLock(daemon.files.db)
            await asyncio.to_thread(lock.take)
            taken = asyncio.get_running_loop().time()

            async def unlock() -> None:
                lock.release()
                held = asyncio.get_running_loop().time() - taken
                part.notes.append(f"lock held {held:.1f} s")

            return unlock
        assert self.hang is not None  # model-hang
        self.hang.arm(1)

        async def nothing() -> None:
            return None

        return nothing

    async def _felt(self, name: str, part: Part, daemon: Daemon, ledger: Ledger) -> None:
        """Wait until the daemon shows it noticed: a line saying the store refuses writes, an
        apology (model); bounded by FELT_S."""
        try:
            if name == "model-hang":
                n = self._apologies
                await ledger.wait_until(lambda: len(ledger.of(Kind.APOLOGY)) > n, FELT_S)
            else:
                async with asyncio.timeout(FELT_S):
                    # another process writes the log: there is no event to wait on
                    while _count(daemon.files.log, REFUSED) <= self._seen:  # noqa: ASYNC110
                        await asyncio.sleep(0.05)
        except TimeoutError:
            part.notes.append(f"not noticed within {FELT_S:g} s")
        else:
            part.felt += 1

    async def _oom(
        self, part: Part, people: Any, daemon: Daemon, rest: int, each_s: float
    ) -> Life | None:
        """The kernel's kill: the life it ended, or None (not killed, or not by the OOM
        killer: the cycle's SIGKILL or the soak's own-exit count then takes over)."""
        assert self.cage is not None and daemon.pid is not None
        kills = self.cage.oom_kills()
        rss = rss_mib(daemon.pid)
        people.say(words="please load the archive")
        remaining = asyncio.ensure_future(people.burst(rest, each_s * rest))
        try:
            life = await asyncio.wait_for(daemon.wait_dead(), FELT_S)
        except TimeoutError:
            part.notes.append(f"not killed within {FELT_S:g} s")
            return None
        finally:
            await remaining
        if self.cage.oom_kills() == kills:
            part.notes.append(f"died, not by the OOM killer (exit {life.exit_code})")
            return None
        part.felt += 1
        life.killed_at = life.ended  # for the send window: it died then
        peak = self.cage.peak()
        part.notes.append(
            f"RSS {rss:.0f} MiB before, killed at the {MEMORY_LIMIT // MIB} MiB limit"
            + (f" (peak {peak / MIB:.0f} MiB)" if peak else "")
        )
        return life

    def rows(
        self, figures: Any, people: Any, ledger: Ledger, failures: Any
    ) -> list[tuple[str, str]]:
        """The report's rows, one per fault, in the soak's terms."""
        apologised = {t for d in ledger.of(Kind.APOLOGY) for t in failures.apologised(d)}
        rows = [("fault parts, every other cycle in turn", ", ".join(self.names))]
        for part in self.parts.values():
            tokens = {s.token for a, b in part.spans for s in people.said[a:b]}
            lost = tokens & set(figures.lost)
            disorder = tokens & set(figures.out_of_order)
            inside = tokens & set(figures.duplicated_inside)
            outside = tokens & set(figures.duplicated_outside)
            verdict = "FAIL" if self.failed(part, figures, people) else "ok"
            what = [f"noticed in {part.felt} of {len(part.spans)}"]
            if part.name == "oom":
                what = [f"killed by the kernel in {part.felt} of {len(part.spans)}"]
            if part.recovered_s:
                what.append(
                    f"all answered {statistics.median(part.recovered_s):.1f} s (median) after it "
                    "was lifted, no restart"
                )
            if tokens & apologised:
                what.append(f"{len(tokens & apologised)} apologised for")
            what += _distinct(part.notes)
            cycles = f"{len(part.spans)} cycle{'s' if len(part.spans) != 1 else ''}"
            rows.append(
                (
                    f"  {part.name} ({cycles})",
                    f"{len(tokens)} messages, {len(lost)} lost, {len(disorder)} out of order, "
                    f"{len(inside) + len(outside)} twice ({len(outside)} outside the send "
                    f"window): {verdict}; {'; '.join(what)}",
                )
            )
        return rows

    def failed(self, part: Part, figures: Any, people: Any) -> bool:
        tokens = {s.token for a, b in part.spans for s in people.said[a:b]}
        bad = set(figures.lost) | set(figures.out_of_order) | set(figures.duplicated_outside)
        exercised = part.felt > 0 or not part.spans  # a fault the daemon never felt: not tested
        return bool(tokens & bad) or part.stuck > 0 or not exercised

    def any_failed(self, figures: Any, people: Any) -> bool:
        return any(self.failed(p, figures, people) for p in self.parts.values())


def _count(path: Path, needles: Sequence[str]) -> int:
    text = path.read_text(errors="replace") if path.exists() else ""
    return sum(text.count(needle) for needle in needles)


def _copy_store(disk: Path, directory: Path) -> None:
    for path in disk.glob("relaybot.db*"):
        shutil.copy2(path, directory / path.name)


def _distinct(notes: list[str]) -> list[str]:
    """Notes said once each, with how often (ballast sizes and the like vary: the range)."""
    out: list[str] = []
    for note in dict.fromkeys(notes):
        n = notes.count(note)
        out.append(note if n == 1 else f"{note} (×{n})")
    return out
