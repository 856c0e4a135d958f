"""What a turn sends the model: the system prompt, the history as the model should see it.

The history is shaped here (pairing repaired, the quotes of the messages being answered shown,
group speakers named) before every request; what of it fits the model's window is decided first
by the context budget (engine/context/_budget.py).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from engine.models import Message, Role, Text, ToolOutput

log = logging.getLogger(__name__)

NO_RESULT = "No result was recorded for this call."


# What the user reads under an answer the length limit cut (engine/loop adds it). It is stored
# with the answer but not sent back: a model shown it imitates it.
CUT_NOTE = "\n\n[…cut off by the length limit: say “continue” for the rest]"


def for_model(history: Sequence[Message]) -> list[Message]:
    """The history as sent: pairing repaired, the messages being answered with what they reply
    to, each group message prefixed with its speaker, the note under a cut answer left out."""
    out = ensure_pairing(list(history))
    out = _quotes_of_this_turn(out)
    if any(m.speaker for m in out):
        out = [_named(m) if m.speaker else m for m in out]
    if any(m.role is Role.ASSISTANT and (m.text or "").endswith(CUT_NOTE) for m in out):
        out = [_uncut(m) for m in out]
    return out


def _quotes_of_this_turn(history: list[Message]) -> list[Message]:
    """The user messages after the last answer (those this turn answers) with their quote
    before their text; earlier quotes are not sent again (engine/chat/_intake/_quotes.py)."""
    start = next((i + 1 for i in range(len(history) - 1, -1, -1) if history[i].is_answer), 0)
    if not any(m.quote for m in history[start:]):
        return history
    out = history[:start]
    for msg in history[start:]:
        if msg.quote and msg.role is Role.USER:
            parts = list(msg.parts)
            for i, part in enumerate(parts):
                if isinstance(part, Text):
                    parts[i] = Text(f"{msg.quote}\n\n{part.text}")
                    break
            else:
                parts.insert(0, Text(msg.quote))
            msg = Message(msg.role, parts, msg.speaker)
        out.append(msg)
    return out


def _uncut(msg: Message) -> Message:
    parts = [Text(p.text.removesuffix(CUT_NOTE)) if isinstance(p, Text) else p for p in msg.parts]
    return Message(msg.role, parts, msg.speaker) if msg.role is Role.ASSISTANT else msg


def _named(msg: Message) -> Message:
    """A user message of a group, prefixed with who wrote it (by name, never by user id)."""
    parts = list(msg.parts)
    for i, part in enumerate(parts):
        if isinstance(part, Text):
            parts[i] = Text(f"[{msg.speaker}] {part.text}")
            break
    return Message(msg.role, parts)


def ensure_pairing(history: list[Message]) -> list[Message]:
    """Every assistant tool call followed by exactly one result; orphans dropped.

    Providers reject a history that breaks this. A repaired copy is returned (and logged once
    per call it repairs: the same history is sent again with every later turn of the chat);
    the common case returns `history` itself.
    """
    out: list[Message] = []
    open_ids: list[str] = []
    seen: set[str] = set()
    repaired: list[str] = []  # the call ids repaired

    def close_open() -> None:
        for cid in open_ids:
            out.append(Message(Role.TOOL, [ToolOutput(cid, NO_RESULT, is_error=True)]))
            repaired.append(cid)
        open_ids.clear()

    for msg in history:
        if msg.role is Role.TOOL:
            result = msg.result
            if result is not None and result.call_id in open_ids:
                open_ids.remove(result.call_id)
                out.append(msg)
            else:
                repaired.append(result.call_id if result is not None else "")  # orphan, twice
            continue
        close_open()
        calls = msg.tool_calls
        if msg.role is Role.ASSISTANT and calls:
            fresh = [c for c in calls if c.id not in seen]
            if len(fresh) != len(calls):
                repaired += [c.id for c in calls if c.id in seen]
                if not fresh and not msg.text:
                    continue
                msg = Message.assistant(msg.text, fresh, msg.reasoning)
            seen.update(c.id for c in fresh)
            open_ids.extend(c.id for c in fresh)
        out.append(msg)
    close_open()
    if not repaired:
        return history
    if any(cid not in _REPORTED for cid in repaired):
        log.error("conversation history broke the tool-call pairing; repaired before sending")
        _REPORTED.update(dict.fromkeys(repaired))
        while len(_REPORTED) > _REPORTED_MAX:
            del _REPORTED[next(iter(_REPORTED))]
    return out


_REPORTED: dict[str, None] = {}  # call ids whose repair was logged (the oldest forgotten)
_REPORTED_MAX = 10_000
