"""The model's Markdown as Telegram HTML, split into messages Telegram accepts.

Telegram's HTML knows b, i, s, u, a, code, pre and blockquote; everything else is escaped text.
Splitting happens after formatting and counts what Telegram counts (visible UTF-16 code units), so
a cut never lands inside a tag or an entity: tags open at the cut are closed at the end of one part
and reopened, attributes included, at the start of the next.
"""

from __future__ import annotations

import html
import re
from urllib.parse import urlsplit

TELEGRAM_LIMIT = 4096

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)\s*$")
_HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_RULE = re.compile(r"^ {0,3}([-*_])(\s*\1){2,}\s*$")
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")

_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_ESCAPED = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|~>])")
_LINK = re.compile(r"\[([^\]\n]+)\]\(((?:[^()\s]|\([^()\s]*\))+)\)")
_EMPHASIS = (
    (re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*"), "b"),
    (re.compile(r"(?<!\w)__(?=\S)(.+?)(?<=\S)__(?!\w)"), "b"),
    (re.compile(r"~~(?=\S)(.+?)(?<=\S)~~"), "s"),
    (re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])"), "i"),
    (re.compile(r"(?<![\w_])_(?=[^\s_])(.+?)(?<=[^\s_])_(?![\w_])"), "i"),
)
_HOLE = re.compile(r"\x00(\d+)\x00")
_LINK_SCHEMES = frozenset({"http", "https", "tg", "mailto"})

_TAG = re.compile(r"<(/?)([a-zA-Z][\w-]*)[^>]*>")
_UNIT = re.compile(r"<[^>]*>|&#?\w+;|[^<&]|[<&]")


def render(markdown: str, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """Markdown → Telegram HTML messages of at most `limit` visible characters each."""
    return split_html(markdown_to_html(markdown), limit)


def plain_parts(text: str, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """`text` as plain messages of at most `limit` characters (UTF-16), cut at word bounds."""
    return [html.unescape(p) for p in split_html(_esc(text), limit)]


def html_to_plain(markup: str) -> str:
    """The visible text of Telegram HTML (for sending it again without parse_mode)."""
    return html.unescape(_TAG.sub("", markup))


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


# Markdown → HTML ------------------------------------------------------------------------------


def markdown_to_html(markdown: str) -> str:
    """Render the Markdown a model writes as Telegram HTML, escaping everything else."""
    lines = markdown.replace("\x00", "").replace("\r\n", "\n").split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if m := _FENCE.match(line):
            body, i = _take_fenced(lines, i + 1, m[1])
            code = _esc("\n".join(body))
            lang = m[2]
            out.append(
                f'<pre><code class="language-{_esc(lang)}">{code}</code></pre>'
                if lang
                else f"<pre>{code}</pre>"
            )
        elif line.lstrip().startswith(">"):
            quoted, i = _take_while(lines, i, lambda s: s.lstrip().startswith(">"))
            body = "\n".join(_inline(q.lstrip()[1:].removeprefix(" ")) for q in quoted)
            out.append(f"<blockquote>{body}</blockquote>")
        elif _is_table(lines, i):
            rows, i = _take_while(lines, i, _TABLE_ROW.match)
            out.append(f"<pre>{_esc(chr(10).join(r.strip() for r in rows))}</pre>")
        else:
            out.append(_block_line(line))
            i += 1
    return "\n".join(out)


def _block_line(line: str) -> str:
    if m := _HEADING.match(line):
        return f"<b>{_inline(m[1])}</b>"
    if _RULE.match(line):
        return "──────────"
    if m := _BULLET.match(line):
        return f"{m[1]}• {_inline(m[2])}"
    return _inline(line)


def _take_fenced(lines: list[str], i: int, fence: str) -> tuple[list[str], int]:
    body: list[str] = []
    while i < len(lines):
        stripped = lines[i].strip()
        if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
            return body, i + 1
        body.append(lines[i])
        i += 1
    return body, i  # an unclosed block runs to the end, as in CommonMark


def _take_while(lines: list[str], i: int, keep: object) -> tuple[list[str], int]:
    taken: list[str] = []
    while i < len(lines) and keep(lines[i]):  # type: ignore[operator]
        taken.append(lines[i])
        i += 1
    return taken, i


def _is_table(lines: list[str], i: int) -> bool:
    return (
        i + 1 < len(lines)
        and bool(_TABLE_ROW.match(lines[i]))
        and bool(_TABLE_RULE.match(lines[i + 1]))
    )


def _inline(text: str) -> str:
    """Inline Markdown → HTML. Code spans, escapes and links are set aside first (as \\x00n\\x00
    holes) so emphasis never reaches into them."""
    held: list[str] = []

    def hold(markup: str) -> str:
        held.append(markup)
        return f"\x00{len(held) - 1}\x00"

    text = _CODE_SPAN.sub(lambda m: hold(f"<code>{_esc(m[2])}</code>"), text)
    text = _ESCAPED.sub(lambda m: hold(_esc(m[1])), text)
    text = _LINK.sub(lambda m: hold(_link(m[1], m[2])), text)
    text = _emphasis(_esc(text))
    while "\x00" in text:
        text = _HOLE.sub(lambda m: held[int(m[1])], text)
    return text


def _link(label: str, url: str) -> str:
    label_html = _emphasis(_esc(label))
    if urlsplit(url).scheme.lower() not in _LINK_SCHEMES:
        return f"{label_html} ({_esc(url)})"
    return f'<a href="{html.escape(url, quote=True)}">{label_html}</a>'


def _emphasis(text: str) -> str:
    for pattern, tag in _EMPHASIS:
        text = pattern.sub(lambda m, t=tag: f"<{t}>{m[1]}</{t}>", text)
    return text


def _esc(text: str) -> str:
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
