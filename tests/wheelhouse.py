"""relaybot's dependencies as wheels, made from the test venv's own site-packages, so that pipx
and uv can install relaybot for real (resolving every dependency, building from source or git)
with no index: `--no-index --find-links WHEELHOUSE`.

A wheel installed by pip keeps its `WHEEL` file (with its tags) and a `RECORD` of every file it
put down; zipping those files back under the same name is the wheel again, less the scripts it
put in bin/ (none of relaybot's dependencies is run by its script here). setuptools and wheel
come along as the build backend a source or git install asks for. Nothing is downloaded: the
registries are reached once, when the test venv is made (`make test`, `.ci/run`).
"""

from __future__ import annotations

import csv
import re
import zipfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

BUILD = ("setuptools",)  # pyproject.toml's [build-system] requires


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(name: str) -> dict[str, metadata.Distribution]:
    """`name`'s installed distribution and every one it needs (extras followed), by key."""
    found: dict[str, metadata.Distribution] = {}
    todo: list[tuple[str, frozenset[str]]] = [(name, frozenset())]
    while todo:
        wanted, extras = todo.pop()
        if _key(wanted) in found:
            continue
        dist = found[_key(wanted)] = metadata.distribution(wanted)
        for line in dist.requires or []:
            req = Requirement(line)
            envs = [{"extra": e} for e in extras] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(env) for env in envs):
                todo.append((req.name, frozenset(req.extras)))
    return found


def _wheel_name(dist: metadata.Distribution) -> str:
    tags = [
        line.split(":", 1)[1].strip()
        for line in (dist.read_text("WHEEL") or "").splitlines()
        if line.startswith("Tag:")
    ]
    pythons, abis, platforms = (sorted({t.split("-")[i] for t in tags}) for i in range(3))
    tag = "-".join(".".join(part) for part in (pythons, abis, platforms))
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    return f"{name}-{dist.version}-{tag}.whl"


def repack(dist: metadata.Distribution, into: Path) -> Path:
    """The installed `dist` zipped back into the wheel it came from (its files under
    site-packages; a fresh RECORD)."""
    target = into / _wheel_name(dist)
    rows = list(csv.reader((dist.read_text("RECORD") or "").splitlines()))
    info = next(p for p in (dist.files or []) if p.parent.name.endswith(".dist-info"))
    base = Path(str(dist.locate_file(info))).parent.parent
    record = f"{info.parent}/RECORD"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as whl:
        kept = []
        for row in rows:
            path = row[0]
            if path.startswith(("..", "/")) or "__pycache__" in path or path == record:
                continue
            file = base / path
            if file.is_file():
                whl.write(file, path)
                kept.append(row if len(row) == 3 else [path, "", ""])
        kept.append([record, "", ""])
        whl.writestr(record, "".join(",".join(r) + "\n" for r in kept))
    return target


def wheelhouse(into: Path, *, leave_out: str = "relaybot") -> list[Path]:
    """A folder of wheels for everything relaybot needs to install and build, except
    `leave_out` itself (installed here editable, and what the test installs)."""
    into.mkdir(parents=True, exist_ok=True)
    dists = requirements("relaybot")
    for name in BUILD:
        dists.update(requirements(name))
    return [repack(d, into) for key, d in sorted(dists.items()) if key != leave_out]
