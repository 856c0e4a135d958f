"""Reading a skill when the model asks (in a thread): its instructions with the list of its files,
or one of its files, a page at a time.

A page is at most `[skills] max_file_kb` of UTF-8 and ends on a whole character; when there is
more, the page says the offset to ask for next, so a long reference file or a long SKILL.md is
read in full over a few calls instead of being cut. use_skill's result is not cut again by the
loop's general tool-output limit (its tool is `bounded_output`): this bound is its own.

A skill's file is read only inside its folder: the path is resolved (symlinks followed) and must
stay under the folder's own resolved path.
"""

from __future__ import annotations

import os
from pathlib import Path

from tools.skills._front_matter import split_front_matter
from tools.skills._library import MAX_SKILL_BYTES, SKILL_FILE, Skill, read_text

MAX_FILES = 200  # files listed for one skill
FILES_HEAD = "Files of this skill (read one with use_skill and file):"


class Refused(Exception):
    """A file of a skill that may not be read, and why."""


def instructions(skill: Skill, limit: int, offset: int = 0) -> str:
    """A page of the skill's instructions (its SKILL.md after the front matter), followed by
    the list of its files. Raises Refused for an offset past their end."""
    _, body = split_front_matter(read_text(skill.folder / SKILL_FILE, MAX_SKILL_BYTES))
    listed = "\n".join(f"- {f}" for f in files_of(skill)) or "(none)"
    whole = f"Skill {skill.name} (its folder: {skill.folder}).\n\n{body}\n\n{FILES_HEAD}\n{listed}"
    data = whole.encode()
    if offset and offset >= len(data):
        raise Refused(
            f"the instructions have {len(data):,} bytes; offset {offset:,} is past their end"
        )
    text, end = page(data[offset:], offset, len(data), limit)
    return text + _more(end, len(data), "the skill's instructions", skill.name, None)


def read_file(skill: Skill, relative: str, limit: int, offset: int = 0) -> str:
    """A page of one of the skill's files. Raises Refused."""
    if not relative or Path(relative).is_absolute():
        raise Refused(f"give a path inside the skill, relative to its folder: {relative!r}")
    try:
        resolved = (skill.folder / relative).resolve(strict=True)
    except (OSError, RuntimeError):
        raise Refused(f"the skill {skill.name} has no file {relative!r}") from None
    if not resolved.is_relative_to(skill.folder):
        raise Refused(f"{relative!r} is outside the skill's folder; only its own files are read")
    if not resolved.is_file():
        raise Refused(f"{relative!r} is not a file of the skill")
    with resolved.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        if offset >= size and size:
            raise Refused(f"{relative!r} has {size:,} bytes; offset {offset:,} is past its end")
        f.seek(offset)
        data = f.read(limit + 4)
    if b"\x00" in data:
        raise Refused(f"{relative!r} is a binary file; only text files are read")
    text, end = page(data, offset, size, limit)
    return text + _more(end, size, "the file", skill.name, relative)


def page(data: bytes, offset: int, size: int, limit: int) -> tuple[str, int]:
    """At most `limit` bytes of `data` (which starts at `offset` of `size`), as whole UTF-8
    characters, and the offset after them."""
    start = 0
    while start < min(3, len(data)) and 0x80 <= data[start] < 0xC0:  # inside a character
        start += 1
    cut = min(len(data), start + limit)
    while start < cut < len(data) and 0x80 <= data[cut] < 0xC0:
        cut -= 1
    end = offset + cut
    return data[start:cut].decode("utf-8", errors="replace"), min(end, size)


def _more(end: int, size: int, what: str, name: str, file: str | None) -> str:
    if end >= size:
        return ""
    again = f"name={name!r}" + (f", file={file!r}" if file else "") + f", offset={end}"
    return (
        f"\n[… {what} goes on: {size:,} bytes in all, read up to {end:,}; "
        f"call use_skill with {again} to read the rest]"
    )


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


def _inside(path: Path, folder: Path) -> bool:
    try:
        return path.resolve(strict=True).is_relative_to(folder)
    except (OSError, RuntimeError):
        return False
