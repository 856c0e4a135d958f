"""Rich messages in the fake Telegram: what the spec's tables cannot say, and the text they show.

`telegram_spec` checks the shape of an ``InputRichMessage`` (every block and rich text against
the 10.1 spec and its 10.2/10.3 overlay). :func:`check` adds Telegram's own rules:

- exactly one of ``html``, ``markdown`` or ``blocks`` (10.2's words for InputRichMessage);
- a heading's size 1-6; a table cell's ``align`` left/center/right and ``valign``
  top/middle/bottom; an ordered item's label type one of a, A, i, I, 1;
- the thinking block only in a draft (sendRichMessageDraft);
- the limits on one rich message: 32,768 characters of text, 500 blocks (nested blocks, list
  items and table rows counted), a depth of 16, 20 table columns. Telegram documents these
  with the rich message formatting options; the figures are those third-party libraries
  carry (e.g. the ``telegram-rich`` crate's ``Limits::TELEGRAM``), which the fake takes as the
  API's.

Refusals use the words ``RICH_MESSAGE_INVALID`` / ``RICH_MESSAGE_TOO_LONG`` after "Bad Request:",
as Telegram's MTProto errors are named. :func:`visible` is the message's text as a user sees it
(blocks one per line; cells separated by " | "), for tests that read what the bot showed.
"""

from __future__ import annotations

from typing import Any

TEXT_MAX = 32_768
BLOCKS_MAX = 500
DEPTH_MAX = 16
COLUMNS_MAX = 20
_ALIGN = frozenset({"left", "center", "right"})
_VALIGN = frozenset({"top", "middle", "bottom"})
_LABELS = frozenset({"a", "A", "i", "I", "1"})


class RichError(Exception):
    """A rich message Telegram refuses: its description."""


def check(rich: dict[str, Any], *, draft: bool) -> None:
    """Raise :class:`RichError` when Telegram would refuse the (spec-checked) `rich` message."""
    given = [k for k in ("html", "markdown", "blocks") if rich.get(k) is not None]
    if len(given) != 1:
        raise RichError("Bad Request: exactly one of html, markdown or blocks must be used")
    if "blocks" not in given:
        text = str(rich[given[0]])
        if not text.strip():
            raise RichError("Bad Request: RICH_MESSAGE_INVALID: the message is empty")
        if len(text) > TEXT_MAX:
            raise RichError("Bad Request: RICH_MESSAGE_TOO_LONG")
        return
    counts = {"blocks": 0, "chars": 0}
    _blocks(rich["blocks"], counts, depth=1, draft=draft)
    if not rich["blocks"]:
        raise RichError("Bad Request: RICH_MESSAGE_INVALID: the message is empty")
    if counts["blocks"] > BLOCKS_MAX or counts["chars"] > TEXT_MAX:
        raise RichError("Bad Request: RICH_MESSAGE_TOO_LONG")


def _blocks(blocks: list[dict[str, Any]], counts: dict[str, int], depth: int, draft: bool) -> None:
    if depth > DEPTH_MAX:
        raise RichError("Bad Request: RICH_MESSAGE_INVALID: blocks nested too deep")
    for block in blocks:
        counts["blocks"] += 1
        kind = block["type"]
        if kind == "thinking" and not draft:
            raise RichError("Bad Request: RICH_MESSAGE_INVALID: thinking blocks are for drafts")
        if kind == "heading" and not 1 <= int(block["size"]) <= 6:
            raise RichError("Bad Request: RICH_MESSAGE_INVALID: heading size must be 1-6")
        for key in ("text", "summary", "credit", "caption"):
            counts["chars"] += len(_text(block.get(key, "")))
        for item in block.get("items", []):
            counts["blocks"] += 1
            if item.get("type") is not None and item["type"] not in _LABELS:
                raise RichError("Bad Request: RICH_MESSAGE_INVALID: unknown list label type")
            _blocks(item["blocks"], counts, depth + 1, draft)
        _blocks(block.get("blocks", []), counts, depth + 1, draft)
        if kind == "table":
            _table(block["cells"], counts)


def _table(rows: list[list[dict[str, Any]]], counts: dict[str, int]) -> None:
    for row in rows:
        counts["blocks"] += 1
        if len(row) > COLUMNS_MAX:
            raise RichError("Bad Request: RICH_MESSAGE_INVALID: too many table columns")
        for cell in row:
            if cell["align"] not in _ALIGN or cell["valign"] not in _VALIGN:
                raise RichError("Bad Request: RICH_MESSAGE_INVALID: bad table cell alignment")
            counts["chars"] += len(_text(cell.get("text", "")))


def visible(rich: dict[str, Any]) -> str:
    """What a user reads in a rich message sent as blocks: one line per block."""
    return "\n".join(_lines(rich["blocks"]))


def _lines(blocks: list[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    for block in blocks:
        if "cells" in block:
            lines += [" | ".join(_text(c.get("text", "")) for c in row) for row in block["cells"]]
        elif "items" in block:
            for item in block["items"]:
                label = f"{item['value']}." if "value" in item else "•"
                inner = _lines(item["blocks"])
                lines += [f"{label} {inner[0] if inner else ''}", *inner[1:]]
        elif "blocks" in block:
            lines += _lines(block["blocks"])
        elif block["type"] == "divider":
            lines.append("———")
        else:
            lines.append(_text(block.get("text", "")))
    return lines


def _text(rich: Any) -> str:
    if isinstance(rich, str):
        return rich
    if isinstance(rich, list):
        return "".join(_text(r) for r in rich)
    return _text(rich.get("text", ""))


def as_received(rich: dict[str, Any]) -> dict[str, Any]:
    """The ``RichMessage`` a sent message carries: the blocks as given, list items labelled."""

    def labelled(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for block in blocks:
            block = dict(block)
            if "items" in block:
                block["items"] = [
                    {**i, "label": f"{i['value']}." if "value" in i else "•"}
                    | {"blocks": labelled(i["blocks"])}
                    for i in block["items"]
                ]
            if "blocks" in block:
                block["blocks"] = labelled(block["blocks"])
            out.append(block)
        return out

    if rich.get("blocks") is None:  # html or markdown: shown as the text it was given
        return {"blocks": [{"type": "paragraph", "text": rich.get("html") or rich["markdown"]}]}
    return {"blocks": labelled(rich["blocks"])}
