"""`relaybot upgrade SOURCE` and `relaybot rollback`: a new generation (bot/_generations.py)
checked before it replaces the running one, and the previous one back when it fails.

An upgrade: builds the generation from SOURCE; runs its `check-config` on the live config and
its migrations on a copy of the live store (PostgreSQL: `migrate --check`); points `current` at
it (`previous` at the one that ran) and switches the daemon (bot/_handoff.py): the new version
must start, migrate and say READY=1 within --ready-timeout, then pass its own `doctor --quick`
(the checks that need no network: config and secrets, store, plugins, sandbox) within as long
again. If it does not, it is stopped, the store is put back as it was (the copy the new version
made before migrating, when it migrated; PostgreSQL keeps what it added, which the previous
release runs on: migrations only add within a release step), `current` and `previous` name
what they named before and the previous generation is started. One line says which version
runs (and, after a rollback, why: the failing check's line); the exit status is 0 when the new
one does, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bot import _generations as gens
from bot import _handoff as daemons
from bot._lock import holder
from bot.config import Config
from engine.store.sqlite import backup_path, backup_sqlite, stored_version

READY_TIMEOUT_S = 60.0


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    text = "install SOURCE (a wheel, a checkout or a git URL) as a new generation and switch to it"
    sp = sub.add_parser("upgrade", help=text, description=text)
    sp.add_argument("source", metavar="SOURCE")
    text = "go back to the previous generation"
    rb = sub.add_parser("rollback", help=text, description=text)
    for p in (sp, rb):
        p.add_argument(
            "--pid",
            type=int,
            metavar="PID",
            help="the daemon to switch, where its store's lock "
            "cannot tell (PostgreSQL: one instance of several, not under systemd)",
        )
        p.add_argument(
            "--ready-timeout",
            type=float,
            default=READY_TIMEOUT_S,
            metavar="S",
            help=f"seconds the new version has to start and say it is ready ({READY_TIMEOUT_S:g})",
        )


@dataclass(slots=True)
class Place:
    """Where the switch happens: the generations' home, the config, the store, the daemon."""

    root: Path
    config: Path
    store: Path | None  # the SQLite file; None on PostgreSQL
    daemon: daemons.Daemon | None
    grace_s: float
    timeout: float

    @property
    def log(self) -> Path:
        return self.root / "relaybot.log"


def _place(config: Config, timeout: float, pid: int | None) -> Place:
    assert config._path is not None  # loaded from a file
    store = None if config.storage.resolved_url() else config.storage.resolved_path()
    if pid is None and store is not None:
        pid = holder(store)
    daemon = daemons.inspect(pid) if pid else None
    return Place(
        gens.home(),
        config._path.absolute(),
        store,
        daemon,
        config.engine.shutdown_grace_s + 5,
        timeout,
    )


async def _relaybot(
    gen: gens.Generation, *args: str, timeout: float | None = None
) -> tuple[int, str]:
    done = await daemons.finished([str(gen.relaybot), *args], timeout)
    return done or (124, f"it took more than {timeout:g} s")


def _gist(said: str) -> str:
    """The error line of a command's output (stderr comes before buffered stdout)."""
    lines = said.splitlines() or ["(no output)"]
    return next((x for x in reversed(lines) if x.startswith("relaybot: ")), lines[-1])


async def _refusal(gen: gens.Generation, place: Place) -> str | None:
    """Why `gen` may not replace the running version: its check-config, or its migrations on
    a copy of the store; None when both pass."""
    code, said = await _relaybot(gen, "check-config", "-c", str(place.config))
    for line in said.splitlines():
        if line.startswith("warning:"):
            print(f"{gen.version} check-config: {line}")
    if code != 0:
        return f"its check-config refused {place.config}: {_gist(said)}"
    if place.store is None:
        code, said = await _relaybot(gen, "migrate", "--check", "-c", str(place.config))
        return None if code == 0 else f"its migrate --check refused the store: {said}"
    if not place.store.exists():
        return None
    with tempfile.TemporaryDirectory(prefix="relaybot-trial-") as scratch:
        copy = Path(scratch) / "relaybot.db"
        await asyncio.to_thread(backup_sqlite, place.store, copy)
        code, said = await _relaybot(gen, "migrate", "--store", str(copy), "-c", str(place.config))
    if code != 0:
        return f"its migrations failed on a copy of the store: {_gist(said)}"
    return None


async def _unwell(gen: gens.Generation, place: Place) -> str | None:
    """Why `gen`, now running, fails its doctor's quick checks: the first failing check's
    line; None when they pass."""
    args = ("doctor", "--quick", "-c", str(place.config))
    code, said = await _relaybot(gen, *args, timeout=place.timeout)
    if code == 0:
        return None
    failed = [line for line in said.splitlines() if ": FAILED - " in line]
    return f"its doctor --quick failed: {(failed or [_gist(said)])[0]}"


