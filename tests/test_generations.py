"""`relaybot upgrade` and `relaybot rollback` (issue 45), for real: generations built from
wheels (the previous release's, from a `git archive` of its commit; HEAD's; five broken ones
made from HEAD's by patching files in the wheel), installed offline by uv from a wheelhouse
(tests/wheelhouse.py) with a lock file of that wheelhouse's hashes, switched while a daemon
answers Telegram messages that keep arriving.

On each backend the previous release is upgraded to HEAD (the time without a daemon printed:
`-s` shows it); then each broken upgrade of HEAD (a migration that fails, a crash at import, a
daemon that never says it is ready after it has migrated, a check-config that refuses the live
config; on SQLite also one whose doctor --quick fails once it is ready) ends with HEAD
running again on the store as it was (PostgreSQL keeps the never-ready build's migration: an
addition, which HEAD runs on as it is), and every message sent meanwhile answered once;
`relaybot rollback` then goes back to the previous release only where it runs on the store.
The rolling upgrade runs the previous release's wheel on HEAD's schema.

Cost: the wheels are built once for the module, and the tests share one home of generations
(each daemon is found by its own config, each test starts by installing the previous release):
every generation after the module's first is built with the lock `current` was built with, so
it takes its dependencies' bytecode from it (bot/_generations.py) instead of compiling them
again, about 6 s of CPU each.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import csv
import hashlib
import io
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from benchmarks._crash_rig import Files, Kind, Ledger, TokenModel, token, write_files
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.postgres import PostgresServer
from tests.test_install import SOURCES

ROOT = Path(__file__).resolve().parent.parent
WAIT_S = 60.0
SAY_EVERY_S = 0.3  # once a switch has begun: through the time without a daemon, too
SAY_MOST = 25  # a switch: 7.5 s, past the new daemon's start
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]


def _version(pyproject: str) -> str:
    return str(tomllib.loads(pyproject)["project"]["version"])


def previous_release() -> str | None:
    """The newest commit whose pyproject.toml names another version than HEAD's: the parent
    of the oldest commit since which it names HEAD's."""
    git = ["git", "-C", str(ROOT)]

    def version_at(commit: str) -> str | None:
        shown = subprocess.run(
            [*git, "show", f"{commit}:pyproject.toml"],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        return _version(shown.stdout) if shown.returncode == 0 else None

    try:
        head = _version((ROOT / "pyproject.toml").read_text())
        commits = subprocess.run(
            [*git, "log", "--first-parent", "--format=%H", "--", "pyproject.toml"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return None
    since = None
    for commit in commits:
        if version_at(commit) != head:
            break
        since = commit
    if since is None or version_at(f"{since}^") in (None, head):
        return None
    return f"{since}^"


# -- the builds ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class House:
    wheels: Path
    lock: str  # every wheel in `wheels`, pinned with its hash
    env: dict[str, str]  # uv (and pip) offline, from `wheels` only; RELAYBOT_HOME: the module's


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


@pytest.fixture(scope="module")
def house(tmp_path_factory: pytest.TempPathFactory) -> House:
    from tests.wheelhouse import wheelhouse

    base = tmp_path_factory.mktemp("house")
    wheels = wheelhouse(base / "wheels")
    lines = []
    for wheel in sorted(wheels):
        name, version = wheel.name.split("-")[:2]
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        lines.append(f"{name.replace('_', '-')}=={version} \\\n    --hash=sha256:{digest}\n")
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RELAYBOT_", "PYTHON", "PIP_", "UV_", "NOTIFY_"))
        and k != "VIRTUAL_ENV"
    }
    env = {
        **keep,
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(base / "wheels"),
        "UV_NO_CONFIG": "1",
        "UV_OFFLINE": "1",
        "UV_NO_INDEX": "1",
        "UV_FIND_LINKS": str(base / "wheels"),
        "UV_CACHE_DIR": str(base / "uv-cache"),
        "UV_PYTHON_DOWNLOADS": "never",
        "RELAYBOT_HOME": str(base / "home"),
    }
    return House(base / "wheels", "".join(lines), env)


def _build(src: Path, out: Path) -> Path:
    build = [*PIP, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(out)]
    subprocess.run([*build, str(src)], check=True, timeout=300, capture_output=True)
    [wheel] = out.glob("relaybot-*.whl")
    return wheel


def patched(wheel: Path, out: Path, path: str, edit: Callable[[str], str]) -> Path:
    """`wheel` with the file at `path` changed by `edit` (given "" when the wheel has none: it
    is added), its RECORD row too."""
    out.mkdir(parents=True, exist_ok=True)
    target = out / wheel.name
    with zipfile.ZipFile(wheel) as old, zipfile.ZipFile(target, "w") as new:
        names = old.namelist()
        record = next(n for n in names if n.endswith(".dist-info/RECORD"))
        rows = [r for r in csv.reader(io.StringIO(old.read(record).decode())) if r and r[0] != path]
        was = old.read(path) if path in names else b""
        changed = edit(was.decode()).encode()
        assert changed != was
        rows.insert(0, [path, _record_hash(changed), str(len(changed))])
        for name in [*(n for n in names if n != path), path]:
            if name == record:
                text = io.StringIO()
                csv.writer(text, lineterminator="\n").writerows(rows)
                new.writestr(name, text.getvalue())
            else:
                new.writestr(name, changed if name == path else old.read(name))
    return target


def _once(old: str, new: str) -> Callable[[str], str]:
    def edit(text: str) -> str:
        assert old in text, old
        return text.replace(old, new, 1)

    return edit


_FAILING = '\nMIGRATIONS.append("ALTER TABLE no_such_table ADD COLUMN x TEXT")\n'
_ADDS = '\nMIGRATIONS.append("CREATE TABLE upgrade_probe (x INTEGER)")\n'  # readable_from kept
BROKEN: dict[str, tuple[tuple[tuple[str, Callable[[str], str]], ...], tuple[str, ...]]] = {
    # name: ((file, change), ...), what the one line says (one of)
    "migration-fails": (
        (
            ("engine/store/sqlite/_schema.py", lambda text: text + _FAILING),
            ("engine/store/postgres/_schema.py", lambda text: text + _FAILING),
        ),
        # SQLite: tried on a copy first; PostgreSQL: the start fails (one transaction: undone)
        ("its migrations failed on a copy of the store", "before it was ready"),
    ),
    "crashes-at-import": (
        (("bot/app.py", lambda text: 'raise RuntimeError("a broken build")\n' + text),),
        ("before it was ready",),
    ),
    "never-ready": (  # after it has migrated the store (by a migration that only adds)
        (
            ("bot/cli.py", _once("            notifier.ready(app.status())\n", "")),
            ("engine/store/sqlite/_schema.py", lambda text: text + _ADDS),
            ("engine/store/postgres/_schema.py", lambda text: text + _ADDS),
        ),
        ("was not ready within",),
    ),
    "check-config-refuses": (
        (
            (
                "bot/_checks.py",
                _once(
                    "    check_tools(config.tools)\n",
                    '    raise ConfigError("", "this build refuses every config")\n',
                ),
            ),
        ),
        ("its check-config refused",),
    ),
    "doctor-fails": (  # ready, then its doctor --quick fails (SQLite only: the same switch)
        (
            (
                "bot/doctor.py",
                _once(
                    "        *await check_sandbox(config),\n    ]\n",
                    "        *await check_sandbox(config),\n"
                    '        Check("plugins", Status.FAILED, "this build loads no plugin"),\n'
                    "    ]\n",
                ),
            ),
        ),
        ("its doctor --quick failed: plugins: FAILED - this build loads no plugin",),
    ),
}
SQLITE_ONLY = {"doctor-fails"}  # on PostgreSQL its rollback is never-ready's (no store to restore)


@dataclass(frozen=True)
class Releases:
    previous: Path
    head: Path
    broken: dict[str, Path]


def _source(src: Path, house: House) -> None:
    """The lock a release carries, made for the wheelhouse (its wheels are repacked here)."""
    (src / "bot" / "requirements.lock").write_text(house.lock)


@pytest.fixture(scope="module")
def releases(house: House, tmp_path_factory: pytest.TempPathFactory) -> Releases:
    import setuptools

    if int(setuptools.__version__.split(".")[0]) < 77:
        pytest.skip("the wheels are built with setuptools>=77 (the [dev] extra installs it)")
    commit = previous_release()
    if commit is None:
        pytest.skip("no commit with another version in pyproject.toml (a shallow clone?)")
    base = tmp_path_factory.mktemp("releases")
    old = base / "previous-src"
    old.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True, timeout=120
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True, timeout=120)
    new = base / "head-src"
    new.mkdir()
    junk = shutil.ignore_patterns("__pycache__", "*.egg-info", "requirements.lock")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, new / name, ignore=junk)
        else:
            shutil.copy2(ROOT / name, new / name)
    _source(old, house)
    _source(new, house)
    head = _build(new, base / "head")
    broken = {}
    for name, (changes, _) in BROKEN.items():
        wheel = head
        for n, (file, edit) in enumerate(changes):
            wheel = patched(wheel, base / f"{name}-{n}", file, edit)
        broken[name] = wheel
    previous = _build(old, base / "previous-build")
    if "bot/requirements.lock" not in zipfile.ZipFile(previous).namelist():  # older than locks
        previous = patched(
            previous, base / "previous", "bot/requirements.lock", lambda _: house.lock
        )
    return Releases(previous, head, broken)


