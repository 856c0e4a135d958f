"""A conversation's message as a row of ``messages`` and back, for every backend.

The parts are columns (tool calls, images and the model's reasoning as JSON; an image by its
reference, never its bytes; reasoning with its API's item verbatim, since that API refuses the
calls of a tool loop resumed after a restart without it; where its words came from as `trust`
and `source`, NULL for trusted). Apart from the statements that use
them (engine/store/_conversations.py, engine/store/_context.py): the one mapping both read and
write through.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from engine.models import (
    TRUSTED,
    Image,
    Message,
    Part,
    Provenance,
    Reasoning,
    Role,
    Text,
    ToolCall,
    ToolOutput,
    Trust,
)
from engine.store._db import Row

MESSAGE_COLS = (
    "role, content, tool_calls, tool_call_id, is_error, speaker, media, quote, reasoning, "
    "trust, source, user_id"
)

INSERT_MESSAGE = (
    "INSERT INTO messages(conversation_id, role, content, tool_calls, tool_call_id, is_error, "
    "speaker, media, created_at, user_id, quote, reasoning, trust, source) "
    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)


def message_params(conversation_id: int, msg: Message, user_id: str | None) -> tuple[Any, ...]:
    calls = msg.tool_calls
    result = msg.result
    images = [_image(i) for i in msg.images]
    reasoning = [[r.api, r.item, r.summary] for r in msg.reasoning]
    trusted = msg.provenance.trust is Trust.TRUSTED
    if msg.provenance.trust is Trust.MEMBER:  # its author is the row's user
        user_id = msg.provenance.author
    return (
        conversation_id,
        msg.role.value,
        msg.text,
        json.dumps([[c.id, c.name, c.arguments] for c in calls]) if calls else None,
        result.call_id if result else None,
        bool(result and result.is_error),
        msg.speaker,
        json.dumps(images) if images else None,
        time.time(),
        user_id,
        msg.quote,
        json.dumps(reasoning) if reasoning else None,
        None if trusted else msg.provenance.trust.value,  # NULL: trusted (and every older row)
        None if trusted else msg.provenance.source,
    )


def _image(image: Image) -> dict[str, Any]:
    """An image as stored: its reference, never its bytes (those are fetched again)."""
    stored: dict[str, Any] = {"type": image.media_type, "url": image.url, "name": image.name}
    if image.ref is not None:
        stored |= {"ref": image.ref, "size": image.size}
    return stored


def stored(params: Sequence[Any]) -> Message:
    """The message `params` (of INSERT_MESSAGE) stores, as reading it back gives it."""
    return message_from_row(dict(zip(_PARAM_COLS, params, strict=True)))


_PARAM_COLS = (
    "conversation_id, role, content, tool_calls, tool_call_id, is_error, speaker, media, "
    "created_at, user_id, quote, reasoning, trust, source"
).split(", ")


def message_from_row(r: Row) -> Message:
    """A stored message (its columns by name) as the neutral Message."""
    role = Role(r["role"])
    parts: list[Part] = []
    if role is Role.TOOL:
        parts.append(ToolOutput(r["tool_call_id"] or "", r["content"] or "", bool(r["is_error"])))
    else:
        if r["reasoning"]:
            parts.extend(Reasoning(*x) for x in json.loads(r["reasoning"]))
        if r["content"]:
            parts.append(Text(r["content"]))
        for i in json.loads(r["media"]) if r["media"] else ():
            parts.append(
                Image(i["type"], None, i.get("url"), i.get("name", ""), i.get("ref"), i.get("size"))
            )
        if r["tool_calls"]:
            parts.extend(ToolCall(*c) for c in json.loads(r["tool_calls"]))
    return Message(role, parts, r["speaker"], r["quote"], provenance_of(r))


def provenance_of(r: Row) -> Provenance:
    """A stored message's provenance: a member's author is the row's user."""
    if not r["trust"]:
        return TRUSTED
    trust = Trust(r["trust"])
    return Provenance(trust, r["source"] or "", r["user_id"] if trust is Trust.MEMBER else None)


def dump_sources(sources: Sequence[Provenance]) -> str | None:
    """A summary's sources as stored (JSON: [trust, source, author] each; NULL: none)."""
    if not sources:
        return None
    return json.dumps([[p.trust.value, p.source, p.author] for p in sources])


def load_sources(raw: str | None) -> tuple[Provenance, ...]:
    return tuple(Provenance(Trust(t), s, a) for t, s, a in json.loads(raw)) if raw else ()
