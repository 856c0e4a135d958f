"""Messages every chat template accepts: one place, applied before a provider maps a request.

Strict chat templates (Gemma's, Mistral's, Command-R's and others, as llama.cpp, vLLM and Ollama
run them) refuse a conversation whose roles do not alternate, and many refuse empty content.
relaybot's stored history breaks that in ordinary ways: messages written while the model was
down follow each other with no answer between them, a turn cut off after its tool results has
no answer, a background result joins an answer. So every request is shaped here:

- consecutive user messages become one (their texts joined by a blank line, images kept), and
  consecutive assistant messages too (texts joined, tool calls kept in order);
- a user message right after a tool result (the answer to it was never given, or it came from
  a background job after the answer) gets an assistant message before it, so user and assistant
  still alternate whether a template skips tool messages and calls (Mistral's) or renders them
  as turns of their own (llama.cpp's fallback for templates without tools, e.g. Gemma's);
- the first message is a user message (a placeholder when the history was cut before one);
- no message is empty: blank text parts are left out, a message with nothing left is dropped
  (a blank newest message and a blank tool result carry a placeholder instead), a user message
  of images alone gets a text part.

The system prompt travels apart (:attr:`ModelRequest.system`), so each provider sends it once,
first. Only what is sent changes: the store keeps every message as it was.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.models._types import Image, Message, Part, Reasoning, Role, Text, ToolCall, ToolOutput

EARLIER = "(earlier messages are not shown)"
EMPTY_MESSAGE = "(empty message)"
NO_OUTPUT = "(no output)"
NO_REPLY = "(no reply to the above)"


def alternating(messages: Sequence[Message], *, reply_after_tools: bool = True) -> list[Message]:
    """`messages` as strict templates accept them (see the module's docstring). Anthropic's API
    takes a tool result and the next user message in one user turn: `reply_after_tools` False
    leaves out the assistant message between them."""
    out: list[Message] = []
    for original in messages:
        msg = _without_blanks(original)
        if msg is None:
            continue
        last = out[-1] if out else None
        if last is not None and last.role is msg.role and msg.role is not Role.TOOL:
            out[-1] = _joined(last, msg)
            continue
        if (
            reply_after_tools
            and msg.role is Role.USER
            and last is not None
            and last.role is Role.TOOL
        ):
            out.append(Message.assistant(NO_REPLY))
        out.append(msg)
    if messages and messages[-1].role is Role.USER and (not out or out[-1].role is not Role.USER):
        out.append(Message.user(EMPTY_MESSAGE))  # the newest message was blank
    if out and out[0].role is not Role.USER:
        out.insert(0, Message.user(EARLIER))
    return [_with_text(m) for m in out]


def _without_blanks(msg: Message) -> Message | None:
    """`msg` without blank text parts (a blank tool result says so); None when nothing is left."""
    if msg.role is Role.TOOL:
        result = msg.result
        if result is not None and not result.text.strip():
            return Message(Role.TOOL, [ToolOutput(result.call_id, NO_OUTPUT, result.is_error)])
        return msg
    parts = [p for p in msg.parts if not (isinstance(p, Text) and not p.text.strip())]
    if not parts:
        return None
    return msg if len(parts) == len(msg.parts) else Message(msg.role, parts, msg.speaker)


def _with_text(msg: Message) -> Message:
    """A user message of images alone gets a text part: templates render text content."""
    if msg.role is not Role.USER or any(isinstance(p, Text) for p in msg.parts):
        return msg
    return Message(msg.role, [Text(EMPTY_MESSAGE), *msg.parts], msg.speaker)


def _joined(a: Message, b: Message) -> Message:
    """Two messages of one role as one: reasoning first (as the APIs want it), texts joined by a
    blank line, the rest in order."""
    thoughts: list[Part] = [p for m in (a, b) for p in m.parts if isinstance(p, Reasoning)]
    texts = [p.text for m in (a, b) for p in m.parts if isinstance(p, Text)]
    images: list[Part] = [p for m in (a, b) for p in m.parts if isinstance(p, Image)]
    calls: list[Part] = [p for m in (a, b) for p in m.parts if isinstance(p, ToolCall)]
    parts: list[Part] = [Text("\n\n".join(texts))] if texts else []
    return Message(a.role, [*thoughts, *parts, *images, *calls])