# -- the rig -----------------------------------------------------------------------------------


@dataclass
class Rig:
    tmp: Path
    tg: FakeTelegram
    ledger: Ledger
    files: Files
    env: dict[str, str]
    said: list[str] = field(default_factory=list)
    pid_needed: bool = False  # PostgreSQL: no lock to find the daemon by

    @property
    def home(self) -> Path:
        return Path(self.env["RELAYBOT_HOME"])

    def say(self) -> None:
        tok = token(len(self.said) + 1)
        self.said.append(tok)
        self.tg.inject_message(7, 7, f"{tok} hello")

    async def keep_saying(self, was: str) -> None:
        """Once `current` names another generation than `was` (the switch itself has begun: the
        build and checks before it leave the daemon alone), a message every SAY_EVERY_S seconds,
        SAY_MOST at most: through the new one's start, the time without a daemon, a rollback.
        A pace, not a wait (the ledger waits for the answers). A message at each poll, as
        before, came as fast as the daemon answered: hundreds a switch, a CPU cost that proved
        nothing more."""
        said = 0
        while said < SAY_MOST:
            await asyncio.sleep(SAY_EVERY_S)
            if self.current() != was:
                self.say()
                said += 1

    async def relaybot(self, *args: str) -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(
            Path(sys.executable).parent / "relaybot",
            *args,
            "-c",
            str(self.files.config),
            cwd=self.tmp,
            env=self.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await asyncio.wait_for(proc.communicate(), 300)
        return proc.returncode or 0, out.decode()

    async def switch(self, *args: str, ready_s: float = 20) -> tuple[int, str]:
        """`relaybot upgrade` or `rollback` while messages keep coming; then each is answered."""
        pid = ("--pid", str(self.daemon())) if self.pid_needed else ()
        saying = asyncio.create_task(self.keep_saying(self.current()))
        try:
            code, said = await self.relaybot(*args, *pid, "--ready-timeout", f"{ready_s:g}")
        finally:
            saying.cancel()
        self.say()
        await self.ledger.expect(lambda: self.ledger.answered(self.said), WAIT_S, self.log)
        return code, said

    def log(self) -> str:
        log = self.home / "relaybot.log"
        return log.read_text(errors="replace")[-4000:] if log.exists() else "(no log)"

    def assert_each_answered_once(self) -> None:
        counts = {t: len(self.ledger.answers(t)) for t in self.said}
        wrong = {t: n for t, n in counts.items() if n != 1}
        assert not wrong, f"answers per message (want 1): {wrong}\n{self.ledger.transcript()}"

    def daemon(self) -> int:
        [pid] = daemons_of(self.files.config)
        return pid

    def running(self) -> str:
        """The generation folder of the daemon (its interpreter's)."""
        pid = self.daemon()
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        found = re.search(r"generations/([^/]+)/", argv[0].decode())
        assert found, argv
        return found[1]

    def current(self, link: str = "current") -> str:
        """The generation `current` (or `previous`) names."""
        return os.readlink(self.home / link).rsplit("/", 1)[-1]


@contextlib.asynccontextmanager
async def rig(tmp_path: Path, house: House, url: str | None) -> AsyncIterator[Rig]:
    async with FakeTelegram() as tg, FakeOpenAI(default=TokenModel()) as llm:
        ledger = Ledger()
        files = write_files(tmp_path, tg, llm.base_url, store_url=url)
        env = dict(house.env)
        r = Rig(tmp_path, tg, ledger, files, env, pid_needed=url is not None)
        tg.answer_listeners.append(ledger.see)
        try:
            yield r
        finally:
            for pid in daemons_of(files.config):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def schema(db: Path) -> tuple[int, list[str]]:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as c:
        version = c.execute("PRAGMA user_version").fetchone()[0]
        return version, sorted(r[0] for r in c.execute("SELECT sql FROM sqlite_master") if r[0])


def pg_schema(postgres: PostgresServer, url: str) -> tuple[int, list[str]]:
    database = url.split("/")[3].split("?")[0]
    version = int(postgres.psql("SELECT version FROM schema_version", database))
    columns = postgres.psql(
        "SELECT table_name || '.' || column_name || ' ' || data_type FROM "
        "information_schema.columns WHERE table_schema = 'public' ORDER BY 1",
        database,
    )
    return version, columns.splitlines()


@pytest.mark.timeout(900)  # six generations built, each daemon started
@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.needs("postgresql"))]
)
async def test_a_good_upgrade_switches_and_broken_ones_roll_back(
    tmp_path: Path, house: House, releases: Releases, backend: str, request: pytest.FixtureRequest
) -> None:
    url: str | None = None
    if backend == "postgresql":
        postgres: PostgresServer = request.getfixturevalue("postgres")
        url = postgres.new_database(migrated=False)
    async with rig(tmp_path, house, url) as r:

        def store() -> tuple[int, list[str]]:
            return schema(r.files.db) if url is None else pg_schema(postgres, url)

        code, said = await r.relaybot("upgrade", str(releases.previous))
        assert code == 0 and "is current; no daemon was running" in said, said
        first = r.current()
        assert first.endswith("-" + releases.previous.name.split("-")[1]), first
        log = (r.home / "relaybot.log").open("ab")
        daemon = await asyncio.create_subprocess_exec(
            r.home / "current" / "bin" / "relaybot",
            "run",
            "-c",
            str(r.files.config),
            cwd=tmp_path,
            env=r.env,
            stdout=log,
            stderr=log,
            stdin=asyncio.subprocess.DEVNULL,
        )
        r.say()
        await r.ledger.expect(lambda: r.ledger.answered(r.said), WAIT_S, r.log)
        assert r.running() == first
        previous_schema = store()

        code, said = await r.switch("upgrade", str(releases.head))
        assert code == 0, f"{said}\n{r.log()}"
        head = _version((ROOT / "pyproject.toml").read_text())
        found = re.search(
            rf"relaybot {re.escape(head)} \(generation (\d+)\) runs .* for ([\d.]+) s", said
        )
        assert found, said
        print(f"\n{backend}: the switch left no daemon for {found[2]} s")
        second = r.current()
        assert r.running() == second != first
        r.assert_each_answered_once()
        assert not r.ledger.of(Kind.APOLOGY)
        await asyncio.wait_for(daemon.wait(), 30)  # the first daemon, stopped by the switch
        gens = r.home / "generations"
        [pyc, again] = (  # HEAD's lock is the previous's here: its bytecode is linked, not made
            next((gens / g).glob("lib/python*/site-packages/httpx/__pycache__/_api.*.pyc"))
            for g in (first, second)
        )
        assert pyc.stat().st_ino == again.stat().st_ino
        before = store()
        kept = sorted(g.name for g in gens.iterdir())

        for name, (_, whys) in BROKEN.items():
            if url is not None and name in SQLITE_ONLY:
                continue
            ready_s = 12 if name == "never-ready" else 20  # it is waited for in full
            code, said = await r.switch("upgrade", str(releases.broken[name]), ready_s=ready_s)
            print(f"{name} ({len(r.said)} messages so far): {said.strip()}")
            assert code == 1, f"{name}: {said}\n{r.log()}"
            assert "runs again" in said or "still runs" in said, said
            assert any(why in said for why in whys), f"{name}: {said}"
            assert (r.current(), r.running()) == (second, second), name
            assert r.current("previous") == first, name  # `relaybot rollback` still goes there
            now = store()
            if url is not None and name == "never-ready":  # what it added stays: HEAD runs on it
                assert now[0] == before[0] + 1, now[0]
                assert set(before[1]) < set(now[1]) and "upgrade_probe.x integer" in now[1]
                before = now
            assert now == before, name
            r.assert_each_answered_once()
        assert sorted(g.name for g in gens.iterdir()) == kept  # none more

        done = await asyncio.to_thread(
            subprocess.run,
            [r.home / "current" / "bin" / "relaybot", "install-service", "--user"],
            env=r.env,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        unit = done.stdout
        stable = r.home / "current" / "bin" / "relaybot"
        assert f"ExecStart={stable} run -c " in unit  # whichever generation is current

        code, said = await r.switch("rollback")  # on purpose: back to the previous release
        if store()[0] == previous_schema[0]:  # HEAD added no migration to the previous's
            number = first.split("-")[0]
            assert code == 0 and f"(generation {number}) runs (rolled back" in said, said
            assert r.running() == r.current() == first
        else:  # it cannot run on the store HEAD upgraded: said, nothing changed
            assert code == 1 and "cannot run on the store" in said, said
            assert r.running() == r.current() == second
        r.assert_each_answered_once()


def test_the_lock_pins_every_dependency_with_hashes() -> None:
    """bot/requirements.lock (`make lock`): each requirement of pyproject.toml (and of the
    anthropic extra) pinned to one version it allows, every pin with at least one hash."""
    from packaging.requirements import Requirement

    text = (ROOT / "bot" / "requirements.lock").read_text()
    pins: dict[str, tuple[str, int]] = {}
    for entry in re.split(r"\n(?=[A-Za-z0-9])", text):
        first = entry.split(" ", 1)[0].strip()
        if "==" not in first:
            continue
        name, version = first.split("==")
        pins[re.sub(r"[-_.]+", "-", name).lower()] = (
            version.split(";")[0],
            entry.count("--hash=sha256:"),
        )
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["anthropic"]]
    for line in wanted:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"sys_platform": "linux"}):
            continue
        key = re.sub(r"[-_.]+", "-", req.name).lower()
        assert key in pins, f"{req.name} is not in the lock: make lock"
        assert req.specifier.contains(pins[key][0]), f"{req} but the lock pins {pins[key][0]}"
    unhashed = [name for name, (_, hashes) in pins.items() if hashes == 0]
    assert len(pins) > len(wanted) and not unhashed, unhashed


