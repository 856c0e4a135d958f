"""What a skill needs of the machine, read from its front matter, and whether this one has it.

Three formats say it three ways, and each is honoured:

- the agentskills.io spec's ``compatibility``: free text ("Requires macOS", "Needs git and
  docker"); the operating systems it names are read from it, unless a negation comes just
  before one ("not on Windows"); no other claim in it can be checked;
- OpenClaw's ``metadata.openclaw`` (older skills: ``metadata.clawdbot``): ``os`` (darwin, linux,
  win32) and ``requires.bins`` (every one needed) / ``requires.anyBins`` (one of them);
- hermes' ``platforms``: a list of macos, linux, windows.

A skill whose operating system is not this one, or whose programs are not on PATH, is not offered
to the model (it would tell the user to run what cannot run); ``relaybot skills`` says why.
A name that breaks the format's rules (lowercase letters, digits and hyphens, at most 64, equal to
the folder's name) only gets a warning: skills written before the rule still work.
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Mapping
from typing import Any

SPEC_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_OS_WORDS = {
    "darwin": "darwin",
    "macos": "darwin",
    "mac": "darwin",
    "osx": "darwin",
    "linux": "linux",
    "windows": "win32",
    "win32": "win32",
}
_SHOWN = {"darwin": "macOS", "linux": "Linux", "win32": "Windows"}
_NEGATED = re.compile(r"\b(not|no|nor|except|without|but|unlike)\b[\w ]*$", re.I)
_OS_IN_TEXT = re.compile(r"\b(macos|mac os|os x|osx|darwin|linux|windows|win32)\b", re.I)


def this_os() -> str:
    """darwin, linux or win32 (others as Python names them)."""
    return "linux" if sys.platform.startswith("linux") else sys.platform


def unmet(meta: Mapping[str, Any], os_name: str | None = None) -> list[str]:
    """Why the skill cannot run here (empty: it can), one reason a line."""
    here = os_name or this_os()
    reasons = []
    systems = _systems(meta)
    if systems and here not in systems:
        wanted = " or ".join(_SHOWN.get(s, s) for s in sorted(systems))
        reasons.append(f"needs {wanted} (this is {_SHOWN.get(here, here)})")
    needs = _openclaw(meta).get("requires")
    needs = needs if isinstance(needs, Mapping) else {}
    missing = [b for b in _strings(needs.get("bins")) if shutil.which(b) is None]
    if missing:
        reasons.append(f"needs {', '.join(missing)} on PATH (not found)")
    any_of = _strings(needs.get("anyBins"))
    if any_of and all(shutil.which(b) is None for b in any_of):
        reasons.append(f"needs one of {', '.join(any_of)} on PATH (none found)")
    return reasons


def name_warnings(name: str, folder_name: str) -> list[str]:
    """How `name` breaks the format's naming rules (empty: it does not)."""
    found = []
    if len(name) > 64 or not SPEC_NAME.match(name):
        found.append(
            f"the name {name!r} is not lowercase letters, digits and single hyphens "
            "(at most 64 characters) as the format asks"
        )
    if name != folder_name:
        found.append(f"the name {name!r} differs from its folder's name {folder_name!r}")
    return found


def _systems(meta: Mapping[str, Any]) -> set[str]:
    """The operating systems the skill says it runs on (empty: any)."""
    claw = _openclaw(meta)
    requires = claw.get("requires")
    listed = [
        *_strings(claw.get("os")),
        *_strings(requires.get("os") if isinstance(requires, Mapping) else None),
        *_strings(meta.get("platforms")),
    ]
    found = {_OS_WORDS.get(s.strip().lower(), s.strip().lower()) for s in listed}
    compatibility = meta.get("compatibility")
    if isinstance(compatibility, str):
        for match in _OS_IN_TEXT.finditer(compatibility):
            if _NEGATED.search(compatibility[max(0, match.start() - 16) : match.start()]):
                continue  # "not on Windows", "anything but Linux": no claim it runs there
            key = match[1].lower().replace(" ", "")
            found.add(_OS_WORDS.get(key, "darwin"))  # "mac os" and "os x" read as macOS
    return found


def _openclaw(meta: Mapping[str, Any]) -> Mapping[str, Any]:
    block = meta.get("metadata")
    if not isinstance(block, Mapping):
        return {}
    for key in ("openclaw", "clawdbot"):
        if isinstance(found := block.get(key), Mapping):
            return found
    return {}


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(v) for v in value if isinstance(v, str | int | float)]
    return []
