"""The model's Markdown as Telegram rich messages (Bot API 10.2 blocks), from the same syntax tree
that makes Telegram HTML (``_markdown.parse``).

An answer is sent rich when it has what a plain message shows badly: a table, a heading, a code
block or a numbered list of steps (:func:`wants_rich`). Anything else (a sentence or two, a bold
word, a short bullet list) stays a plain HTML message, as before.

The mapping (the README repeats it):

    paragraph        → paragraph block (bold, italic, strikethrough, code, links as rich text)
    # heading        → heading block, size 1-6 as the Markdown level
    ``` code ```     → pre block with its language
    - / 1. lists     → list block; a numbered item keeps its number (nested lists nest)
    > quote          → blockquote block
    ---              → divider block
    | table |        → table block: header cells, each column's alignment, bordered, compact
                       past three columns (10.3's is_compact)
    raw HTML         → a paragraph showing it as text

A long answer is cut between top-level blocks into parts of at most one message's worth of text
(4,096 characters, as Telegram counts them, in the part's HTML rendering) and 500 blocks, a
heading kept with the block after it. The
cap is a plain message's, not a rich message's (about 32,768 characters): each rich part then
has an HTML twin that fits one plain message, so a rich part Telegram refuses is sent once as
that twin (``_rich_out``), nothing lost and nothing sent twice, and an edit keeps one message
per part. An answer with a single block longer than that (a very long code block or table) goes
as HTML, cut by ``_format.split_html`` as before, rather than half rich and half not.

Links keep the schemes the HTML keeps (http, https, tg, mailto); others show as text with the
address beside them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from channels._tables import plain
from channels.telegram._format import TELEGRAM_LIMIT, visible_len
from channels.telegram._markdown import (
    _LANGUAGE,
    _LINK_SCHEMES,
    has_markup,
    nodes_to_html,
    parse,
)

if TYPE_CHECKING:
    from markdown_it.tree import SyntaxTreeNode

BLOCKS_MAX = 500  # blocks, list items and table rows of one rich message
COMPACT_PAST = 3  # columns: a wider table is sent compact (smaller cell padding)
_RICH_NODES = frozenset({"table", "heading", "fence", "code_block", "ordered_list"})
_ALIGN = re.compile(r"text-align:\s*(left|center|right)")

RichText = str | list["RichText"] | dict[str, object]
Block = dict[str, object]


@dataclass(frozen=True, slots=True)
class RichPart:
    """One message's worth of an answer: its blocks (JSON, for sendRichMessage) and the same
    content as Telegram HTML (sent when the rich message is refused)."""

    html: str
    blocks: str


def wants_rich(markdown: str) -> bool:
    """Whether `markdown` has a table, a heading, a code block or a numbered list anywhere."""
    if not has_markup(markdown):
        return False
    return _has_rich(parse(markdown))


def _has_rich(node: SyntaxTreeNode) -> bool:
    return node.type in _RICH_NODES or any(_has_rich(child) for child in node.children)


def rich_parts(markdown: str, limit: int = TELEGRAM_LIMIT) -> list[RichPart]:
    """`markdown` as parts cut between top-level blocks (see the module's docstring); none when
    it wants no rich message (:func:`wants_rich`) or a block does not fit in one part."""
    if not has_markup(markdown):
        return []
    tree = parse(markdown)
    if not _has_rich(tree):
        return []
    pieces = [_Piece.of(node) for node in tree.children]
    if any(p.size > limit or p.count > BLOCKS_MAX for p in pieces):
        return []  # a block longer than a message: the whole answer goes as HTML
    parts: list[RichPart] = []
    group: list[_Piece] = []

    def flush() -> None:
        carried = [group.pop()] if len(group) > 1 and group[-1].node.type == "heading" else []
        blocks = [p.block for p in group if p.block is not None]
        if blocks:
            html = "\n\n".join(p.html for p in group if p.html)
            parts.append(RichPart(html, json.dumps(blocks, ensure_ascii=False)))
        group[:] = carried  # a heading goes with what follows it

    for piece in pieces:
        candidate = [*group, piece]
        if _size(candidate) > limit or sum(p.count for p in candidate) > BLOCKS_MAX:
            flush()
        group.append(piece)
    flush()
    return parts


@dataclass(frozen=True, slots=True)
class _Piece:
    """A top-level block, rendered both ways once, with what it counts against the limits."""

    node: SyntaxTreeNode
    html: str
    block: Block | None
    size: int  # visible characters of `html`, as Telegram counts them
    count: int  # blocks, as Telegram counts them

    @classmethod
    def of(cls, node: SyntaxTreeNode) -> _Piece:
        html, block = nodes_to_html([node]), _block(node)
        return cls(node, html, block, visible_len(html), count_blocks([block]))


def _size(pieces: list[_Piece]) -> int:
    """Visible characters of the pieces' HTML joined as ``nodes_to_html`` joins them."""
    shown = [p.size for p in pieces if p.html]
    return sum(shown) + 2 * max(len(shown) - 1, 0)


def draft_blocks(markdown: str, limit: int = TELEGRAM_LIMIT) -> list[Block]:
    """The blocks of an answer still being written, for a rich draft: its newest top-level
    blocks that fit in `limit` characters (a draft shows the end of what is written)."""
    kept: list[_Piece] = []
    for node in reversed(parse(markdown).children):
        piece = _Piece.of(node)
        if _size([piece, *kept]) > limit or sum(p.count for p in [piece, *kept]) > BLOCKS_MAX:
            break
        kept.insert(0, piece)
    return [p.block for p in kept if p.block is not None]


def count_blocks(blocks: list[Block | None]) -> int:
    """Blocks as Telegram counts them against its limit: nested blocks, list items and table
    rows included."""
    total = 0
    for block in blocks:
        if block is None:
            continue
        total += 1
        for item in block.get("items", []):  # type: ignore[attr-defined]
            total += 1 + count_blocks(item["blocks"])
        total += len(block.get("cells", []))  # type: ignore[arg-type]
        total += count_blocks(block.get("blocks", []))  # type: ignore[arg-type]
    return total


# Blocks -----------------------------------------------------------------------------------------


def _block(node: SyntaxTreeNode) -> Block | None:
    match node.type:
        case "paragraph":
            text = _inline(node.children[0].children) if node.children else ""
            return {"type": "paragraph", "text": text} if text else None
        case "heading":
            level = int(node.tag[1]) if node.tag[1:].isdigit() else 1
            return {"type": "heading", "text": _inline(node.children[0].children), "size": level}
        case "fence" | "code_block":
            return _pre(node)
        case "blockquote":
            blocks = _blocks(node.children)
            return {"type": "blockquote", "blocks": blocks} if blocks else None
        case "bullet_list" | "ordered_list":
            return _list(node)
        case "hr":
            return {"type": "divider"}
        case "table":
            return _table(node)
        case _:  # e.g. an html_block, shown as the text it is
            text = node.content.rstrip("\n")
            return {"type": "paragraph", "text": text} if text.strip() else None


def _blocks(nodes: list[SyntaxTreeNode]) -> list[Block]:
    return [b for node in nodes if (b := _block(node)) is not None]


def _pre(node: SyntaxTreeNode) -> Block | None:
    code = node.content.rstrip("\n")
    if not code.strip():
        return None
    block: Block = {"type": "pre", "text": code}
    info = node.info.strip().split(maxsplit=1) if node.type == "fence" else []
    if info and (language := _LANGUAGE.match(info[0])) is not None:
        block["language"] = language[0]
    return block


def _list(node: SyntaxTreeNode) -> Block | None:
    start = int(str(node.attrs.get("start", 1))) if node.type == "ordered_list" else None
    items: list[dict[str, object]] = []
    for item in node.children:
        entry: dict[str, object] = {"blocks": _blocks(item.children) or [_EMPTY]}
        if start is not None:
            entry |= {"value": start + len(items), "type": "1"}
        items.append(entry)
    return {"type": "list", "items": items} if items else None


_EMPTY: Block = {"type": "paragraph", "text": " "}


def _table(node: SyntaxTreeNode) -> Block:
    rows: list[list[dict[str, object]]] = []
    for section in node.children:  # thead, tbody
        for row in section.children:
            cells = []
            for cell in row.children:
                align = _ALIGN.search(str(cell.attrs.get("style", "")))
                out: dict[str, object] = {"align": align[1] if align else "left", "valign": "top"}
                text = _inline(cell.children[0].children) if cell.children else ""
                if text:
                    out["text"] = text
                if cell.type == "th":
                    out["is_header"] = True
                cells.append(out)
            rows.append(cells)
    block: Block = {"type": "table", "cells": rows, "is_bordered": True}
    if rows and len(rows[0]) > COMPACT_PAST:
        block["is_compact"] = True
    return block


# Rich text --------------------------------------------------------------------------------------


def _inline(nodes: list[SyntaxTreeNode], *, in_link: bool = False) -> RichText:
    out: list[RichText] = []
    for node in nodes:
        match node.type:
            case "softbreak" | "hardbreak":
                out.append("\n")
            case "code_inline":
                out.append(node.content if in_link else {"type": "code", "text": node.content})
            case "em" | "strong" | "s":
                kind = {"em": "italic", "strong": "bold", "s": "strikethrough"}[node.type]
                out.append({"type": kind, "text": _inline(node.children, in_link=in_link)})
            case "link":
                label = _inline(node.children, in_link=True)
                out.append(_link(str(node.attrs["href"]), label, in_link))
            case "image":
                out.append(_link(str(node.attrs["src"]), plain(node) or "image", in_link))
            case _:  # text, an escaped character, raw HTML shown as text
                out.append(node.content)
    return _joined(out)


def _link(url: str, label: RichText, in_link: bool) -> RichText:
    if label in ("", []):
        return url
    if in_link or urlsplit(url).scheme.lower() not in _LINK_SCHEMES:
        return _joined([label, f" ({url})"])
    return {"type": "url", "text": label, "url": url}


def _joined(pieces: list[RichText]) -> RichText:
    """Adjacent strings merged; one piece alone is itself; nothing is the empty string."""
    merged: list[RichText] = []
    for piece in pieces:
        if isinstance(piece, str) and merged and isinstance(merged[-1], str):
            merged[-1] += piece
        elif piece not in ("", []):
            merged.append(piece)
    if not merged:
        return ""
    return merged[0] if len(merged) == 1 else merged
