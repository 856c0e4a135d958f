"""A Markdown table as aligned monospace text, for platforms whose messages have no tables
(Telegram's HTML, Discord's Markdown): columns padded to their widest cell, a rule under the
header. Both channels take the rows from the same markdown-it tree they render the rest from
(and :func:`plain`, the visible text of a node, for what shows without markup).

That tree is :func:`markdown_tree`'s, one parser for both (CommonMark with tables and
strikethrough, no HTML), built on the first message: markdown-it-py costs ~50 ms of CPU to
import, which a daemon would otherwise pay before its first poll.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.tree import SyntaxTreeNode


@functools.cache
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


def markdown_tree(markdown: str) -> SyntaxTreeNode:
    """The syntax tree of `markdown`: its top-level blocks are the root's children."""
    from markdown_it.tree import SyntaxTreeNode

    return SyntaxTreeNode(_parser().parse(markdown))


def rows(table: SyntaxTreeNode) -> list[list[str]]:
    """The visible text of each cell of a markdown-it ``table`` node, row by row."""
    return [
        [plain(cell).strip() for cell in row.children]
        for section in table.children
        for row in section.children
    ]


def aligned(cells: list[list[str]]) -> str:
    """`cells` as lines of columns separated by " | ", a rule under the first row."""
    widths = [max(len(row[i]) for row in cells if i < len(row)) for i in range(len(cells[0]))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) for row in cells]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def plain(node: SyntaxTreeNode) -> str:
    """The visible text of an inline node and its children, without markup."""
    if node.type in ("softbreak", "hardbreak"):
        return " "
    if not node.children:
        return node.content
    return "".join(plain(child) for child in node.children)
