"""Install generations: each release of relaybot `relaybot upgrade` installs lives in a
generation of its own, a virtual environment with the release and exactly the dependencies its
lock file pins (names, versions and hashes: bot/requirements.lock, written by `make lock`).

    <home>/generations/1-0.1.0/     a venv: bin/relaybot, bin/python, ...
    <home>/generations/2-0.2.0/
    <home>/current  -> generations/2-0.2.0    what runs; the units name <home>/current/bin/relaybot
    <home>/previous -> generations/1-0.1.0    kept: `relaybot rollback` goes back to it

<home> is $RELAYBOT_HOME, else /opt/relaybot for root, else $XDG_DATA_HOME/relaybot
(~/.local/share/relaybot). A generation is never changed once built; `current` and `previous`
change by renaming a new symlink over the old one, so they always name a whole generation.
A release without a lock file (older than this one) is installed with this relaybot's lock.

Every module is compiled to bytecode at build (a system unit cannot write it under /opt later,
and what a switch imports uncompiled is time without a daemon). Compiling the dependencies
takes seconds of CPU; a generation whose lock is the one `current` was built with (a patch
release, a rebuild) takes their bytecode from it instead: each of its .pyc files hard-linked
where the new generation has the same package folder. The installer links both generations'
sources from one cache (same mtime and size), so the .pyc is valid, and Python checks it
anyway: a stale one is only compiled again, by replacing the link, never by writing into it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tools.errors import RelaybotError

LOCK = "requirements.lock"
_NAME = re.compile(r"^(\d+)-(.+)$")


class BuildError(RelaybotError):
    """A generation could not be built: the source, the lock or the installer failed."""


def home() -> Path:
    if os.environ.get("RELAYBOT_HOME"):
        return Path(os.environ["RELAYBOT_HOME"]).expanduser()
    if os.geteuid() == 0:
        return Path("/opt/relaybot")
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "relaybot"


@dataclass(frozen=True, slots=True)
class Generation:
    path: Path
    number: int
    version: str

    @property
    def relaybot(self) -> Path:
        return self.path / "bin" / "relaybot"

    def __str__(self) -> str:
        return f"relaybot {self.version} (generation {self.number})"


def _parse(path: Path) -> Generation | None:
    match = _NAME.match(path.name)
    return Generation(path, int(match[1]), match[2]) if match else None


def generations(root: Path) -> list[Generation]:
    folder = root / "generations"
    found = [_parse(p) for p in folder.iterdir()] if folder.is_dir() else []
    return sorted((g for g in found if g is not None), key=lambda g: g.number)


def pointed(root: Path, name: str) -> Generation | None:
    """The generation `current` or `previous` names, or None."""
    link = root / name
    if not link.is_symlink():
        return None
    return _parse(Path(os.path.normpath(root / os.readlink(link))))


def point(root: Path, name: str, generation: Generation | None) -> None:
    """Make `name` (current, previous) name `generation` in one step (rename over the link)."""
    link = root / name
    if generation is None:
        link.unlink(missing_ok=True)
        return
    temporary = root / f".{name}.{os.getpid()}"
    temporary.unlink(missing_ok=True)
    temporary.symlink_to(generation.path.relative_to(root))
    os.replace(temporary, link)


def stable_relaybot(root: Path) -> Path:
    """What the units run: `current`'s relaybot, whichever generation that is."""
    return root / "current" / "bin" / "relaybot"


def running_from(root: Path) -> bool:
    """Whether this relaybot is one of `root`'s generations."""
    try:
        return Path(sys.prefix).resolve().is_relative_to((root / "generations").resolve())
    except OSError:
        return False


# -- building -------------------------------------------------------------------------------


