"""What each request says of the skills: every skill offered, described within a token budget.

With few skills each is named with its description (clipped to `DESCRIPTION_CHARS`). When those
lines do not fit in `[skills] listing_tokens` (counted as 4 characters a token, the usual
estimate for English), the request names them only, as many as fit, and the model looks up the
ones a request calls for with ``find_skill``, which searches names and descriptions. So a library
of hundreds costs a request what the budget allows, and none is out of reach.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, TypeVar


class Listed(Protocol):
    """What the listing reads of a skill (tools.skills._library.Skill has it)."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...


S = TypeVar("S", bound=Listed)

CHARS_PER_TOKEN = 4
DESCRIPTION_CHARS = 300  # of each description, in a request
FOUND_MAX = 15  # skills find_skill returns
LISTING_HEAD = (
    "Skills: instructions for particular jobs, written for you. When a request matches one, "
    "call use_skill with its name first and follow what it says."
)
COMPACT_HEAD = (
    "There are more skills than can be described here: call find_skill with a few words of the "
    "request to see the descriptions of those that match. Skills:"
)
_WORD = re.compile(r"[a-z0-9]+")


def listing(offered: Sequence[Listed], tokens: int) -> str:
    """The request's text about `offered`; "" when there is none."""
    if not offered:
        return ""
    budget = tokens * CHARS_PER_TOKEN
    lines = [LISTING_HEAD, *(f"- {s.name}: {clip(s.description)}" for s in offered)]
    full = "\n".join(lines)
    if len(full) <= budget:
        return full
    shown, used = [], len(LISTING_HEAD) + len(COMPACT_HEAD) + 2
    for skill in offered:
        if used + len(skill.name) + 2 > budget - 40:
            break
        shown.append(skill.name)
        used += len(skill.name) + 2
    left = len(offered) - len(shown)
    more = f" … and {left} more (find_skill finds them)" if left else ""
    return f"{LISTING_HEAD}\n{COMPACT_HEAD} {', '.join(shown)}{more}"


def crowded(skills: Sequence[Listed], tokens: int) -> bool:
    """True when `skills` are not all described within `tokens` (find_skill is then offered)."""
    return listing(skills, tokens).find(COMPACT_HEAD) >= 0


def find(offered: Sequence[S], query: str) -> list[S]:
    """The skills whose name or description share words with `query`, best first."""
    words = set(_WORD.findall(query.lower()))
    scored = []
    for index, skill in enumerate(offered):
        name = set(_WORD.findall(skill.name.lower()))
        text = set(_WORD.findall(skill.description.lower()))
        score = 3 * len(words & name) + len(words & text)
        if query.strip().lower() in skill.name.lower():
            score += 5
        if score:
            scored.append((-score, index, skill))
    return [skill for *_, skill in sorted(scored)[:FOUND_MAX]]


def clip(text: str, n: int = DESCRIPTION_CHARS) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"
