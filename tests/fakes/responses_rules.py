"""What OpenAI's Responses API refuses, in its words: the checks of the fake Responses server.

:func:`refusal` gives ``(message, param, code)`` of the 400 the real API answers a request body
with, or None when it takes it:

- an unknown parameter, at the top or in an input item ("Unknown parameter: 'input[2].foo'.");
- a reasoning item without ``encrypted_content`` in a request with ``store: false`` (nothing was
  kept to look it up by), or whose encrypted content is not what the server made ("could not be
  verified": tampered, or from another server);
- a ``function_call`` of the tool loop in progress (after the newest user message) that the
  server made after a reasoning item, sent back without that item before it ("…was provided
  without its required 'reasoning' item");
- a ``function_call_output`` without its call; an unknown ``previous_response_id``;
- a strict tool whose schema strict mode refuses (a property not required, or
  ``additionalProperties`` not false), and an image that is not one.

The server (tests/fakes/openai_responses.py) owns the secret the encrypted content is sealed
with and remembers which call came after which reasoning item, as OpenAI does.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

from tests.fakes.openai_server import _decode_image_url

TOP = {
    "model",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "store",
    "include",
    "reasoning",
    "max_output_tokens",
    "stream",
    "previous_response_id",
    "temperature",
    "top_p",
    "metadata",
    "text",
    "truncation",
    "user",
    "service_tier",
    "stream_options",
    "prompt_cache_key",
    "safety_identifier",
    "background",
    "max_tool_calls",
}
ITEM_KEYS = {
    "message": {"type", "role", "content", "id", "status"},
    "function_call": {"type", "call_id", "name", "arguments", "id", "status"},
    "function_call_output": {"type", "call_id", "output", "id", "status"},
    "reasoning": {"type", "id", "summary", "encrypted_content", "content", "status"},
}
PART_KEYS = {
    "input_text": {"type", "text"},
    "output_text": {"type", "text", "annotations", "logprobs"},
    "input_image": {"type", "image_url", "detail", "file_id"},
    "refusal": {"type", "refusal"},
}

Refusal = tuple[str, str | None, str | None]  # message, param, code


def seal(secret: bytes, item_id: str, summary: str) -> str:
    """The encrypted content of a reasoning item (opaque to the client, checked on return)."""
    payload = base64.b64encode(json.dumps([item_id, summary]).encode()).decode()
    mac = hmac.new(secret, payload.encode(), hashlib.sha256).hexdigest()
    return f"{payload}.{mac}"


def unsealed(secret: bytes, item_id: str, content: Any) -> bool:
    if not isinstance(content, str) or "." not in content:
        return False
    payload, mac = content.rsplit(".", 1)
    want = hmac.new(secret, payload.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(mac, want):
        return False
    return bool(json.loads(base64.b64decode(payload))[0] == item_id)


def refusal(
    body: dict[str, Any],
    *,
    secret: bytes,
    reasoned: Mapping[str, str],
    earlier: list[dict[str, Any]],
) -> Refusal | None:
    """Why the API refuses `body` (None: it does not). `reasoned` maps a call id the server
    made to its reasoning item's id; `earlier` is the items of ``previous_response_id``."""
    for key in body:
        if key not in TOP:
            return f"Unknown parameter: '{key}'.", key, "unknown_parameter"
    if "model" not in body:
        return "Missing required parameter: 'model'.", "model", "missing_required_parameter"
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list):
        return "Invalid type for 'input': expected a string or an array.", "input", None
    for i, item in enumerate(items):
        found = _item(item, f"input[{i}]", body, secret)
        if found is not None:
            return found
    return _pairs(earlier + items, len(earlier), reasoned) or _tools(body.get("tools") or [])


