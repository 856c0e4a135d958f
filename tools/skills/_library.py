"""Skills: folders with a SKILL.md (front matter `name` and `description`, then instructions)
and any files beside it, found in the `[skills] dirs`.

The library is read once at start-up: what each request lists is the skills' names and
descriptions (bounded: `MAX_LISTED` skills, each description clipped), so the model knows what it
can open without the instructions costing anything until it does. ``use_skill`` (tools/skills/
_tool.py) reads a skill's instructions and files when asked, from disk, in a thread.

A skill's file is read only inside its folder: the path is resolved (symlinks followed) and must
stay under the folder's own resolved path; a file is read up to `max_file_bytes`.
A skill limited by `[skills] only_in` is listed and opened only in those chats.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tools.skills._front_matter import FrontMatterError, split_front_matter

log = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAX_LISTED = 50  # skills named in one request
DESCRIPTION_CHARS = 300  # of each description, in a request
MAX_FILES = 200  # files listed for one skill
LISTING_HEAD = (
    "Skills: instructions for particular jobs, written for you. When a request matches one, "
    "call use_skill with its name first and follow what it says."
)


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str
    folder: Path  # resolved
    chats: frozenset[str] = frozenset()  # "<channel>:<chat id>" it is limited to; empty: all

    def offered_in(self, channel: str, chat_id: str) -> bool:
        return not self.chats or f"{channel}:{chat_id}" in self.chats


@dataclass(frozen=True, slots=True)
class SkillProblem:
    where: Path
    problem: str

    def __str__(self) -> str:
        return f"{self.where}: {self.problem}"


@dataclass(slots=True)
class Skills:
    """The skills found, and what was wrong with the rest."""

    skills: dict[str, Skill] = field(default_factory=dict)
    problems: list[SkillProblem] = field(default_factory=list)
    max_file_bytes: int = 256 * 1024

    def __bool__(self) -> bool:
        return bool(self.skills)

    def offered(self, channel: str, chat_id: str) -> list[Skill]:
        return [s for s in self.skills.values() if s.offered_in(channel, chat_id)]

    def get(self, name: str, channel: str, chat_id: str) -> Skill | None:
        skill = self.skills.get(name)
        return skill if skill is not None and skill.offered_in(channel, chat_id) else None

    async def prompt(self, channel: str, chat_id: str, user_id: str, is_private: bool) -> str:
        """The request's list of skills (engine.chat.PromptPart); "" when none is offered."""
        offered = self.offered(channel, chat_id)
        if not offered:
            return ""
        lines = [f"- {s.name}: {_clip(s.description, DESCRIPTION_CHARS)}" for s in offered]
        if len(lines) > MAX_LISTED:
            left = len(lines) - MAX_LISTED
            lines = [*lines[:MAX_LISTED], f"({left} more: use_skill with a wrong name lists all)"]
        return "\n".join([LISTING_HEAD, *lines])


def load_skills(
    dirs: Sequence[Path],
    *,
    only_in: Mapping[str, Sequence[str]] | None = None,
    required: Iterable[Path] = (),
    max_file_bytes: int = 256 * 1024,
) -> Skills:
    """Every skill under `dirs` (each a folder of skill folders; the first of a name wins).
    A folder of `required` that does not exist is a problem; others are skipped quietly.
    Blocking: run it in a thread from async code."""
    found = Skills(max_file_bytes=max_file_bytes)
    wanted = {Path(p).expanduser() for p in required}
    limits = {name: frozenset(chats) for name, chats in (only_in or {}).items()}
    for base in dirs:
        base = Path(base).expanduser()
        if not base.is_dir():
            if base in wanted:
                found.problems.append(SkillProblem(base, "not a directory"))
            continue
        for folder in sorted(p for p in base.iterdir() if p.is_dir()):
            if not folder.name.startswith(".") and (folder / SKILL_FILE).is_file():
                _add(found, folder, limits)
    for name in limits.keys() - found.skills.keys():
        found.problems.append(SkillProblem(Path("[skills] only_in"), f"no skill named {name!r}"))
    return found


def _add(found: Skills, folder: Path, limits: Mapping[str, frozenset[str]]) -> None:
    where = folder / SKILL_FILE
    try:
        text = _read_text(where, found.max_file_bytes)
        meta, _ = split_front_matter(text)
    except (OSError, UnicodeDecodeError, FrontMatterError) as exc:
        found.problems.append(SkillProblem(where, f"skipped: {_reason(exc)}"))
        return
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not name:
        found.problems.append(SkillProblem(where, "skipped: the front matter has no name"))
        return
    if not NAME.match(name):
        why = "letters, digits, '-', '_' and '.', at most 64"
        found.problems.append(SkillProblem(where, f"skipped: name {name!r} is not {why}"))
        return
    if not isinstance(description, str) or not description.strip():
        found.problems.append(SkillProblem(where, "skipped: the front matter has no description"))
        return
    if name in found.skills:
        first = found.skills[name].folder
        found.problems.append(
            SkillProblem(where, f"skipped: the name {name!r} is already used by {first}")
        )
        return
    found.skills[name] = Skill(
        name, " ".join(description.split()), folder.resolve(), limits.get(name, frozenset())
    )


def _read_text(path: Path, limit: int) -> str:
    with path.open("rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise OSError(f"larger than {limit // 1024} kB")
    return data.decode("utf-8")


def _reason(exc: Exception) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


# -- reading a skill (in a thread) -------------------------------------------------------------


class Refused(Exception):
    """A file of a skill that may not be read, and why."""


def instructions(skill: Skill, limit: int) -> tuple[str, list[str]]:
    """The skill's instructions (its SKILL.md after the front matter) and its files."""
    text = _read_text(skill.folder / SKILL_FILE, limit)
    _, body = split_front_matter(text)
    return body, files_of(skill)


def files_of(skill: Skill) -> list[str]:
    """The skill's files, relative to its folder (hidden ones and SKILL.md left out; those
    resolving outside the folder too), at most MAX_FILES."""
    out: list[str] = []
    for root, dirs, names in os.walk(skill.folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            path = Path(root, name)
            rel = path.relative_to(skill.folder).as_posix()
            if name.startswith(".") or rel == SKILL_FILE or not _inside(path, skill.folder):
                continue
            out.append(rel)
            if len(out) >= MAX_FILES:
                return out
    return out


def read_file(skill: Skill, relative: str, limit: int) -> tuple[str, int]:
    """One of the skill's files, up to `limit` bytes, and its whole size. Raises Refused."""
    if not relative or Path(relative).is_absolute():
        raise Refused(f"give a path inside the skill, relative to its folder: {relative!r}")
    path = skill.folder / relative
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise Refused(f"the skill {skill.name} has no file {relative!r}") from None
    if not resolved.is_relative_to(skill.folder):
        raise Refused(f"{relative!r} is outside the skill's folder; only its own files are read")
    if not resolved.is_file():
        raise Refused(f"{relative!r} is not a file of the skill")
    size = resolved.stat().st_size
    with resolved.open("rb") as f:
        data = f.read(limit)
    if b"\x00" in data:
        raise Refused(f"{relative!r} is a binary file; only text files are read")
    return data.decode("utf-8", errors="replace"), size


def _inside(path: Path, folder: Path) -> bool:
    try:
        return path.resolve(strict=True).is_relative_to(folder)
    except (OSError, RuntimeError):
        return False
