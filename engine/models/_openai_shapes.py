"""The OpenAI chat-completions API's shapes: neutral messages as its request JSON, its answer
JSON as a :class:`ModelResponse`, its refusals as relaybot's errors.

Kept apart from the provider (engine/models/_openai.py), which decides how a request travels;
the speech, transcription and image parts read refusals the same way.
"""

from __future__ import annotations

import base64
from typing import Any

from engine.models._alternate import alternating
from engine.models._failures import status_failure
from engine.models._thoughts import FIELDS, reasoning, sent_back, split
from engine.models._types import (
    FinishReason,
    Image,
    Message,
    ModelResponse,
    Role,
    Text,
    ToolCall,
    Usage,
)
from tools.errors import ContextOverflow, LLMError, ModelAuthError, ModelRateLimited

TOOL_PICTURES = "(the pictures the tool results above returned)"
_FINISH = {
    "stop": FinishReason.STOP,
    "tool_calls": FinishReason.TOOL_CALLS,
    "function_call": FinishReason.TOOL_CALLS,
    "length": FinishReason.LENGTH,
    "content_filter": FinishReason.REFUSAL,
}
# How vLLM, llama.cpp, Ollama and LiteLLM word a request that does not fit the window.
_TOO_LONG = (
    "context_length_exceeded",
    "context length",
    "maximum context",
    "context window",
    "prompt is too long",
    "too many tokens",
    "exceeds the available context",
    "input is too long",
)


def parse(resp: Any) -> ModelResponse:
    """A chat completion (its JSON) as a ModelResponse; absent or null fields read as empty."""
    if not isinstance(resp, dict):
        raise LLMError(f"the model endpoint answered no completion: {resp!r:.200}")
    usage = read_usage(resp.get("usage"))
    model = resp.get("model") or ""
    choices = resp.get("choices") or []
    if not choices:
        return ModelResponse(None, [], FinishReason.OTHER, usage, model)
    choice = choices[0] or {}
    msg = choice.get("message") or {}
    calls = [
        ToolCall(c.get("id") or "", fn.get("name") or "", fn.get("arguments") or "")
        for c in msg.get("tool_calls") or []
        if (c.get("type") or "function") == "function" and (fn := c.get("function") or {})
    ]
    text = msg.get("content") or msg.get("refusal")
    field = next((f for f in FIELDS if msg.get(f)), None)
    thoughts = msg[field] if field else ""
    if text and "think>" in text:  # thoughts inline: taken out of the answer
        text, inline = split(text)
        thoughts = thoughts or inline
    finish = finish_reason(choice.get("finish_reason"))
    return ModelResponse(text, calls, finish, usage, model, reasoning(thoughts, field))


def to_openai(system: str, messages: Any, *, reasoning_back: bool = False) -> list[dict[str, Any]]:
    """Neutral messages as the chat-completions `messages` list: the system prompt once, first,
    then messages as strict chat templates accept them (engine/models/_alternate.py); with
    `reasoning_back`, an assistant message of the turn in progress with the reasoning field its
    thoughts came in (engine/models/_thoughts.py)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    shown: list[Image] = []  # tool results' pictures: a tool message takes text alone
    for m in alternating(messages):
        if m.role is not Role.TOOL and shown:
            out.append(_tool_pictures(shown))
            shown = []
        out.append(_message(m))
        if m.role is Role.TOOL:
            shown += m.images
    if shown:
        out.append(_tool_pictures(shown))
    if reasoning_back:
        _reasoning_back(messages, out)
    return out


def _reasoning_back(messages: Any, out: list[dict[str, Any]]) -> None:
    """Each assistant message after the newest user message gets its reasoning field back."""
    sent = [o for o in out if o["role"] != "system"]
    newest = max((i for i, o in enumerate(sent) if o["role"] == "user"), default=-1)
    mine = [m for m in messages if m.role is Role.ASSISTANT and m.tool_calls]
    theirs = [o for o in sent[newest + 1 :] if o["role"] == "assistant" and o.get("tool_calls")]
    for o, m in zip(reversed(theirs), reversed(mine), strict=False):
        for r in m.reasoning:
            o.update(sent_back(r))


def _message(m: Message) -> dict[str, Any]:
    if m.role is Role.TOOL:
        result = m.result
        assert result is not None, "a tool message carries a tool result"
        return {"role": "tool", "tool_call_id": result.call_id, "content": result.text}
    if m.role is Role.ASSISTANT:
        out: dict[str, Any] = {"role": "assistant", "content": m.text}
        if calls := m.tool_calls:
            out["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in calls
            ]
        return out
    if not m.images:
        return {"role": "user", "content": m.text or ""}
    content: list[dict[str, Any]] = []
    for part in m.parts:
        if isinstance(part, Text):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, Image):
            content.append({"type": "image_url", "image_url": {"url": _image_url(part)}})
    return {"role": "user", "content": content}


def _tool_pictures(images: list[Image]) -> dict[str, Any]:
    """The pictures the tool results just before returned, as a user message after them all
    (the API takes pictures only from a user)."""
    content: list[dict[str, Any]] = [{"type": "text", "text": TOOL_PICTURES}]
    content += [{"type": "image_url", "image_url": {"url": _image_url(i)}} for i in images]
    return {"role": "user", "content": content}


def _image_url(image: Image) -> str:
    if image.data is not None:
        return f"data:{image.media_type};base64,{base64.b64encode(image.data).decode()}"
    return image.url or ""


def finish_reason(reason: str | None) -> FinishReason:
    if reason is None:
        return FinishReason.OTHER
    return _FINISH.get(reason, FinishReason.OTHER)


def read_usage(raw: Any) -> Usage:
    """Usage from a typed chunk's or a JSON answer's ``usage`` (reasoning tokens apart)."""
    if raw is None:
        return Usage()
    if isinstance(raw, dict):
        cached = (raw.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        thought = (raw.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
        prompt, completion = raw.get("prompt_tokens") or 0, raw.get("completion_tokens") or 0
        return Usage(prompt, completion, cached, 0, thought)
    details = getattr(raw, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) or 0
    out = getattr(raw, "completion_tokens_details", None)
    thought = getattr(out, "reasoning_tokens", None) or 0
    return Usage(raw.prompt_tokens or 0, raw.completion_tokens or 0, cached, 0, thought)


def status_error(status: int, body: Any, message: str) -> LLMError:
    """A refusal as relaybot's error, from its status, body (the JSON, or the SDK's reading of
    it: the ``error`` object) and message."""
    err = body.get("error", body) if isinstance(body, dict) else body
    reason = str(message)[:300]
    code = None
    if isinstance(err, dict):
        if err.get("message"):
            reason = str(err["message"])[:300]
        if isinstance(err.get("code"), str):
            code = err["code"]
    elif isinstance(err, str) and err:
        reason = err[:300]
    detail = f"the model endpoint answered {status}: {reason}"
    if code == "context_length_exceeded" or (
        status in (400, 413) and any(w in detail.lower() for w in _TOO_LONG)
    ):
        return ContextOverflow(detail)
    if status in (401, 403):
        return ModelAuthError(detail)
    if status == 429:
        return ModelRateLimited(detail)
    return status_failure(status, detail)


def sdk_status_error(exc: Any) -> LLMError:
    """The SDK's APIStatusError as relaybot's error (its body is the ``error`` object)."""
    return status_error(exc.status_code, exc.body, exc.message)
