"""Files a tool sends, saved where the terminal channel (channels/console.py) says: a user at a
terminal has no chat to receive them in, so they get a path instead. Never overwrites: a name
already taken gets a number."""

from __future__ import annotations

import itertools
from pathlib import Path

from engine import OutgoingFile


def save_file(files_dir: Path, file: OutgoingFile) -> Path:
    """Write `file` into `files_dir` under its own name (a number added if it is taken)."""
    files_dir.mkdir(parents=True, exist_ok=True)
    name = Path(file.name).name or "file"
    stem, suffix = Path(name).stem, Path(name).suffix
    for n in itertools.count(1):
        path = files_dir / (name if n == 1 else f"{stem}-{n}{suffix}")
        try:
            with path.open("xb") as out:  # never overwrites
                out.write(file.data)
            return path
        except FileExistsError:
            continue
    raise AssertionError("unreachable")
