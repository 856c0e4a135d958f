"""The OpenAI Responses API's shapes: neutral messages as its ``input`` items, its answer as a
:class:`ModelResponse`.

Items, not messages: a user message is a ``message`` item of ``input_text`` and ``input_image``
parts, an assistant message its ``reasoning`` items, then its text, then a ``function_call`` item
per call, and a tool result a ``function_call_output``. A reasoning item travels in the
assistant message's :class:`Reasoning` part as the API gave it (with the id of the response it
came in, for ``previous_response_id``) and goes back verbatim, only to this API: the API refuses
a function call of the tool loop in progress without the reasoning item that preceded it, and
another provider's reasoning means nothing here. Reasoning items of earlier turns (before the
newest user message) are not sent: the API drops them from the context anyway.

Tools are strict by default on this API: a tool whose schema strict mode can express (every
property required, no additional properties: the registry's ``strict_parameters``) is sent
strict, any other with ``strict: false``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from engine.models._alternate import alternating
from engine.models._types import (
    FinishReason,
    Image,
    Message,
    ModelResponse,
    Reasoning,
    Role,
    Text,
    ToolCall,
    ToolSpec,
    Usage,
)
from tools.errors import LLMError

API = "responses"


def to_input(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Neutral messages as the ``input`` list (the system prompt goes in ``instructions``)."""
    shaped = alternating(messages, reply_after_tools=False)
    newest_user = max((i for i, m in enumerate(shaped) if m.role is Role.USER), default=-1)
    out: list[dict[str, Any]] = []
    for i, m in enumerate(shaped):
        if m.role is Role.TOOL:
            result = m.result
            assert result is not None, "a tool message carries a tool result"
            out.append(_output(m))
        elif m.role is Role.ASSISTANT:
            if i > newest_user:
                out += [item for r in m.reasoning if (item := reasoning_item(r)) is not None]
            if m.text:
                out.append({"role": "assistant", "content": m.text})
            out += [
                {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
                for c in m.tool_calls
            ]
        else:
            out.append({"role": "user", "content": _user_content(m)})
    return out


def outputs(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Tool results alone, as the input going on from the response that called them."""
    return [_output(m) for m in messages if m.result is not None]


def _output(m: Message) -> dict[str, Any]:
    """A tool message as its output item: its text, and the pictures the tool returned."""
    result = m.result
    assert result is not None, "a tool message carries a tool result"
    output: str | list[dict[str, Any]] = result.text
    if m.images:
        output = [{"type": "input_text", "text": result.text}] + [
            {"type": "input_image", "image_url": _image_url(i), "detail": "auto"} for i in m.images
        ]
    return {"type": "function_call_output", "call_id": result.call_id, "output": output}


def reasoning_item(r: Reasoning) -> dict[str, Any] | None:
    """The API's own reasoning item a part carries; None for another API's reasoning."""
    if r.api != API or not r.item:
        return None
    item = json.loads(r.item).get("item")
    return item if isinstance(item, dict) else None


def response_id(r: Reasoning) -> str | None:
    """The id of the response a reasoning part of this API came in."""
    if r.api != API or not r.item:
        return None
    found = json.loads(r.item).get("response")
    return found if isinstance(found, str) else None


def _user_content(m: Message) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    for part in m.parts:
        if isinstance(part, Text):
            content.append({"type": "input_text", "text": part.text})
        elif isinstance(part, Image):
            content.append({"type": "input_image", "image_url": _image_url(part), "detail": "auto"})
    return content


def _image_url(image: Image) -> str:
    if image.data is not None:
        return f"data:{image.media_type};base64,{base64.b64encode(image.data).decode()}"
    return image.url or ""


def tool(spec: ToolSpec) -> dict[str, Any]:
    """A tool definition: strict where its schema allows, else explicitly not."""
    strict = spec.strict_parameters is not None
    return {
        "type": "function",
        "name": spec.name,
        "description": spec.description,
        "parameters": spec.strict_parameters if strict else spec.parameters,
        "strict": strict,
    }


def parse(resp: Any) -> ModelResponse:
    """A Response (its JSON) as a ModelResponse: texts joined, calls, reasoning items kept."""
    if not isinstance(resp, dict) or not isinstance(resp.get("output"), list):
        raise LLMError(f"the model endpoint answered no response: {resp!r:.200}")
    texts: list[str] = []
    refused = False
    calls: list[ToolCall] = []
    thoughts: list[Reasoning] = []
    rid = resp.get("id") or ""
    for item in resp["output"]:
        kind = item.get("type")
        if kind == "reasoning":
            summary = "\n\n".join(s.get("text") or "" for s in item.get("summary") or [])
            kept = json.dumps({"response": rid, "item": item}, separators=(",", ":"))
            thoughts.append(Reasoning(API, kept, summary))
        elif kind == "message":
            for part in item.get("content") or []:
                if part.get("type") == "output_text":
                    texts.append(part.get("text") or "")
                elif part.get("type") == "refusal":
                    texts.append(part.get("refusal") or "")
                    refused = True
        elif kind == "function_call":
            calls.append(
                ToolCall(
                    item.get("call_id") or "", item.get("name") or "", item.get("arguments") or ""
                )
            )
    finish = _finish(resp, bool(calls), refused)
    usage = read_usage(resp.get("usage"))
    model = resp.get("model") or ""
    return ModelResponse("".join(texts) or None, calls, finish, usage, model, tuple(thoughts))


def _finish(resp: dict[str, Any], called: bool, refused: bool) -> FinishReason:
    if resp.get("status") == "incomplete":
        reason = (resp.get("incomplete_details") or {}).get("reason")
        return FinishReason.REFUSAL if reason == "content_filter" else FinishReason.LENGTH
    if refused:
        return FinishReason.REFUSAL
    return FinishReason.TOOL_CALLS if called else FinishReason.STOP


def read_usage(raw: Any) -> Usage:
    """Usage as the API counts it: cached input tokens and reasoning output tokens apart."""
    if not isinstance(raw, dict):
        return Usage()
    cached = (raw.get("input_tokens_details") or {}).get("cached_tokens") or 0
    reasoning = (raw.get("output_tokens_details") or {}).get("reasoning_tokens") or 0
    return Usage(raw.get("input_tokens") or 0, raw.get("output_tokens") or 0, cached, 0, reasoning)
