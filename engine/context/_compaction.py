"""Folding old turns into a running summary the model writes itself.

The summary is updated incrementally: one request holds the summary so far and the next turns
as a plain transcript, and its answer replaces the summary. The request carries no tools and
its own short prompt, so the model writes prose instead of calling anything, and a transcript
(not the raw messages) means no provider can object to tool calls without definitions.

History is only ever cut where a turn starts: at a user message with every earlier tool call
answered before it, so a call and its result always travel together, folded or sent.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from engine import metrics
from engine.models import Message, Model, ModelRequest, ModelResponse, Role

SUMMARY_PROMPT = (
    "You maintain the running summary of a chat between its users and an assistant. You get "
    "the summary so far and the next part of the conversation. Write the new summary: it "
    "replaces the old one, so carry over what still matters from it and add what the new part "
    "brings. Keep facts people stated about themselves, names, numbers, dates, decisions, "
    "promises, open questions and what tools found; leave out greetings and small talk. Write "
    "plain sentences, in the conversation's language, at most {words} words, with no preamble."
)
_NONE_YET = "(none yet)"
_TEXT_CHARS = 2_000  # one user or assistant message in a transcript
_ARGS_CHARS = 300


def turn_starts(history: Sequence[Message]) -> list[int]:
    """Where turns start: user messages with no tool call still open before them."""
    starts: list[int] = []
    open_calls: set[str] = set()
    for i, msg in enumerate(history):
        if msg.role is Role.USER and not open_calls:
            starts.append(i)
        elif msg.role is Role.ASSISTANT:
            open_calls.update(c.id for c in msg.tool_calls)
        elif msg.role is Role.TOOL and msg.result is not None:
            open_calls.discard(msg.result.call_id)
    return starts


def cut(text: str, limit: int) -> str:
    """`text` within `limit` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n…[{len(text) - limit:,} more characters cut]"


def transcript(messages: Sequence[Message], result_chars: int) -> str:
    """The messages as plain lines for the summariser; long texts and results cut."""
    names: dict[str, str] = {}
    lines: list[str] = []
    for msg in messages:
        if msg.role is Role.USER:
            who = f"User ({msg.speaker})" if msg.speaker else "User"
            text = cut(msg.text or "", _TEXT_CHARS)
            images = len(msg.images)
            lines.append(f"{who}: {text}" + (f" [{images} image(s)]" if images else ""))
        elif msg.role is Role.ASSISTANT:
            if msg.text:
                lines.append(f"Assistant: {cut(msg.text, _TEXT_CHARS)}")
            for call in msg.tool_calls:
                names[call.id] = call.name
                lines.append(f"Assistant called {call.name}({cut(call.arguments, _ARGS_CHARS)})")
        elif (result := msg.result) is not None:
            kind = "error from" if result.is_error else "result of"
            name = names.get(result.call_id, "a tool")
            lines.append(f"Tool {kind} {name}: {cut(result.text, result_chars)}")
    return "\n".join(lines)


def summary_request(
    previous: str | None, part: str, words: int, max_tokens: int | None = None
) -> ModelRequest:
    """The request for a new summary; `max_tokens` is its own output budget (the model's
    configured cap is for answers)."""
    ask = f"Summary so far:\n{previous or _NONE_YET}\n\nNext part of the conversation:\n{part}"
    system = SUMMARY_PROMPT.format(words=words)
    return ModelRequest(system, [Message.user(ask)], max_output_tokens=max_tokens)


async def summarise(
    model: Model,
    previous: str | None,
    part: str,
    *,
    words: int,
    max_chars: int,
    max_tokens: int | None = None,
) -> tuple[str, ModelRequest, ModelResponse]:
    """The new summary (cut to `max_chars`), the request that asked for it and its reply (whose
    finish reason says whether the length limit cut it)."""
    request = summary_request(previous, part, words, max_tokens)
    reply = await metrics.model_request(model, request)
    text = (reply.text or "").strip()
    if not text:  # a model that answers nothing keeps what there was
        text = previous or ""
    return cut(text, max_chars), request, reply


def summary_block(text: str) -> str:
    """How the summary reaches the model: appended to the system prompt."""
    return "Earlier in this conversation, in brief (the older messages are not shown):\n" + text


def with_summary(system: str, text: str | None) -> str:
    if not text:
        return system
    return f"{system}\n\n{summary_block(text)}".strip()


def cut_result(msg: Message, chars: int) -> Message:
    """A tool message with its result cut to `chars` (any other message as it is)."""
    result = msg.result
    if msg.role is not Role.TOOL or result is None or len(result.text) <= chars:
        return msg
    cut_text = cut(result.text, chars)
    return Message.tool_result(
        result.call_id, cut_text, is_error=result.is_error, provenance=msg.provenance
    )


def chunks(messages: Sequence[Message], chars: int, result_chars: int) -> list[tuple[int, int]]:
    """Whole turns grouped so each group's transcript fits `chars` (a bigger turn alone)."""
    starts = [*turn_starts(messages), len(messages)]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    groups: list[tuple[int, int]] = []
    begin, size = 0, 0
    for a, b in itertools.pairwise(starts):
        turn = len(transcript(messages[a:b], result_chars))
        if size and size + turn > chars:
            groups.append((begin, a))
            begin, size = a, 0
        size += turn
    if begin < len(messages):
        groups.append((begin, len(messages)))
    return groups