async def _restore(place: Place, version: int) -> None:
    """The store as it was at schema `version`, from the copy made before it was migrated."""
    if place.store is None or await asyncio.to_thread(stored_version, place.store) == version:
        return
    copy = backup_path(place.store, version)
    partial = place.store.with_name(f".{place.store.name}.restoring")
    await asyncio.to_thread(shutil.copyfile, copy, partial)
    for suffix in ("-wal", "-shm"):
        place.store.with_name(place.store.name + suffix).unlink(missing_ok=True)
    os.replace(partial, place.store)


async def _switch(place: Place, command: list[str], *, handoff: bool) -> daemons.Started:
    """Restart the daemon's unit; or start `command` and stop the daemon: once the new one waits
    for the store (`handoff`: it is of this release or later), else first."""
    assert place.daemon is not None
    if place.daemon.unit:
        return await daemons.restart_unit(place.daemon, place.timeout)
    if handoff:
        return await daemons.start(
            command, place.log, place.timeout, place.grace_s, replaces=place.daemon.pid
        )
    began = daemons.clock()
    await daemons.stop(place.daemon.pid, place.grace_s)
    started = await daemons.start(command, place.log, place.timeout, place.grace_s)
    started.took = daemons.clock() - began
    return started


def _stable(place: Place) -> list[str]:
    return [str(gens.stable_relaybot(place.root)), "run", "-c", str(place.config)]


def _name(gen: gens.Generation | None) -> str:
    return f"relaybot {gen.version}" if gen else "the installed relaybot"


async def switch(config: Config, args: argparse.Namespace) -> int:
    """`relaybot upgrade` and `relaybot rollback`."""
    if args.command == "upgrade":
        return await upgrade(config, args.source, args.ready_timeout, args.pid)
    return await rollback(config, args.ready_timeout, args.pid)


async def upgrade(config: Config, source: str, timeout: float, pid: int | None = None) -> int:
    place = _place(config, timeout, pid)
    old = gens.pointed(place.root, "current")
    try:
        gen = await asyncio.to_thread(gens.build, place.root, source)
    except gens.BuildError as exc:
        print(f"{_name(old)} still runs: the upgrade was not installed ({exc})")
        return 1
    why = await _refusal(gen, place)
    if why is not None:
        gens.discard(gen)
        print(f"{_name(old)} still runs: {gen.version} was refused ({why})")
        return 1
    version = await asyncio.to_thread(stored_version, place.store) if place.store else 0
    before = gens.pointed(place.root, "previous")  # named again after a rollback
    gens.point(place.root, "previous", old)
    gens.point(place.root, "current", gen)
    if place.daemon is None:
        print(f"{gen} is current; no daemon was running (start it: relaybot run, or systemctl)")
        return 0
    started = await _switch(place, _stable(place), handoff=True)
    if started.pid is not None:
        why = await _unwell(gen, place)
        if why is None:
            print(f"{gen} runs (no daemon for {started.took:.2f} s)")
            return 0
        if place.daemon.unit:  # stopped before the store is put back; restarted below
            await daemons.systemctl(place.daemon, "stop", timeout=place.timeout)
        else:
            await daemons.stop(started.pid, place.grace_s)
        started = daemons.Started(None, why)
    await _restore(place, version)
    gens.point(place.root, "current", old)
    gens.point(place.root, "previous", before)
    state = "still runs"
    if started.replaced:  # it was stopped: started again as it was started
        back = daemons.restart_command(place.daemon, place.config)
        if place.daemon.unit:
            again = await daemons.restart_unit(place.daemon, place.timeout)
        else:
            again = await daemons.start(back, place.log, place.timeout, place.grace_s)
        state = "runs again" if again.pid is not None else f"did not start again ({again.why})"
    gens.discard(gen)
    print(f"{_name(old)} {state}: the upgrade to {gen.version} was rolled back ({started.why})")
    return 1


async def rollback(config: Config, timeout: float, pid: int | None = None) -> int:
    place = _place(config, timeout, pid)
    current, previous = gens.pointed(place.root, "current"), gens.pointed(place.root, "previous")
    if previous is None:
        print(f"{_name(current)} runs: there is no previous generation in {place.root}")
        return 1
    code, said = await _relaybot(previous, "migrate", "--check", "-c", str(place.config))
    if code != 0:
        print(f"{_name(current)} still runs: {previous} cannot run on the store ({said})")
        return 1
    gens.point(place.root, "current", previous)
    gens.point(place.root, "previous", current)
    if place.daemon is None:
        print(f"{previous} is current; no daemon was running")
        return 0
    started = await _switch(place, _stable(place), handoff=False)  # it may be older than handoffs
    if started.pid is None:
        print(f"{previous} did not start ({started.why}): `relaybot rollback` again goes back")
        return 1
    print(f"{previous} runs (rolled back; no daemon for {started.took:.2f} s)")
    return 0
