"""The YAML front matter of a SKILL.md, read with PyYAML's safe loader.

A skill opens with ``---``, then YAML, then ``---`` and its instructions. What skills written for
other assistants put there is more than flat strings: OpenClaw's documented ``metadata`` is a JSON
object spread over several lines (a YAML flow mapping), ClawHub's examples nest lists in
mappings. A maintained parser reads all of it; ``safe_load`` builds only plain data (no tags that
construct objects, so a skill file cannot make it run anything), and the C loader is used when
PyYAML was built with it. A mistake is reported with the line of SKILL.md it is on. PyYAML is
imported when the first skill is read: a daemon without skills does not load it (~25 ms and a
few MiB at every start).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import yaml


class FrontMatterError(ValueError):
    """What is wrong with a front matter, with the line of SKILL.md it is on."""


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """The front matter's keys and the text after it. Raises FrontMatterError."""
    lines = text.lstrip("\ufeff").split("\n")
    if not lines or lines[0].rstrip() != "---":
        raise FrontMatterError("it does not start with a front matter (a line '---' first)")
    for end in range(1, len(lines)):
        if lines[end].rstrip() in ("---", "..."):
            break
    else:
        raise FrontMatterError("its front matter has no closing '---' line")
    import yaml  # here, not at the top: see the module docstring

    loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        found = yaml.load("\n".join(lines[1:end]), Loader=loader)  # a safe loader: plain data only
    except yaml.YAMLError as exc:
        raise FrontMatterError(_yaml_problem(exc)) from None
    if found is None:
        found = {}
    if not isinstance(found, dict):
        raise FrontMatterError("its front matter is not a mapping of 'key: value' lines")
    return {str(k): v for k, v in found.items()}, "\n".join(lines[end + 1 :]).strip("\n")


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """The YAML error in one line, at the line of SKILL.md (the front matter starts on line 2)."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc)
    where = f"line {mark.line + 2}: " if mark is not None else ""
    return f"{where}not valid YAML ({' '.join(str(problem).split())})"
