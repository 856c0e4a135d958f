"""Structured answers as Discord components v2 cards; what stays plain Markdown.

Discord renders the model's Markdown itself (headings, lists, code blocks, quotes), so most
answers go as message content, as before. Two things it renders badly: a table (Discord has
none: the pipes show as they are) and a long answer in sections (2,000 characters a message, a
heading lost in a wall of text). So:

- a table becomes a code block of aligned columns, in any answer (``channels._tables``);
- an answer with a heading or a table is sent as a *card*: one container (components v2) whose
  sections, cut at each heading and each ``---``, are text displays with a separator between
  them. A card holds up to 4,000 characters of text (twice a message's content) and 40
  components, so such an answer mostly fits one message; a longer one is cut between sections
  (or, inside a long section, between blocks) into several cards.

The text displays carry the Markdown of their blocks as the model wrote it (Discord renders it);
a card's :attr:`Card.text` is the same Markdown, sent as plain messages when Discord refuses the
card. An answer with a single block longer than a card goes as plain messages, as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from channels._tables import aligned, markdown_tree, rows

if TYPE_CHECKING:
    from markdown_it.tree import SyntaxTreeNode

CARD_TEXT_MAX = 4000  # characters of all text displays of one message (components v2)
SECTIONS_MAX = 19  # a container, then text displays and separators: 40 components at most


@dataclass(frozen=True, slots=True)
class Card:
    """One components-v2 message: its sections, each a text display (Markdown)."""

    sections: tuple[str, ...]

    @property
    def text(self) -> str:
        """The same content as Markdown message content (the fallback)."""
        return "\n\n".join(self.sections)


def with_tables(markdown: str) -> str:
    """`markdown` with each top-level table as a code block of aligned columns."""
    if "|" not in markdown:
        return markdown
    lines = markdown.splitlines()
    out: list[str] = []
    done = 0
    for node in _parse(markdown).children:
        if node.type == "table" and node.map is not None:
            start, end = node.map
            out += [*lines[done:start], _table(node)]
            done = end
    return "\n".join([*out, *lines[done:]]) if out else markdown


def cards(markdown: str) -> list[Card]:
    """`markdown` as cards when it has a heading or a table (see the module's docstring); none
    when it has neither, or a block longer than a card."""
    nodes = _parse(markdown).children
    if not any(n.type in ("heading", "table") for n in nodes):
        return []
    lines = markdown.splitlines()
    sections: list[list[str]] = [[]]
    for node in nodes:
        if node.type == "hr" or (node.type == "heading" and sections[-1]):
            sections.append([])
        if node.type != "hr" and (block := _source(node, lines)):
            sections[-1].append(block)
    out: list[Card] = []
    current: list[str] = []
    for section in (s for s in sections if s):
        for piece in _pieces(section):
            if len(piece) > CARD_TEXT_MAX:
                return []
            if current and (
                len("".join(current)) + len(piece) > CARD_TEXT_MAX or len(current) == SECTIONS_MAX
            ):
                out.append(Card(tuple(current)))
                current = []
            current.append(piece)
    if current:
        out.append(Card(tuple(current)))
    return out


def _pieces(blocks: list[str]) -> list[str]:
    """A section as one text, or, when it is longer than a card, its blocks in runs that fit."""
    runs: list[str] = []
    for block in blocks:
        if runs and len(runs[-1]) + 2 + len(block) <= CARD_TEXT_MAX:
            runs[-1] += "\n\n" + block
        else:
            runs.append(block)
    return runs


def _source(node: SyntaxTreeNode, lines: list[str]) -> str:
    if node.type == "table":
        return _table(node)
    if node.map is None:
        return ""
    start, end = node.map
    return "\n".join(lines[start:end]).strip("\n")


def _table(node: SyntaxTreeNode) -> str:
    return "```\n" + aligned(rows(node)).replace("```", "``\u200b`") + "\n```"


def _parse(markdown: str) -> SyntaxTreeNode:
    return markdown_tree(markdown)
