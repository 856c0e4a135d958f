"""Skills: folders with a SKILL.md (front matter `name` and `description`, then instructions)
and any files beside it, found in the `[skills] dirs`.

Each folder is searched up to `MAX_DEPTH` levels down, so the layouts skills ship in all load: a
folder of skill folders, hermes' category folders (`<category>/<name>/SKILL.md`), a repository
cloned whole (`skills/<name>/SKILL.md`), or one skill's own folder. A folder with a SKILL.md is a
skill; nothing below it is searched (its files are its own).

The library is read once at start-up (and at each reload). A skill whose requirements this
machine does not meet (tools/skills/_requirements.py) is kept, with the reasons, but not offered.
What each request lists is in tools/skills/_listing.py; ``use_skill`` reads a skill's
instructions and files when asked (tools/skills/_reading.py).
A skill limited by `[skills] only_in` is listed and opened only in those chats.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tools.skills._front_matter import FrontMatterError, split_front_matter
from tools.skills._listing import listing
from tools.skills._requirements import name_warnings, unmet

log = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
MAX_DEPTH = 4  # folders below each of `[skills] dirs` searched for a SKILL.md
MAX_SKILL_BYTES = 1024 * 1024  # a SKILL.md larger than this is not a skill
MAX_NAME = 128
_NOT_SEARCHED = {"node_modules", "__pycache__"}
LAYOUT = "<dir>/<name>/SKILL.md, or <dir>/<category>/<name>/SKILL.md"


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str
    folder: Path  # resolved
    chats: frozenset[str] = frozenset()  # "<channel>:<chat id>" it is limited to; empty: all
    unmet: tuple[str, ...] = ()  # why it cannot run here; not offered when there is any
    trusted: bool = True  # False: from a folder the owner did not mark trusted (its words taint)

    def offered_in(self, channel: str, chat_id: str) -> bool:
        return not self.unmet and (not self.chats or f"{channel}:{chat_id}" in self.chats)


@dataclass(frozen=True, slots=True)
class SkillProblem:
    where: Path
    problem: str
    warning: bool = False  # the skill loads all the same

    def __str__(self) -> str:
        return f"{self.where}: {self.problem}"


@dataclass(slots=True)
class Skills:
    """The skills found, and what was wrong with the rest."""

    skills: dict[str, Skill] = field(default_factory=dict)
    problems: list[SkillProblem] = field(default_factory=list)
    max_file_bytes: int = 256 * 1024
    listing_tokens: int = 2000  # the request's list of skills, at most (about 4 characters each)

    def __bool__(self) -> bool:
        return any(not s.unmet for s in self.skills.values())

    def offered(self, channel: str, chat_id: str) -> list[Skill]:
        return [s for s in self.skills.values() if s.offered_in(channel, chat_id)]

    def get(self, name: str, channel: str, chat_id: str) -> Skill | None:
        skill = self.skills.get(name)
        return skill if skill is not None and skill.offered_in(channel, chat_id) else None

    async def prompt(self, channel: str, chat_id: str, user_id: str, is_private: bool) -> str:
        """The request's list of skills (engine.chat.PromptPart); "" when none is offered."""
        return listing(self.offered(channel, chat_id), self.listing_tokens)


def load_skills(
    dirs: Sequence[Path],
    *,
    only_in: Mapping[str, Sequence[str]] | None = None,
    required: Iterable[Path] = (),
    max_file_bytes: int = 256 * 1024,
    listing_tokens: int = 2000,
    trusted: Iterable[Path] | None = None,
) -> Skills:
    """Every skill under `dirs` (the first of a name wins). A folder of `required` that does
    not exist, or holds no skill, is a problem; others are skipped quietly.
    `trusted`: the folders whose skills are trusted (None: every one).
    Blocking: run it in a thread from async code."""
    kept = None if trusted is None else {Path(p).expanduser().absolute() for p in trusted}
    found = Skills(max_file_bytes=max_file_bytes, listing_tokens=listing_tokens)
    wanted = {Path(p).expanduser() for p in required}
    limits = {name: frozenset(chats) for name, chats in (only_in or {}).items()}
    for base in dirs:
        base = Path(base).expanduser()
        if not base.is_dir():
            if base in wanted:
                found.problems.append(SkillProblem(base, "not a directory"))
            continue
        folders = skill_folders(base)
        for folder in folders:
            _add(found, folder, limits, kept is None or base.absolute() in kept)
        if not folders and base in wanted:
            where = f"no {SKILL_FILE} found up to {MAX_DEPTH} folders down; expected {LAYOUT}"
            found.problems.append(SkillProblem(base, where))
    for name in limits.keys() - found.skills.keys():
        found.problems.append(SkillProblem(Path("[skills] only_in"), f"no skill named {name!r}"))
    return found


def skill_folders(base: Path) -> list[Path]:
    """The folders under `base` (itself included) holding a SKILL.md, at most MAX_DEPTH down,
    in name order; hidden folders and links leading out of `base` are not searched."""
    out: list[Path] = []
    top = base.resolve()
    for root, dirs, names in os.walk(base, followlinks=True):
        here = Path(root)
        depth = len(here.relative_to(base).parts)
        if SKILL_FILE in names or depth >= MAX_DEPTH:
            dirs[:] = []
            if SKILL_FILE in names:
                out.append(here)
            continue
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".")
            and d not in _NOT_SEARCHED
            and (here / d).resolve().is_relative_to(top)
        )
    return sorted(out, key=lambda p: p.relative_to(base).parts)


def _add(found: Skills, folder: Path, limits: Mapping[str, frozenset[str]], trusted: bool) -> None:
    where = folder / SKILL_FILE
    try:
        meta, _ = split_front_matter(read_text(where, MAX_SKILL_BYTES))
    except (OSError, UnicodeDecodeError, FrontMatterError) as exc:
        found.problems.append(SkillProblem(where, f"skipped: {_reason(exc)}"))
        return
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not name.strip():
        found.problems.append(SkillProblem(where, "skipped: the front matter has no name"))
        return
    if len(name) > MAX_NAME or any(c.isspace() or c in "/\\" for c in name):
        why = f"at most {MAX_NAME} characters, without spaces or slashes"
        found.problems.append(SkillProblem(where, f"skipped: the name {name!r} is not {why}"))
        return
    if not isinstance(description, str) or not description.strip():
        found.problems.append(SkillProblem(where, "skipped: the front matter has no description"))
        return
    if name in found.skills:
        first = found.skills[name].folder
        if first == folder.resolve():
            return  # the same folder reached from two of the dirs (one inside another)
        found.problems.append(
            SkillProblem(where, f"skipped: the name {name!r} is already used by {first}")
        )
        return
    for warning in name_warnings(name, folder.name):
        found.problems.append(SkillProblem(where, warning, warning=True))
    found.skills[name] = Skill(
        name,
        " ".join(description.split()),
        folder.resolve(),
        limits.get(name, frozenset()),
        tuple(unmet(meta)),
        trusted,
    )


def read_text(path: Path, limit: int) -> str:
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
