"""A Markdown table as aligned monospace text, for platforms whose messages have no tables
(Telegram's HTML, Discord's Markdown): columns padded to their widest cell, a rule under the
header. Both channels take the rows from the same markdown-it tree they render the rest from
(and :func:`plain`, the visible text of a node, for what shows without markup).
"""

from __future__ import annotations

from markdown_it.tree import SyntaxTreeNode


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