def _item(item: Any, where: str, body: dict[str, Any], secret: bytes) -> Refusal | None:
    if not isinstance(item, dict):
        return f"Invalid type for '{where}': expected an object.", where, None
    kind = item.get("type", "message" if "role" in item else None)
    keys = ITEM_KEYS.get(kind or "")
    if keys is None:
        return f"Invalid value: '{kind}'. Supported values are: ...", f"{where}.type", None
    for key in item:
        if key not in keys:
            return f"Unknown parameter: '{where}.{key}'.", f"{where}.{key}", "unknown_parameter"
    if kind == "reasoning":
        content = item.get("encrypted_content")
        if content is None and not body.get("store", True):
            return (
                f"Item with id '{item.get('id')}' not found. Items are not persisted when "
                "`store` is set to false. Try again with `store` set to true, or remove this "
                "item from your input.",
                "input",
                None,
            )
        if content is not None and not unsealed(secret, str(item.get("id")), content):
            return (
                f"The encrypted content for item {item.get('id')} could not be verified. "
                "Reason: Encrypted content could not be decrypted or parsed.",
                None,
                "invalid_encrypted_content",
            )
    if kind == "message" and isinstance(item.get("content"), list):
        for j, part in enumerate(item["content"]):
            found = _part(part, f"{where}.content[{j}]")
            if found is not None:
                return found
    return None


def _part(part: Any, where: str) -> Refusal | None:
    keys = PART_KEYS.get(part.get("type") if isinstance(part, dict) else "")
    if keys is None:
        return f"Invalid value: '{part}'. Supported values are: 'input_text', ...", where, None
    for key in part:
        if key not in keys:
            return f"Unknown parameter: '{where}.{key}'.", f"{where}.{key}", "unknown_parameter"
    if part["type"] == "input_image":
        try:
            _decode_image_url(part.get("image_url"))
        except ValueError as exc:
            return str(exc), f"{where}.image_url", "invalid_image"
    return None


def _pairs(items: list[dict[str, Any]], start: int, reasoned: Mapping[str, str]) -> Refusal | None:
    """Calls with their reasoning item (in the loop in progress) and results with their call."""
    newest_user = max(
        (i for i, it in enumerate(items) if it.get("role") == "user" and "type" not in it),
        default=-1,
    )
    reasoning_seen: set[str] = set()
    calls: set[str] = set()
    for i, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "reasoning":
            reasoning_seen.add(str(item.get("id")))
        elif kind == "message" and item.get("role") == "user":
            reasoning_seen.clear()
        elif kind == "function_call":
            calls.add(item.get("call_id"))
            rs = reasoned.get(item.get("call_id"))
            if i > newest_user and i >= start and rs is not None and rs not in reasoning_seen:
                fc = item.get("id") or "fc_" + rs.removeprefix("rs_")
                return (
                    f"Item '{fc}' of type 'function_call' was provided without its required "
                    f"'reasoning' item: '{rs}'.",
                    "input",
                    None,
                )
        elif kind == "function_call_output" and item.get("call_id") not in calls:
            return (
                f"No tool call found for function call output with call_id {item.get('call_id')}.",
                "input",
                None,
            )
    return None


def _tools(tools: list[Any]) -> Refusal | None:
    for i, t in enumerate(tools):
        if not isinstance(t, dict) or t.get("type") != "function" or not t.get("name"):
            return f"Missing required parameter: 'tools[{i}].name'.", f"tools[{i}].name", None
        if t.get("strict", True) is False:
            continue
        schema = t.get("parameters") or {}
        props = schema.get("properties") or {}
        prefix = f"Invalid schema for function '{t['name']}': In context=()"
        if schema.get("additionalProperties") is not False:
            return (
                f"{prefix}, 'additionalProperties' is required to be supplied and to be false.",
                f"tools[{i}].parameters",
                "invalid_function_parameters",
            )
        missing = [p for p in props if p not in (schema.get("required") or [])]
        if missing:
            return (
                f"{prefix}, 'required' is required to be supplied and to be an array including "
                f"every key in properties. Missing '{missing[0]}'.",
                f"tools[{i}].parameters",
                "invalid_function_parameters",
            )
    return None
