"""The model's Markdown as Telegram HTML, through a real CommonMark parser.

Models write CommonMark with GitHub's tables and strikethrough. The hand-written converter this
replaces used regular expressions per line and produced mis-nested tags for ordinary output
(``***both***`` became ``<b><i>both</b></i>``), which Telegram rejects, so the whole part went out
unformatted. Here markdown-it-py parses the text into a syntax tree and a small renderer walks it:
tags are opened and closed by the tree, so they always nest.

Why markdown-it-py: it is CommonMark-conformant, pure Python, among the most used packages on PyPI
and actively released (4.x in 2026); we need only its parser and write the ~150-line renderer
below. telegramify-markdown was the other candidate: it produces Telegram entities directly, but
it is one maintainer's project (rank ~8,900 by downloads), pulls in a Rust extension
(pyromark), and brings LaTeX, Mermaid and its own splitter that we do not want; keeping HTML
also keeps our splitter (``_format.split_html``) and the plain-text fallback.

An answer written after untrusted content (:class:`engine.Untrusted`) is rendered with a link
only where its host came from trusted text: any other link, picture or bare URL becomes its text
in ``<code>``, which Telegram neither links nor previews (``channels/_links.py`` says why).

Telegram's HTML knows b, i, s, u, a, code, pre and blockquote, with rules on nesting: nothing
inside code or pre, no blockquote inside a blockquote, no code inside a link. The renderer keeps
to them: a code block inside a quote becomes quoted text, inline code inside a link becomes part
of the link text, nested quotes are flattened. Headings become bold lines, lists get bullets or
numbers (nested lists indented), tables become aligned monospace text, raw HTML stays visible as
text.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from channels._links import BARE_URL, fetchable
from channels._tables import aligned, markdown_tree, plain, rows
from engine import Untrusted

if TYPE_CHECKING:
    from markdown_it.tree import SyntaxTreeNode

_LINK_SCHEMES = frozenset({"http", "https", "tg", "mailto"})
_LANGUAGE = re.compile(r"[\w+#.-]+")
_RULE = "──────────"
_INDENT = "  "  # per level of list nesting


@dataclass(frozen=True, slots=True)
class _Where:
    """Where a node is rendered, for Telegram's nesting rules."""

    quoted: bool = False  # inside a blockquote
    depth: int = 0  # list nesting
    untrusted: Untrusted | None = None  # links only to the hosts it names


# Text the parser would leave as it is: no character that can start markup anywhere in a line,
# no line that could open a block (a list item, a setext underline), no space a paragraph would
# strip, no run of blank lines it would fold. Most short answers are such text.
_MARKUP = re.compile(
    r"[*_`\[\]<>&\\~|#!\x00\t\r\v\f]|\n\n\n|^\s|\s$|^[-+=]|^\d{1,9}[.)](?:\s|$)", re.M
)


def markdown_to_html(markdown: str, untrusted: Untrusted | None = None) -> str:
    """Render Markdown as Telegram HTML; everything that is not markup is escaped. With
    `untrusted`, links to hosts it does not name are shown as code (see above)."""
    if markdown and not has_markup(markdown):
        return _text(markdown, untrusted, in_link=False)  # what the parser would make of it
    return nodes_to_html(parse(markdown).children, untrusted)


def has_markup(markdown: str) -> bool:
    """Whether the parser could find any markup in `markdown` (False: plain text as it is)."""
    return _MARKUP.search(markdown) is not None


def parse(markdown: str) -> SyntaxTreeNode:
    """The syntax tree of `markdown`: its top-level blocks are the root's children. The rich
    messages (``_rich``) are made from the same tree."""
    return markdown_tree(markdown.replace("\x00", ""))


def nodes_to_html(nodes: list[SyntaxTreeNode], untrusted: Untrusted | None = None) -> str:
    """Top-level blocks of a :func:`parse` tree as Telegram HTML."""
    return _blocks(nodes, _Where(untrusted=untrusted), "\n\n")


def text_to_html(text: str, untrusted: Untrusted) -> str:
    """Plain `text` as Telegram HTML that shows it literally, its URLs that may not stay
    links in ``<code>`` (a plain message's URLs Telegram would link and preview)."""
    return _text(text, untrusted, in_link=False)


def _text(text: str, untrusted: Untrusted | None, *, in_link: bool) -> str:
    if untrusted is None or in_link:
        return _esc(text)
    out: list[str] = []
    end = 0
    for m in BARE_URL.finditer(text):
        if not fetchable(m[0], untrusted):
            out += [_esc(text[end : m.start()]), f"<code>{_esc(m[0])}</code>"]
            end = m.end()
    return "".join(out) + _esc(text[end:])


