"""Telegram HTML cut into messages Telegram accepts, and the text it shows.

The Markdown → HTML step is ``_markdown``. Splitting happens after formatting and counts
what Telegram counts (visible UTF-16 code units), so a cut never lands inside a tag or an entity:
tags open at the cut are closed at the end of one part and reopened, attributes included, at the
start of the next.
"""

from __future__ import annotations

import html
import re

from engine import Untrusted

TELEGRAM_LIMIT = 4096
CAPTION_LIMIT = 1024  # a document's caption

_TAG = re.compile(r"<(/?)([a-zA-Z][\w-]*)[^>]*>")
_UNIT = re.compile(r"<[^>]*>|&#?\w+;|[^<&]|[<&]")


def render(
    markdown: str, limit: int = TELEGRAM_LIMIT, untrusted: Untrusted | None = None
) -> list[str]:
    """Markdown → Telegram HTML messages of at most `limit` visible characters each; with
    `untrusted`, links to hosts it does not name are shown as code (``_markdown``)."""
    # markdown-it (some 160 modules, 4 MiB) loads with the first answer, not at start-up.
    from channels.telegram._markdown import markdown_to_html

    return split_html(markdown_to_html(markdown, untrusted), limit)


def render_untrusted(
    text: str, formatted: bool, untrusted: Untrusted, limit: int = TELEGRAM_LIMIT
) -> list[str]:
    """`text` (Markdown when `formatted`, else plain text shown literally) as Telegram HTML
    messages whose URLs that may not stay links are code (Telegram would link them)."""
    from channels.telegram._markdown import markdown_to_html, text_to_html

    html = markdown_to_html(text, untrusted) if formatted else text_to_html(text, untrusted)
    return split_html(html, limit)


def plain_parts(text: str, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """`text` as plain messages of at most `limit` characters (UTF-16), cut at word bounds."""
    return [html.unescape(p) for p in split_html(escape(text), limit)]


def html_to_plain(markup: str) -> str:
    """The visible text of Telegram HTML (for sending it again without parse_mode)."""
    return html.unescape(_TAG.sub("", markup))


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def visible_len(markup: str) -> int:
    """What Telegram counts against its limits: the visible text of `markup`, in UTF-16 units."""
    return utf16_len(html_to_plain(markup))


def escape(text: str) -> str:
    """`text` as Telegram HTML shows it literally."""
    return html.escape(text, quote=False)


# Splitting ------------------------------------------------------------------------------------


def split_html(markup: str, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """Cut Telegram HTML into parts of at most `limit` visible UTF-16 units.

    Prefers paragraph, then line, then word boundaries (when they leave the part at least a
    quarter full); tags open at a cut are closed and reopened, so every part is valid on its own.
    Parts without visible text are dropped.
    """
    if limit < 16:
        raise ValueError("limit too small to split sensibly")
    if utf16_len(html_to_plain(markup)) <= limit:
        return [markup] if html_to_plain(markup).strip() else []
    parts: list[str] = []
    units = _UNIT.findall(markup)
    stack: list[tuple[str, str]] = []  # (name, opening tag) of the tags open here
    start = 0
    while start < len(units):
        end, end_stack = _cut(units, start, stack, limit)
        body = "".join(units[start:end]).rstrip(" \n")
        part = (
            "".join(tag for _, tag in stack) + body + "".join(f"</{n}>" for n, _ in end_stack[::-1])
        )
        if html_to_plain(part).strip():
            parts.append(part)
        start, stack = end, end_stack
        while start < len(units) and units[start] == "\n":
            start += 1
    return parts


def _cut(
    units: list[str], start: int, stack: list[tuple[str, str]], limit: int
) -> tuple[int, list[tuple[str, str]]]:
    """Where the part beginning at `start` ends, and the tags open there."""
    open_tags = list(stack)
    best: dict[int, tuple[int, list[tuple[str, str]]]] = {}  # rank → (end, stack), latest wins
    used = 0
    i = start
    while i < len(units):
        unit = units[i]
        if unit.startswith("<") and len(unit) > 1:
            _apply_tag(open_tags, unit)
            i += 1
            continue
        width = 1 if unit.startswith("&") else utf16_len(unit)
        if used + width > limit:
            for rank in (2, 1, 0):
                if rank in best:
                    return best[rank]
            return (i, open_tags) if i > start else (i + 1, open_tags)
        used += width
        i += 1
        if unit in ("\n", " ") and used > limit // 4:
            rank = 0 if unit == " " else 2 if i >= 2 and units[i - 2] == "\n" else 1
            best[rank] = (i, list(open_tags))
    return i, open_tags


def _apply_tag(open_tags: list[tuple[str, str]], tag: str) -> None:
    m = _TAG.match(tag)
    if m is None:
        return
    name = m[2].lower()
    if not m[1]:
        open_tags.append((name, tag))
        return
    for k in range(len(open_tags) - 1, -1, -1):
        if open_tags[k][0] == name:
            del open_tags[k]
            return