def _version(source: Path) -> str:
    if source.is_file() and source.suffix == ".whl":
        return source.name.split("-")[1]
    try:
        data = tomllib.loads((source / "pyproject.toml").read_text(encoding="utf-8"))
        return str(data["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError) as exc:
        raise BuildError(f"{source} is neither a relaybot wheel nor a checkout ({exc})") from None


def _lock_text(source: Path) -> str:
    """The lock file the release carries, else this relaybot's."""
    if source.suffix == ".whl":
        with zipfile.ZipFile(source) as wheel:
            if f"bot/{LOCK}" in wheel.namelist():
                return wheel.read(f"bot/{LOCK}").decode()
    elif (source / "bot" / LOCK).is_file():
        return (source / "bot" / LOCK).read_text(encoding="utf-8")
    return (Path(__file__).parent / LOCK).read_text(encoding="utf-8")


def _run(command: list[str | Path], what: str, timeout: float = 900) -> None:
    done = subprocess.run(
        [str(c) for c in command], capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise BuildError(f"{what} failed: " + " | ".join(tail))


def _uv() -> str | None:
    """uv (fast, and what `make lock` used), when there is one; else the new venv's pip."""
    beside = Path(sys.executable).parent / "uv"
    return str(beside) if beside.is_file() else shutil.which("uv")


def _installer(uv: str | None, python: Path, *, compile: bool = True) -> list[str | Path]:
    """The install command; `compile`: what it installs is compiled to bytecode now."""
    if uv:
        command: list[str | Path] = [uv, "pip", "install", "-q", "--python", python]
        return [*command, "--compile-bytecode"] if compile else command
    command = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    return command if compile else [*command, "--no-compile"]


def _same_lock(generation: Generation | None, lock: str) -> bool:
    """Whether `generation` was built with the lock `lock` (a copy is kept in each)."""
    if generation is None:
        return False
    try:
        return (generation.path / LOCK).read_text(encoding="utf-8") == lock
    except OSError:
        return False


def _link_bytecode(source: Path, target: Path) -> None:
    """Hard-link each .pyc of `source`'s packages into `target`'s same package folder, where
    `target` has that folder and not yet that file."""
    for cache in source.glob("lib/python*/site-packages/**/__pycache__"):
        into = target / cache.relative_to(source)
        if not into.parent.is_dir():
            continue
        into.mkdir(exist_ok=True)
        for pyc in cache.glob("*.pyc"):
            if not (into / pyc.name).exists():
                with contextlib.suppress(OSError):  # another file system, say: compiled below
                    os.link(pyc, into / pyc.name)


def _fetch(source: str, scratch: Path) -> Path:
    """A local wheel or checkout for `source`; a git URL is cloned into `scratch`."""
    if source.startswith("git+") or source.endswith(".git") or "://" in source:
        url, ref = source.removeprefix("git+"), ""
        if "@" in url.rsplit("/", 1)[-1]:  # git+file:///srv/relaybot.git@v0.2.0
            url, ref = url.rsplit("@", 1)
        clone = scratch / "checkout"
        _run(["git", "clone", "-q", url, clone], f"git clone {url}")
        if ref:
            _run(["git", "-C", clone, "checkout", "-q", ref], f"git checkout {ref}")
        return clone
    path = Path(source).expanduser().absolute()
    if not path.exists():
        raise BuildError(f"{source}: no such wheel or checkout")
    return path


def build(root: Path, source: str) -> Generation:
    """A new generation from `source` (a wheel, a checkout or a git URL): its venv, the lock's
    dependencies (hashes required), then the release itself without dependencies."""
    (root / "generations").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="relaybot-build-") as scratch:
        local = _fetch(source, Path(scratch))
        version = _version(local)
        number = max((g.number for g in generations(root)), default=0) + 1
        generation = Generation(root / "generations" / f"{number}-{version}", number, version)
        lock = Path(scratch) / LOCK
        text = _lock_text(local)
        lock.write_text(text, encoding="utf-8")
        current = pointed(root, "current")
        reuse = _same_lock(current, text)
        try:
            uv = _uv()
            bare = ["--without-pip"] if uv else []
            _run([sys.executable, "-m", "venv", *bare, generation.path], "creating the venv")
            python = generation.path / "bin" / "python"
            deps = _installer(uv, python, compile=not reuse)
            _run([*deps, "--require-hashes", "-r", lock], "installing the locked dependencies")
            if reuse and current is not None:
                _link_bytecode(current.path, generation.path)
            _run([*_installer(uv, python), "--no-deps", local], f"installing {source}")
            (generation.path / LOCK).write_text(text, encoding="utf-8")
        except BaseException:
            shutil.rmtree(generation.path, ignore_errors=True)
            raise
    return generation


def discard(generation: Generation) -> None:
    """Remove a generation that failed (never one `current` or `previous` names)."""
    shutil.rmtree(generation.path, ignore_errors=True)