def _blocks(nodes: list[SyntaxTreeNode], where: _Where, sep: str) -> str:
    return sep.join(out for node in nodes if (out := _block(node, where)))


def _block(node: SyntaxTreeNode, where: _Where) -> str:
    match node.type:
        case "paragraph":
            return _inline(node.children[0].children, where, in_link=False) if node.children else ""
        case "heading":
            return f"<b>{_inline(node.children[0].children, where, in_link=False)}</b>"
        case "fence" | "code_block":
            return _code_block(node, where)
        case "blockquote":
            inner = _blocks(node.children, replace(where, quoted=True), "\n\n")
            return inner if where.quoted or not inner else f"<blockquote>{inner}</blockquote>"
        case "bullet_list" | "ordered_list":
            return _list(node, where)
        case "hr":
            return _RULE
        case "table":
            return _table(node, where)
        case _:  # e.g. an html_block, shown as the text it is
            return _text(node.content.rstrip("\n"), where.untrusted, in_link=False)


def _code_block(node: SyntaxTreeNode, where: _Where) -> str:
    code = _esc(node.content.rstrip("\n"))
    if not code.strip():
        return ""
    if where.quoted:  # Telegram allows no pre inside a blockquote
        return _text(node.content.rstrip("\n"), where.untrusted, in_link=False)
    info = node.info.strip().split(maxsplit=1)
    language = _LANGUAGE.match(info[0]) if info else None
    if language is None:
        return f"<pre>{code}</pre>"
    return f'<pre><code class="language-{html.escape(language[0])}">{code}</code></pre>'


def _list(node: SyntaxTreeNode, where: _Where) -> str:
    number = int(str(node.attrs.get("start", 1))) if node.type == "ordered_list" else None
    inner = replace(where, depth=where.depth + 1)
    items: list[str] = []
    loose = False
    for item in node.children:
        tight = all(c.hidden for c in item.children if c.type == "paragraph")
        loose = loose or not tight
        marker = "•" if number is None else f"{number + len(items)}."
        body = _blocks(item.children, inner, "\n" if tight else "\n\n")
        items.append(f"{_INDENT * where.depth}{marker} {body}".rstrip(" "))
    return ("\n\n" if loose else "\n").join(items)


def _table(node: SyntaxTreeNode, where: _Where) -> str:
    text = aligned(rows(node))
    return (
        _text(text, where.untrusted, in_link=False) if where.quoted else f"<pre>{_esc(text)}</pre>"
    )


def _inline(nodes: list[SyntaxTreeNode], where: _Where, *, in_link: bool) -> str:
    out: list[str] = []
    for node in nodes:
        match node.type:
            case "softbreak" | "hardbreak":
                out.append("\n")
            case "code_inline":
                code = _esc(node.content)
                out.append(code if in_link else f"<code>{code}</code>")
            case "em" | "strong" | "s":
                tag = {"em": "i", "strong": "b", "s": "s"}[node.type]
                out.append(f"<{tag}>{_inline(node.children, where, in_link=in_link)}</{tag}>")
            case "link":
                href = str(node.attrs["href"])
                inside = in_link or _linked(href, where.untrusted)  # else the label is text
                label = _inline(node.children, where, in_link=inside)
                out.append(_link(href, label, in_link, where.untrusted))
            case "image":
                label = _esc(plain(node)) or "image"
                out.append(_link(str(node.attrs["src"]), label, in_link, where.untrusted))
            case "text":
                out.append(_text(node.content, where.untrusted, in_link=in_link))
            case _:  # an escaped character, raw HTML shown as text
                out.append(_esc(node.content))
    return "".join(out)


def _linked(url: str, untrusted: Untrusted | None) -> bool:
    return untrusted is None or untrusted.links_to(url)


def _link(url: str, label: str, in_link: bool, untrusted: Untrusted | None) -> str:
    if not _linked(url, untrusted):
        shown = _esc(url) if in_link else f"<code>{_esc(url)}</code>"
        return f"{label} ({shown})" if label.strip() else shown
    if not label.strip():
        return _esc(url)
    if in_link or urlsplit(url).scheme.lower() not in _LINK_SCHEMES:
        return f"{label} ({_esc(url)})"
    return f'<a href="{html.escape(url, quote=True)}">{label}</a>'


def _esc(text: str) -> str:
    return html.escape(text, quote=False)
