"""A fake Anthropic Messages API server for tests, strict where the real API is strict.

A real HTTP server (aiohttp) on 127.0.0.1, so the real ``anthropic`` SDK talks to it::

    from tests.fakes.anthropic_server import FakeAnthropic
    from tests.fakes.openai_server import text, tool_call   # one script language for both fakes

    async with FakeAnthropic() as llm:
        client = anthropic.AsyncAnthropic(base_url=llm.base_url, api_key="k", max_retries=0)
        llm.script(tool_call("add", {"a": 1, "b": 2}), text("3"))
        ...
        assert llm.requests[0]["messages"][-1]["role"] == "user"  # recorded JSON bodies

It shares the lifecycle, the script and the reply helpers of :mod:`tests.fakes.openai_server`
(``text``, ``tool_call(s)``, ``error``, ``hold``, callables, ``default``, ``wait_requests``);
OpenAI's finish reasons in a script are sent as their Anthropic counterparts (``stop`` →
``end_turn``, ``tool_calls`` → ``tool_use``, ``length`` → ``max_tokens``), and an error's type
follows its status (429 ``rate_limit_error``, 500 ``api_error``, 529 ``overloaded_error``, ...).
Tool call ids are ``toolu_01``, ``toolu_02``, ... unless the script names one.

A request the real API refuses gets its 400 ``invalid_request_error``, in its words: no
``anthropic-version`` header; a first turn that is not the user's; two turns of one role in a
row; a turn without content, or a blank text block; a ``tool_use`` without its ``tool_result``
at the start of the next turn, a ``tool_result`` without a ``tool_use`` in the turn before, a
repeated or malformed ``tool_use`` id; tool blocks in a request without tools; a tool name or
schema the API would not take; more than 4 ``cache_control`` marks; and, with
``context_window`` set, a prompt longer than that ("prompt is too long").

Extended thinking (a request with ``thinking`` enabled; ``thinks`` on by default): the answer
starts with a ``thinking`` block ("Thinking about: <newest user text>") whose ``signature`` is
sealed with the server's secret. As the real API, it refuses a budget under 1024 or not under
``max_tokens``; thinking blocks in a request without thinking enabled; a tool loop's final
assistant turn that does not start with its thinking block ("Expected `thinking` or
`redacted_thinking`, but found `text`"); and a thinking block whose signature it did not make
("Invalid `signature` in `thinking` block"). Streams carry ``thinking_delta`` and
``signature_delta`` events.

Usage counts 4 characters a token. Prompt caching is simulated: each ``cache_control`` mark ends
a prefix (tools, then system, then messages, marks themselves not counted); a prefix seen before
is read from the cache (``cache_read_input_tokens``), a new one written
(``cache_creation_input_tokens``); ``input_tokens`` is the rest, as the real API reports it.

Streams are Server-Sent Events with ``event:`` lines, as the API sends them: message_start,
ping, per block content_block_start / deltas (``text_delta``, ``input_json_delta``) /
content_block_stop, message_delta with the stop reason and output tokens, message_stop. With
``stream_errors`` set, an error scripted for a stream is sent the way the API reports an
overload mid-stream: HTTP 200, message_start, then an ``error`` event.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import re
import secrets
from collections.abc import Iterable
from typing import Any

from aiohttp import web

from tests.fakes.openai_server import (
    ErrorReply,
    FakeOpenAI,
    ReplyLike,
    TextReply,
    ToolCallsReply,
    _ShuttingDown,
    _split,
)

_JSON = "application/json"
_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
_STOP |= {"content_filter": "refusal"}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
_TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_IMAGE_TYPES = {"image/jpeg", "image/png", "image/gif", "image/webp"}


def echo(body: dict[str, Any]) -> TextReply:
    """Default reply: ``text("echo: <text of the last user turn>")``."""
    for msg in reversed(body.get("messages") or ()):
        if msg.get("role") == "user":
            content = msg.get("content")
            if isinstance(content, list):
                content = "".join(b.get("text", "") for b in content if b.get("type") == "text")
            return TextReply(f"echo: {content}")
    return TextReply("echo: ")


def tokens(value: Any) -> int:
    return max(1, len(json.dumps(value, ensure_ascii=False)) // 4)


class FakeAnthropic(FakeOpenAI):
    """Fake Anthropic server; use as ``async with FakeAnthropic() as llm``. See module doc."""

    def __init__(
        self,
        *,
        models: Iterable[str] = ("fake-model",),
        default: ReplyLike = echo,
        context_window: int | None = None,
        stream_errors: bool = False,
        **kw: Any,
    ) -> None:
        super().__init__(models=models, default=default, **kw)
        self.context_window = context_window
        self.stream_errors = stream_errors
        self.api_keys: list[str | None] = []
        self.versions: list[str | None] = []
        self._cache: set[str] = set()
        self._tool_ids = itertools.count(1)
        self._message_ids = itertools.count(1)
        self.thinks = True  # answers with a thinking block when thinking is enabled
        self.secret = secrets.token_bytes(16)

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self.port}"  # the SDK adds /v1/messages

    def _add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_get("/v1/models", self._list)

    # ---- handlers

    def _denied(self, request: web.Request) -> web.Response | None:
        bearer = request.headers.get("Authorization", "").removeprefix("Bearer ") or None
        key = request.headers.get("x-api-key") or bearer  # the API takes either
        self.api_keys.append(key)
        self.versions.append(request.headers.get("anthropic-version"))
        if self.api_key is not None and key != self.api_key:
            return _error(401, "invalid x-api-key")
        if not request.headers.get("anthropic-version"):
            return _error(400, "anthropic-version: header is required")
        return None

    async def _list(self, request: web.Request) -> web.Response:
        if (denied := self._denied(request)) is not None:
            return denied
        data = [
            {"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
            for m in self.models
        ]
        first, last = (self.models[0], self.models[-1]) if self.models else (None, None)
        return web.json_response(
            {"data": data, "has_more": False, "first_id": first, "last_id": last}
        )

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        if (denied := self._denied(request)) is not None:
            return denied
        try:
            body = json.loads(await request.read())
        except ValueError:
            return _error(400, "There was an error parsing the body of your request.")
        if not isinstance(body, dict):
            return _error(400, "The request body must be a JSON object.")
        problem = refusal(body) or thinking_refusal(body, self.secret)
        if problem is None and self.context_window is not None:
            size = tokens({k: body.get(k) for k in ("tools", "system", "messages")})
            if size > self.context_window:
                problem = f"prompt is too long: {size} tokens > {self.context_window} maximum"
        self.requests.append(body)
        if self._cond is not None:
            async with self._cond:
                self._cond.notify_all()
        if problem is not None:
            return _error(400, problem)
        if self.reject_unknown_models and body["model"] not in self.models:
            return _error(404, f"model: {body['model']}")
        picked = self._queue.popleft() if self._queue else self.default
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        try:
            reply = await self._resolve(picked, body)
        except _ShuttingDown:
            return _error(529, "Overloaded")
        streamed = bool(body.get("stream"))
        if isinstance(reply, ErrorReply):
            if streamed and self.stream_errors:
                return await self._sse(request, body, [], None, reply)
            kind = reply.type if reply.type in _ERROR_TYPES.values() else None
            return _error(reply.status, reply.message, kind, reply.headers)
        assert isinstance(reply, TextReply | ToolCallsReply), reply
        content = self._content(reply)
        if self.thinks and (body.get("thinking") or {}).get("type") == "enabled":
            said = f"Thinking about: {_newest_user_text(body)}"
            content.insert(
                0, {"type": "thinking", "thinking": said, "signature": seal(self.secret, said)}
            )
        stop = _STOP.get(reply.finish_reason, reply.finish_reason)
        if streamed:
            return await self._sse(request, body, content, stop)
        message = self._message(body, content, stop, self._token_usage(body, content))
        return web.Response(body=json.dumps(message).encode(), content_type=_JSON)

    # ---- replies

    def _content(self, reply: Any) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if reply.content:
            blocks.append({"type": "text", "text": reply.content})
        if isinstance(reply, ToolCallsReply):
            for call in reply.calls:
                args = json.loads(call.arguments) if call.arguments.strip() else {}
                if not isinstance(args, dict):
                    raise ValueError("the Messages API gives tool input as a JSON object")
                call_id = call.id or f"toolu_{next(self._tool_ids):02d}"
                blocks.append({"type": "tool_use", "id": call_id, "name": call.name, "input": args})
        return blocks

    def _token_usage(self, body: dict[str, Any], content: list[dict[str, Any]]) -> dict[str, int]:
        total = tokens({k: body.get(k) for k in ("tools", "system", "messages")})
        read = written = 0
        for digest, size in _prefixes(body):
            if digest in self._cache:
                read = max(read, size)
            else:
                self._cache.add(digest)
                written = max(written, size)
        written = max(0, written - read)
        return {
            "input_tokens": max(0, total - read - written),
            "output_tokens": tokens(content),
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": read,
        }

    def _message(
        self, body: dict[str, Any], content: list[dict[str, Any]], stop: str | None, usage: Any
    ) -> dict[str, Any]:
        return {
            "id": f"msg_{next(self._message_ids):04d}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }

    async def _sse(
        self,
        request: web.Request,
        body: dict[str, Any],
        content: list[dict[str, Any]],
        stop: str | None,
        error: ErrorReply | None = None,
    ) -> web.StreamResponse:
        usage = self._token_usage(body, content)
        start = self._message(body, [], None, {**usage, "output_tokens": 1})
        events = [_event("message_start", message=start), _event("ping")]
        if error is not None:
            kind = _ERROR_TYPES.get(error.status, "api_error")
            err = {"type": kind, "message": error.message}
            events.append(f"event: error\ndata: {json.dumps({'type': 'error', 'error': err})}\n\n")
        size = max(1, self.stream_chunk_chars)
        for index, block in enumerate(content if error is None else []):
            if block["type"] == "thinking":
                opened = {"type": "thinking", "thinking": "", "signature": ""}
                events.append(_event("content_block_start", index=index, content_block=opened))
                for piece in _split(block["thinking"], size):
                    delta = {"type": "thinking_delta", "thinking": piece}
                    events.append(_event("content_block_delta", index=index, delta=delta))
                delta = {"type": "signature_delta", "signature": block["signature"]}
                events.append(_event("content_block_delta", index=index, delta=delta))
            elif block["type"] == "text":
                events.append(
                    _event("content_block_start", index=index, content_block=block | {"text": ""})
                )
                for piece in _split(block["text"], size):
                    delta = {"type": "text_delta", "text": piece}
                    events.append(_event("content_block_delta", index=index, delta=delta))
            else:
                events.append(
                    _event("content_block_start", index=index, content_block=block | {"input": {}})
                )
                args = json.dumps(block["input"]) if block["input"] else ""
                for piece in _split(args, size) or [""]:
                    delta = {"type": "input_json_delta", "partial_json": piece}
                    events.append(_event("content_block_delta", index=index, delta=delta))
            events.append(_event("content_block_stop", index=index))
        if error is None:
            end = {"stop_reason": stop, "stop_sequence": None}
            out = {"output_tokens": usage["output_tokens"]}
            events.append(_event("message_delta", delta=end, usage=out))
            events.append(_event("message_stop"))
        return await self._send_events(request, [e.encode() for e in events])


def _event(kind: str, **fields: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n"


def _error(status: int, message: str, kind: str | None = None, headers: Any = None) -> web.Response:
    kind = kind or _ERROR_TYPES.get(
        status, "api_error" if status >= 500 else "invalid_request_error"
    )
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_fake"}
    return web.Response(
        status=status, body=json.dumps(body).encode(), content_type=_JSON, headers=headers
    )


def _prefixes(body: dict[str, Any]) -> list[tuple[str, int]]:
    """(digest, tokens) of each prefix a cache_control mark ends: tools, system, messages."""
    items: list[Any] = [("tool", t) for t in body.get("tools") or []]
    system = body.get("system")
    if isinstance(system, list):
        items += [("system", b) for b in system]
    for m in body.get("messages") or []:
        content = m.get("content")
        if isinstance(content, list):
            items += [(m.get("role"), b) for b in content]
    digest = hashlib.sha256(str(body.get("model")).encode())
    size = 0
    out = []
    for kind, item in items:
        bare = {k: v for k, v in item.items() if k != "cache_control"}
        digest.update(json.dumps([kind, bare], sort_keys=True).encode())
        size += tokens(bare)
        if "cache_control" in item:
            out.append((digest.hexdigest(), size))
    return out


# --------------------------------------------------------------------------- what the API refuses


def refusal(body: dict[str, Any]) -> str | None:
    """The message of the 400 the real API answers `body` with, or None if it takes it."""
    for field in ("model", "max_tokens", "messages"):
        if field not in body:
            return f"{field}: Field required"
    if not isinstance(body["max_tokens"], int) or body["max_tokens"] < 1:
        return "max_tokens: Input should be greater than or equal to 1"
    return _tools(body) or _system(body.get("system")) or _marks(body) or _turns(body)


def _tools(body: dict[str, Any]) -> str | None:
    tools = body.get("tools") or []
    names = [t.get("name") for t in tools]
    for i, tool in enumerate(tools):
        if not isinstance(tool.get("name"), str) or not _TOOL_NAME.match(tool["name"]):
            return f"tools.{i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
        schema = tool.get("input_schema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            return f"tools.{i}.custom.input_schema.type: Input should be 'object'"
    if len(set(names)) != len(names):
        return "tools: Tool names must be unique."
    choice = body.get("tool_choice")
    if choice is not None and choice.get("type") not in ("auto", "any", "tool", "none"):
        return "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'"
    return None


def _system(system: Any) -> str | None:
    if system is None or isinstance(system, str):
        return None
    for i, block in enumerate(system):
        if block.get("type") != "text" or not str(block.get("text", "")).strip():
            return f"system.{i}: text content blocks must contain non-whitespace text"
    return None


def _marks(body: dict[str, Any]) -> str | None:
    found = len(re.findall(r'"cache_control":', json.dumps(body)))
    if found > 4:
        return f"A maximum of 4 blocks with cache_control may be provided. Found {found}."
    return None


def _turns(body: dict[str, Any]) -> str | None:
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    if messages[0].get("role") != "user":
        return 'messages: first message must use the "user" role'
    seen_ids: set[str] = set()
    open_ids: list[str] = []  # tool_use ids of the turn before, waiting for their results
    uses_tools = False
    for i, msg in enumerate(messages):
        role = msg.get("role")
        if role not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        if i and messages[i - 1].get("role") == role:
            return (
                'messages: roles must alternate between "user" and "assistant", but found '
                f'multiple "{role}" roles in a row'
            )
        content = msg.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not blocks:
            return (
                f"messages.{i}: all messages must have non-empty content except for the "
                "optional final assistant message"
            )
        results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        leading = 0
        while leading < len(blocks) and blocks[leading].get("type") == "tool_result":
            leading += 1
        if open_ids and (role != "user" or any(c not in results for c in open_ids)):
            missing = ", ".join(c for c in open_ids if role != "user" or c not in results)
            return (
                f"messages.{i - 1}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {missing}. Each `tool_use` block must have a "
                "corresponding `tool_result` block in the next message."
            )
        if open_ids and leading < len(results):
            return (
                f"messages.{i}: Did not find {len(results)} `tool_result` block(s) at the "
                "beginning of this message. Messages following `tool_use` blocks must begin "
                "with a matching number of `tool_result` blocks."
            )
        for j, block in enumerate(blocks):
            problem = _block(block, role, f"messages.{i}.content.{j}", open_ids, seen_ids)
            if problem is not None:
                return problem
        uses_tools = uses_tools or bool(results) or any(b.get("type") == "tool_use" for b in blocks)
        open_ids = [b["id"] for b in blocks if b.get("type") == "tool_use"]
    if open_ids:
        return (
            f"messages.{len(messages) - 1}: `tool_use` ids were found without `tool_result` "
            f"blocks immediately after: {', '.join(open_ids)}. Each `tool_use` block must have "
            "a corresponding `tool_result` block in the next message."
        )
    if uses_tools and not body.get("tools"):
        return "Requests which include `tool_use` or `tool_result` blocks must define tools."
    return None


def _block(
    block: dict[str, Any], role: str, where: str, open_ids: list[str], seen_ids: set[str]
) -> str | None:
    kind = block.get("type")
    allowed = {
        "user": ("text", "image", "tool_result"),
        "assistant": ("text", "tool_use", "thinking", "redacted_thinking"),
    }
    if kind not in allowed[role]:
        return f"{where}.type: a {role} message cannot contain {kind} blocks"
    if kind == "text" and not str(block.get("text", "")).strip():
        return f"{where}: text content blocks must contain non-whitespace text"
    if kind == "image":
        source = block.get("source") or {}
        if source.get("type") == "base64" and source.get("media_type") not in _IMAGE_TYPES:
            return (
                f"{where}.source.base64.media_type: Input should be one of {sorted(_IMAGE_TYPES)}"
            )
        if source.get("type") not in ("base64", "url"):
            return f"{where}.source.type: Input should be 'base64' or 'url'"
    if kind == "tool_use":
        tool_id = str(block.get("id", ""))
        if not _TOOL_ID.match(tool_id):
            return f"{where}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
        if tool_id in seen_ids:
            return f"{where}: `tool_use` ids must be unique"
        seen_ids.add(tool_id)
        if not isinstance(block.get("input"), dict):
            return f"{where}.tool_use.input: Input should be a valid dictionary"
    if kind == "tool_result":
        if block.get("tool_use_id") not in open_ids:
            return (
                f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{block.get('tool_use_id')}. Each `tool_result` block must have a "
                "corresponding `tool_use` block in the previous message."
            )
        result = block.get("content")
        if isinstance(result, list) and not result:
            return f"{where}.content: tool_result content must not be an empty list"
    return None


# --------------------------------------------------------------------------- extended thinking

_FINAL_TURN = (
    "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{kind}`. "
    "When `thinking` is enabled, a final `assistant` message must start with a thinking block "
    "(preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you "
    "include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. "
    "Please consult our documentation at "
    "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
)


def seal(secret: bytes, thinking: str) -> str:
    """A thinking block's signature: the server's, over its text."""
    return hmac.new(secret, thinking.encode(), hashlib.sha256).hexdigest()


def thinking_refusal(body: dict[str, Any], secret: bytes) -> str | None:
    """What the API refuses of extended thinking (see the module's docstring); None: nothing."""
    thinking = body.get("thinking") or {"type": "disabled"}
    enabled = thinking.get("type") == "enabled"
    if enabled:
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
        if body["max_tokens"] <= budget:
            return "`max_tokens` must be greater than `thinking.budget_tokens`."
    messages = body["messages"]
    for i, msg in enumerate(messages):
        content = msg.get("content")
        for j, block in enumerate(content if isinstance(content, list) else []):
            if block.get("type") == "thinking" and (
                not enabled or block.get("signature") != seal(secret, str(block.get("thinking")))
            ):
                return f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
    last = messages[-1] if messages else {}
    content = last.get("content")
    in_loop = isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)
    if enabled and in_loop and len(messages) >= 2:
        turn = messages[-2].get("content")
        first = turn[0] if isinstance(turn, list) and turn else {"type": "text"}
        if first.get("type") not in ("thinking", "redacted_thinking"):
            return _FINAL_TURN.format(i=len(messages) - 2, kind=first.get("type"))
    return None


def _newest_user_text(body: dict[str, Any]) -> str:
    for msg in reversed(body.get("messages") or ()):
        content = msg.get("content")
        if msg.get("role") == "user" and isinstance(content, str):
            return content
        texts = [b.get("text", "") for b in content or [] if b.get("type") == "text"]
        if msg.get("role") == "user" and texts:
            return "".join(texts)
    return ""