def test_a_renamed_key_is_read_under_its_old_name_with_one_warning() -> None:
    from bot._renamed_keys import carry_over
    from bot.config import parse_config

    table = {"telegram.poll_timeout": "telegram.poll_timeout_s", "engine.old_knob": None}
    data = {
        "llm": {"model": "m"},
        "telegram": {"poll_timeout": 7},
        "engine": {"old_knob": 1},
    }
    moved, warnings = carry_over(data, table)
    assert data["telegram"] == {"poll_timeout": 7}  # the file's data is left alone
    assert parse_config(moved).telegram.poll_timeout_s == 7
    assert warnings == [
        "telegram.poll_timeout was renamed telegram.poll_timeout_s: read as "
        "telegram.poll_timeout_s (rename it in the config)",
        "engine.old_knob is no longer used and was ignored: remove it from the config",
    ]
    both = {"telegram": {"poll_timeout": 7, "poll_timeout_s": 3}}
    moved, warnings = carry_over(both, table)
    assert moved["telegram"] == {"poll_timeout_s": 3} and "which is set too" in warnings[0]
    assert carry_over({"llm": {}}, table) == ({"llm": {}}, [])


def daemons_of(config: Path) -> list[int]:
    """The pids of `relaybot run -c config` processes."""
    found = []
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            argv = proc.joinpath("cmdline").read_bytes().split(b"\0")
            if b"run" in argv and str(config).encode() in argv and proc.name.isdigit():
                found.append(int(proc.name))
    return found


