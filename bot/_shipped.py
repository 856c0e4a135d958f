"""Files relaybot ships beside its packages: the units and env example of deploy/, and
config.example.toml (every key, with its default). A source checkout has them at its root; a
wheel carries them to ``<environment>/share/relaybot/`` (pyproject.toml's data-files), which is
where a pipx or `uv tool` install puts them.

    shipped("deploy", "relaybot.service")   # the file, wherever this relaybot came from
"""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

EXAMPLE = "config.example.toml"
SHOW_EXAMPLE = "relaybot init --example"  # the command that prints it, named wherever it is


def shipped(*parts: str) -> Path:
    """The checkout's file at `parts` (relative to its root), else the one the wheel carries."""
    checkout = Path(__file__).resolve().parent.parent.joinpath(*parts)
    if checkout.is_file():
        return checkout
    try:
        files = distribution("relaybot").files or []
    except PackageNotFoundError:
        files = []
    for file in files:
        if file.parts[-len(parts) :] == parts and "share" in file.parts:
            found = Path(str(file.locate()))
            if found.is_file():
                return found
    share = Path(sys.prefix, "share", "relaybot", *parts)
    if share.is_file():
        return share
    raise FileNotFoundError(f"{parts[-1]} is not installed with relaybot (looked in {checkout})")


def example_text() -> str:
    """config.example.toml, for `relaybot init --example`."""
    return shipped(EXAMPLE).read_text(encoding="utf-8")
