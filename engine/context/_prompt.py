"""What a turn sends the model: the system prompt, the history as the model should see it.

The history is shaped here (pairing repaired, group speakers named) before every request; what
of it fits the model's window is decided first by the context budget (engine/context/_budget.py).
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
    """The history as sent: pairing repaired, each group message prefixed with its speaker,
    the note under a cut answer left out."""
    out = ensure_pairing(list(history))
    if any(m.speaker for m in out):
        out = [_named(m) if m.speaker else m for m in out]
    if any(m.role is Role.ASSISTANT and (m.text or "").endswith(CUT_NOTE) for m in out):
        out = [_uncut(m) for m in out]
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

    Providers reject a history that breaks this. A repaired copy is returned (and logged);
    the common case returns `history` itself.
    """
    out: list[Message] = []
    open_ids: list[str] = []
    seen: set[str] = set()
    repaired = False

    def close_open() -> None:
        nonlocal repaired
        for cid in open_ids:
            out.append(Message(Role.TOOL, [ToolOutput(cid, NO_RESULT, is_error=True)]))
            repaired = True
        open_ids.clear()

    for msg in history:
        if msg.role is Role.TOOL:
            result = msg.result
            if result is not None and result.call_id in open_ids:
                open_ids.remove(result.call_id)
                out.append(msg)
            else:
                repaired = True  # an orphan or duplicate result
            continue
        close_open()
        calls = msg.tool_calls
        if msg.role is Role.ASSISTANT and calls:
            fresh = [c for c in calls if c.id not in seen]
            if len(fresh) != len(calls):
                repaired = True
                if not fresh and not msg.text:
                    continue
                msg = Message.assistant(msg.text, fresh)
            seen.update(c.id for c in fresh)
            open_ids.extend(c.id for c in fresh)
        out.append(msg)
    close_open()
    if not repaired:
        return history
    log.error("conversation history broke the tool-call pairing; repaired before sending")
    return out