@pytest.mark.needs("postgresql")
@pytest.mark.timeout(900)
async def test_a_rolling_upgrade_on_postgresql_keeps_two_instances_answering(
    tmp_path: Path, house: House, releases: Releases, postgres: PostgresServer
) -> None:
    """Two instances of the previous release on one database; each upgraded to HEAD in turn
    (`--pid`: PostgreSQL has no lock to find it by) while messages keep coming: the other one
    serves meanwhile, the previous release on the schema HEAD upgraded, and every message is
    answered once."""
    url = postgres.new_database(migrated=False)
    async with FakeTelegram() as tg, FakeOpenAI(default=TokenModel()) as llm:
        ledger = Ledger()
        files = {
            n: write_files(tmp_path, tg, llm.base_url, store_url=url, instance=n) for n in "ab"
        }
        envs = {n: dict(house.env) for n in "ab"}  # one home, as on one machine
        r = Rig(tmp_path, tg, ledger, files["a"], envs["a"])
        tg.answer_listeners.append(ledger.see)
        started = []
        try:
            for n in "ab":
                r.files, r.env = files[n], envs[n]
                code, said = await r.relaybot("upgrade", str(releases.previous))
                assert code == 0, said
                log = (r.home / "relaybot.log").open("ab")
                proc = await asyncio.create_subprocess_exec(
                    r.home / "current" / "bin" / "relaybot",
                    "run",
                    "-c",
                    str(r.files.config),
                    cwd=tmp_path,
                    env=r.env,
                    stdout=log,
                    stderr=log,
                    stdin=asyncio.subprocess.DEVNULL,
                )
                started.append(proc)
            r.say()
            await ledger.expect(lambda: ledger.answered(r.said), WAIT_S, r.log)
            head = _version((ROOT / "pyproject.toml").read_text())
            for n in "ab":
                r.files, r.env = files[n], envs[n]
                [pid] = daemons_of(r.files.config)
                code, said = await r.switch("upgrade", str(releases.head), "--pid", str(pid))
                found = re.search(rf"relaybot {re.escape(head)} \(generation (\d+)\) runs", said)
                assert code == 0 and found, said
                print(f"\nPostgreSQL, instance {n}: {said.strip()}")
                r.assert_each_answered_once()
                [new] = daemons_of(r.files.config)
                argv = (Path("/proc") / str(new) / "cmdline").read_bytes()
                assert new != pid and f"generations/{found[1]}-{head}/".encode() in argv
            for proc in started:  # the first two, stopped by the switches
                assert await asyncio.wait_for(proc.wait(), 30) == 0
        finally:
            for config in (f.config for f in files.values()):
                for pid in daemons_of(config):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
