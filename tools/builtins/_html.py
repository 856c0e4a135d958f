"""Readable text from an HTML page (selectolax/lexbor), and decoding of fetched bytes."""

from __future__ import annotations

import codecs
import re

from selectolax.lexbor import LexborHTMLParser, LexborNode

_HIDDEN = ["script", "style", "noscript", "template", "svg", "iframe", "object", "head"]
_BLOCKS = frozenset(
    "address article aside blockquote br dd div dl dt fieldset figcaption figure footer form "
    "h1 h2 h3 h4 h5 h6 header hr li main nav ol p pre section table tr td th ul".split()
)
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.I)


def decode(body: bytes, charset: str | None, *, html: bool = False) -> str:
    """Bytes to text using the header charset, else a <meta charset>, else UTF-8."""
    candidates = [charset]
    if html and (m := _META_CHARSET.search(body[:4096])):
        candidates.append(m[1].decode("ascii"))
    for name in candidates:
        if not name:
            continue
        try:
            codecs.lookup(name)
        except LookupError:
            continue
        return body.decode(name, errors="replace")
    return body.decode("utf-8", errors="replace")


def html_to_text(html: str) -> tuple[str, str]:
    """(title, text): the page title and its visible text, one block per line."""
    tree = LexborHTMLParser(html)
    title_node = tree.css_first("title")
    title = " ".join(title_node.text().split()) if title_node else ""
    tree.strip_tags(_HIDDEN)
    parts: list[str] = []
    root = tree.body or tree.root
    stack: list[LexborNode | None] = [root] if root is not None else []
    while stack:  # depth first; a block adds a line break before and after its content
        node = stack.pop()
        if node is None:
            parts.append("\n")
        elif node.tag == "-text":
            parts.append(node.text_content or "")
        else:
            block = node.tag in _BLOCKS
            if block:
                parts.append("\n")
                stack.append(None)
            stack.extend(reversed(list(node.iter(include_text=True))))
    lines = (" ".join(line.split()) for line in "".join(parts).splitlines())
    return title, "\n".join(line for line in lines if line)
