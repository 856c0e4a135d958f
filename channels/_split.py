"""Split long Markdown text into parts a platform accepts, without breaking code blocks."""

from __future__ import annotations

_FENCE = "```"


def _cut_point(text: str, limit: int) -> int:
    """The best place to cut `text` at or before `limit`: paragraph, line, word, else hard."""
    window = text[:limit]
    for sep in ("\n\n", "\n", " "):
        i = window.rfind(sep)
        if i > limit // 4:
            return i + len(sep)
    return limit


def split_text(text: str, limit: int) -> list[str]:
    """Split `text` into parts of at most `limit` characters.

    Cuts on paragraph, then line, then word boundaries. A code block cut in two is closed at the
    end of one part and reopened (with its language tag) at the start of the next, so each part
    renders on its own.
    """
    if limit < 32:
        raise ValueError("limit too small to split sensibly")
    parts: list[str] = []
    rest = text
    reopen = ""  # fence line to prepend to the next part when a code block was cut
    while rest:
        rest = reopen + rest
        if len(rest) <= limit:
            parts.append(rest)
            break
        budget = limit - len(_FENCE) - 1  # room to close an open block
        cut = _cut_point(rest, budget)
        head, rest = rest[:cut], rest[cut:]
        fence = _open_fence(head)
        if fence is not None:
            head = head.rstrip("\n") + "\n" + _FENCE
            reopen = fence + "\n"
        else:
            reopen = ""
        head = head.strip("\n") if fence is None else head
        if head.strip():
            parts.append(head)
        rest = rest.lstrip("\n") if not reopen else rest
    return parts


def _open_fence(text: str) -> str | None:
    """The opening fence line (e.g. "```python") if `text` ends inside a code block."""
    open_line: str | None = None
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith(_FENCE):
            open_line = None if open_line is not None else stripped
    return open_line
