"""The Anthropic Messages API's shapes: a neutral request as the API's fields.

The translation of a neutral request:

- the system prompt goes in the top-level ``system`` field, as one text block;
- a tool spec becomes ``{name, description, input_schema}``;
- a user message becomes a user turn of text and image blocks (inline bytes as base64, URLs
  as URL sources); an assistant message an assistant turn of its thinking blocks, then text and
  ``tool_use`` blocks (the stored argument text parsed into ``input``); a tool message a
  ``tool_result`` block (``is_error`` when the tool failed) in a user turn;
- consecutive messages of one role are merged into one turn (thinking blocks first), so
  parallel tool results travel in one user turn and a background result after an answer joins
  that answer's turn;
- what the API refuses is avoided: blank text is left out (a blank newest message becomes a
  placeholder), a history cut before its first user message starts with a placeholder user
  turn, and an id with other characters than letters, digits, ``_`` and ``-`` is rewritten,
  the same way in a call and in its result;
- a history with tool blocks sent without tools (the iteration bound's last request) declares
  the tools it used, with ``tool_choice`` none: the API refuses tool blocks without tools;
- prompt caching: the tool definitions, the system prompt and the newest message are marked
  cacheable, so a chat pays full price for them once per cache lifetime and each request
  of a turn reads the history before it from the cache.

Extended thinking (`thinking`: a budget of tokens): the ``thinking`` and ``redacted_thinking``
blocks the API gave, signatures intact, go back verbatim at the start of their assistant turn
(the API refuses a tool loop's turn without them, or with a signature changed). Another
provider's reasoning is never sent. A tool loop begun without thinking (on another provider,
before a failover) cannot be continued with it, so such a request goes without thinking, and
so does every thinking block then (the API takes none without it).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Sequence
from typing import Any

from engine.models._alternate import alternating
from engine.models._types import (
    Image,
    Message,
    ModelRequest,
    Reasoning,
    Role,
    Text,
    ToolCall,
    ToolOutput,
    ToolSpec,
    sanitised,
)

API = "anthropic"
CACHE = {"type": "ephemeral"}
EMPTY_MESSAGE = "(empty message)"
NO_OUTPUT = "(no output)"
EARLIER = "(earlier messages are not shown)"
THINKING = ("thinking", "redacted_thinking")

_NOT_AN_ID = re.compile(r"[^A-Za-z0-9_-]")


def to_anthropic(
    request: ModelRequest, *, cache: bool = True, thinking: int | None = None
) -> dict[str, Any]:
    """The Messages API fields for `request`: system, messages and tools (with tool_choice),
    and ``thinking`` with its budget when `thinking` is set and the tool loop allows it."""
    turns = _turns(alternating(request.messages, reply_after_tools=False))
    if thinking is not None and _loop_without_thinking(turns):
        thinking = None
    if thinking is None:
        for turn in turns:
            turn["content"] = [b for b in turn["content"] if b["type"] not in THINKING]
        turns = [t for t in turns if t["content"]]
    out: dict[str, Any] = {"messages": turns}
    if thinking is not None:
        out["thinking"] = {"type": "enabled", "budget_tokens": thinking}
    if request.system:
        block: dict[str, Any] = {"type": "text", "text": request.system}
        out["system"] = [{**block, "cache_control": CACHE}] if cache else [block]
    tools = [_tool(t) for t in request.tools]
    if not tools:  # the API refuses tool blocks in a request without tools
        used = dict.fromkeys(p.name for m in request.messages for p in m.tool_calls)
        if used:
            tools = [{"name": n, "input_schema": {"type": "object"}} for n in used]
            out["tool_choice"] = {"type": "none"}
    if tools:
        if cache:
            tools[-1] = {**tools[-1], "cache_control": CACHE}
        out["tools"] = tools
    if cache and out["messages"]:
        last = out["messages"][-1]["content"]
        last[-1] = {**last[-1], "cache_control": CACHE}
    return out


def _tool(spec: ToolSpec) -> dict[str, Any]:
    return {"name": spec.name, "description": spec.description, "input_schema": spec.parameters}


def _turns(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Neutral messages as alternating user and assistant turns."""
    turns: list[dict[str, Any]] = []
    for m in messages:
        role = "assistant" if m.role is Role.ASSISTANT else "user"
        blocks = _blocks(m)
        if not blocks:
            continue  # nothing but blank text: the API refuses an empty turn
        if turns and turns[-1]["role"] == role:
            merged = turns[-1]["content"] + blocks
            turns[-1]["content"] = [b for b in merged if b["type"] in THINKING] + [
                b for b in merged if b["type"] not in THINKING
            ]
        else:
            turns.append({"role": role, "content": blocks})
    if turns and turns[0]["role"] == "assistant":  # the history was cut before a user message
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": EARLIER}]})
    if not turns or turns[-1]["role"] == "assistant":  # the newest message was blank
        turns.append({"role": "user", "content": [{"type": "text", "text": EMPTY_MESSAGE}]})
    return turns


def _blocks(m: Message) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in m.parts:
        match part:
            case Reasoning(api=api, item=item) if api == API and item:
                out.append(json.loads(item))
            case Text(text=text) if text.strip():
                out.append({"type": "text", "text": text})
            case Image() if m.role is Role.USER:
                out.append({"type": "image", "source": _image_source(part)})
            case ToolCall():
                args = json.loads(sanitised(part).arguments)
                out.append(
                    {"type": "tool_use", "id": _id(part.id), "name": part.name, "input": args}
                )
            case ToolOutput():
                said = part.text if part.text.strip() else NO_OUTPUT
                result: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": _id(part.call_id),
                    "content": said,
                }
                if m.images:  # the pictures a tool returned go in its result
                    result["content"] = [{"type": "text", "text": said}] + [
                        {"type": "image", "source": _image_source(i)} for i in m.images
                    ]
                if part.is_error:
                    result["is_error"] = True
                out.append(result)
    return out


def _image_source(image: Image) -> dict[str, Any]:
    if image.data is not None:
        data = base64.b64encode(image.data).decode()
        return {"type": "base64", "media_type": image.media_type, "data": data}
    return {"type": "url", "url": image.url or ""}


def _id(call_id: str) -> str:
    return _NOT_AN_ID.sub("_", call_id) or "call"


def _loop_without_thinking(turns: list[dict[str, Any]]) -> bool:
    """Whether the request goes on with a tool loop whose assistant turn has no thinking block
    (begun on another provider, or without thinking): the API refuses thinking there."""
    if len(turns) < 2 or turns[-1]["role"] != "user":
        return False
    if not any(b["type"] == "tool_result" for b in turns[-1]["content"]):
        return False
    turn = turns[-2]["content"]
    return not turn or turn[0]["type"] not in THINKING


def thinking_blocks(content: Sequence[Any]) -> list[Reasoning]:
    """The thinking blocks of an answer, as reasoning parts carrying them verbatim."""
    found = []
    for block in content:
        if block.type == "thinking":
            item = {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
            found.append(Reasoning(API, json.dumps(item), block.thinking))
        elif block.type == "redacted_thinking":
            item = {"type": "redacted_thinking", "data": block.data}
            found.append(Reasoning(API, json.dumps(item), ""))
    return found
