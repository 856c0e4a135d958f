"""The YAML front matter of a SKILL.md, read by a small parser of the part of YAML it uses.

A skill opens with ``---``, then ``key: value`` lines, then ``---`` and its instructions. What
skills written for other assistants put there is a flat mapping of strings: ``name``,
``description`` (plain, quoted, or a ``|`` / ``>`` block, sometimes continued on indented
lines), and now and then a list (``allowed-tools``) or a one-level mapping (``metadata``). This
parser reads exactly that and nothing else: it builds only strings, lists of strings and
dictionaries of strings (no tags, anchors or objects, so a skill file cannot make it run
anything), and says which line it could not read. PyYAML would read more, but it is not a
dependency of relaybot and this is all a skill needs.
"""

from __future__ import annotations

import json
import re

_KEY = re.compile(r"^([A-Za-z0-9_][A-Za-z0-9_.-]*)\s*:(?:\s+(.*?))?\s*$")
_BLOCK = re.compile(r"^([|>])([+-]?)[1-9]?([+-]?)\s*(?:#.*)?$")
Value = str | list[str] | dict[str, str]


class FrontMatterError(ValueError):
    """What is wrong with a front matter, with the line of SKILL.md it is on."""


def split_front_matter(text: str) -> tuple[dict[str, Value], str]:
    """The front matter's keys and the text after it. Raises FrontMatterError."""
    lines = text.lstrip("\ufeff").split("\n")
    if not lines or lines[0].rstrip() != "---":
        raise FrontMatterError("it does not start with a front matter (a line '---' first)")
    for end in range(1, len(lines)):
        if lines[end].rstrip() in ("---", "..."):
            break
    else:
        raise FrontMatterError("its front matter has no closing '---' line")
    found = _Parser(lines[1:end]).mapping()
    return found, "\n".join(lines[end + 1 :]).strip("\n")


class _Parser:
    def __init__(self, lines: list[str]) -> None:
        self.lines = [line.rstrip() for line in lines]
        self.i = 0

    def error(self, what: str, index: int | None = None) -> FrontMatterError:
        line = (self.i if index is None else index) + 2  # 1-based, after the opening ---
        return FrontMatterError(f"line {line}: {what}")

    def mapping(self) -> dict[str, Value]:
        out: dict[str, Value] = {}
        while self.i < len(self.lines):
            line = self.lines[self.i]
            if not line.strip() or line.lstrip().startswith("#"):
                self.i += 1
                continue
            if line[0] in " \t":
                raise self.error("indented line where a 'key: value' line was expected")
            m = _KEY.match(line)
            if m is None:
                raise self.error(f"not a 'key: value' line: {line[:60]!r}")
            key, raw = m[1], m[2] or ""
            if key in out:
                raise self.error(f"{key!r} is given twice")
            self.i += 1
            out[key] = self.value(raw)
        return out

    def indented(self) -> list[tuple[int, str]]:
        """The following lines that belong to the current key (indented, or blank), as
        (index, line); the parser moves past them."""
        taken: list[tuple[int, str]] = []
        while self.i < len(self.lines):
            line = self.lines[self.i]
            if line and line[0] not in " \t" and not line.startswith("- "):
                break
            if "\t" in line[: len(line) - len(line.lstrip())]:
                raise self.error("a tab in the indentation (YAML indents with spaces)")
            taken.append((self.i, line))
            self.i += 1
        while taken and not taken[-1][1].strip():
            taken.pop()
        return taken

    def value(self, raw: str) -> Value:
        block = _BLOCK.match(raw)
        if block is not None:
            return self.block(block[1], block[2] or block[3])
        if raw.startswith(('"', "'")):
            return self.quoted(raw)
        if raw.startswith("["):
            return _flow_list(raw, self)
        rest = self.indented()
        if not raw:
            return self.nested(rest)
        words = [_plain(raw), *(_plain(line.strip()) for _, line in rest if line.strip())]
        return " ".join(w for w in words if w)

    def nested(self, rest: list[tuple[int, str]]) -> Value:
        """An empty value's indented lines: a list ('- item') or a one-level mapping."""
        items = [(i, line.strip()) for i, line in rest if line.strip()]
        if not items:
            return ""
        if all(line.startswith("- ") or line == "-" for _, line in items):
            return [_scalar(line[2:].strip()) for _, line in items]
        out: dict[str, str] = {}
        for i, line in items:
            m = _KEY.match(line)
            if m is None:
                raise self.error(f"not a 'key: value' line: {line[:60]!r}", i)
            out[m[1]] = _scalar(m[2] or "")
        return out

    def block(self, style: str, chomp: str) -> str:
        rest = self.indented()
        body = [line for _, line in rest]
        indent = min((len(s) - len(s.lstrip()) for s in body if s.strip()), default=0)
        body = [s[indent:] for s in body]
        if style == "|":
            text = "\n".join(body)
        else:  # folded: lines joined by spaces, a blank line is a line break
            paragraphs = "\n".join(body).split("\n\n")
            text = "\n".join(" ".join(p.split("\n")) for p in paragraphs)
        if chomp == "+":
            return text + "\n"
        return text if chomp == "-" else text + ("\n" if text else "")

    def quoted(self, raw: str) -> str:
        quote = raw[0]
        text = raw
        start = self.i - 1
        while _closing(text, quote) is None:
            if self.i >= len(self.lines):
                raise self.error(f"the {quote}quoted{quote} value never ends", start)
            text += " " + self.lines[self.i].strip()
            self.i += 1
        end = _closing(text, quote)
        assert end is not None
        after = text[end + 1 :].strip()
        if after and not after.startswith("#"):
            raise self.error(f"text after the quoted value: {after[:40]!r}", start)
        inner = text[1:end]
        if quote == "'":
            return inner.replace("''", "'")
        try:
            return str(json.loads(f'"{inner}"'))
        except ValueError:
            what = "an escape in the double-quoted value is not understood"
            raise self.error(what, start) from None


def _closing(text: str, quote: str) -> int | None:
    """The index of the quote that closes `text`'s opening one, or None."""
    i = 1
    while i < len(text):
        if quote == '"' and text[i] == "\\":
            i += 2
            continue
        if text[i] == quote:
            if quote == "'" and text[i + 1 : i + 2] == "'":
                i += 2
                continue
            return i
        i += 1
    return None


def _plain(text: str) -> str:
    """A plain scalar without its comment (' #' starts one)."""
    cut = text.find(" #")
    return (text[:cut] if cut >= 0 else text).strip()


def _scalar(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return _plain(text)


def _flow_list(raw: str, parser: _Parser) -> list[str]:
    body = _plain(raw)
    if not body.endswith("]"):
        raise parser.error("a '[' list must end on its line with ']'", parser.i - 1)
    return [_scalar(p.strip()) for p in body[1:-1].split(",") if p.strip()]
