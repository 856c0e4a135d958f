"""A fake OpenAI server that also speaks the Responses API (``POST /v1/responses``).

:class:`FakeResponses` is :class:`tests.fakes.openai_server.FakeOpenAI` (Chat Completions and
the rest) with the Responses endpoint added, answering the same script language (``text``,
``tool_call(s)``, ``error``, ``hold``, callables; ``default`` echoes the newest user text)::

    async with FakeResponses() as llm:
        client = openai.AsyncOpenAI(base_url=llm.base_url, api_key="k", max_retries=0)
        llm.script(tool_call("add", {"a": 1, "b": 2}), text("3"))
        ...
        assert llm.requests[0]["input"][-1]["role"] == "user"  # recorded JSON bodies

It answers as a reasoning model (``thinks``, on by default; off, it refuses ``include`` of
the encrypted reasoning as gpt-4o does): each response's output starts
with a ``reasoning`` item ``rs_N`` (its summary, "Thinking about: <newest user text>", given when
``reasoning.summary`` is asked for; its ``encrypted_content``, sealed with the server's secret,
when ``include`` names ``reasoning.encrypted_content``), then the message, then one
``function_call`` per call (``call_N``). Usage counts four characters a token, the reasoning
as ``output_tokens_details.reasoning_tokens`` (``REASONING_TOKENS``), and an input that starts
with the previous request's as ``input_tokens_details.cached_tokens``.

What the real API refuses is refused in its words (tests/fakes/responses_rules.py): a call
sent back without its reasoning item, a tampered encrypted content, an unknown field, ... With
``store`` true a response is kept and can be named by ``previous_response_id``.

Streams are Server-Sent Events with the API's event names: ``response.created``,
``response.in_progress``, per item ``response.output_item.added`` / its deltas
(``response.reasoning_summary_text.delta``, ``response.output_text.delta``,
``response.function_call_arguments.delta``) / ``response.output_item.done``, and
``response.completed`` with the whole response; each with its ``sequence_number``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import time
from typing import Any

from aiohttp import web

from tests.fakes.openai_server import (
    ErrorReply,
    FakeOpenAI,
    TextReply,
    ToolCallsReply,
    _error_response,
    _ShuttingDown,
    _split,
    echo,
)
from tests.fakes.responses_rules import refusal, seal

REASONING_TOKENS = 12
_JSON = "application/json"


def newest_user_text(body: dict[str, Any]) -> str:
    items = body.get("input")
    if isinstance(items, str):
        return items
    for item in reversed(items or []):
        if item.get("role") == "user" and "type" not in item:
            content = item.get("content")
            if isinstance(content, str):
                return content
            return "".join(p.get("text", "") for p in content if p.get("type") == "input_text")
    return ""


def tokens(value: Any) -> int:
    return max(1, len(json.dumps(value, ensure_ascii=False)) // 4)


class FakeResponses(FakeOpenAI):
    """Fake OpenAI server with ``/v1/responses``; see the module's docstring."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.thinks = True  # answer as a reasoning model (False: refuse encrypted reasoning)
        self.refusals: list[str] = []  # the messages of the 400s it answered, in order
        self.secret = secrets.token_bytes(16)
        self.reasoned: dict[str, str] = {}  # call id -> the reasoning item before it
        self.stored: dict[str, list[dict[str, Any]]] = {}  # response id -> input + output
        self._last_input: list[Any] = []
        self._ids = itertools.count(1)

    def _add_routes(self, app: web.Application) -> None:
        super()._add_routes(app)
        app.router.add_post("/v1/responses", self._responses)

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        if (denied := self._check_auth(request)) is not None:
            return denied
        try:
            body = json.loads(await request.read())
        except ValueError:
            return _error_response(400, "Invalid JSON body.", "invalid_request_error")
        self.requests.append(body)
        if self._cond is not None:
            async with self._cond:
                self._cond.notify_all()
        earlier: list[dict[str, Any]] = []
        previous = body.get("previous_response_id") if isinstance(body, dict) else None
        if previous is not None:
            if previous not in self.stored:
                return self._refuse(f"Previous response with id '{previous}' not found.", None)
            earlier = self.stored[previous]
        refused = refusal(body, secret=self.secret, reasoned=self.reasoned, earlier=earlier)
        if not self.thinks and "reasoning.encrypted_content" in (body.get("include") or []):
            refused = ("Encrypted content is not supported with this model.", "include", None)
        if refused is not None:
            return self._refuse(*refused[:2], code=refused[2])
        picked = self._queue.popleft() if self._queue else self.default
        if picked is echo:
            picked = TextReply("echo: " + newest_user_text(body))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        try:
            reply = await self._resolve(picked, body)
        except _ShuttingDown:
            return _error_response(503, "The fake server is shutting down.", "server_error")
        if isinstance(reply, ErrorReply):
            return _error_response(
                reply.status, reply.message, reply.type, reply.code, headers=reply.headers
            )
        assert isinstance(reply, TextReply | ToolCallsReply), reply
        response = self._response(body, reply)
        if body.get("store", True):
            items = body["input"] if isinstance(body["input"], list) else []
            self.stored[response["id"]] = [*earlier, *items, *response["output"]]
        if body.get("stream"):
            return await self._sse(request, response)
        return web.Response(body=json.dumps(response).encode(), content_type=_JSON)

    def _refuse(self, message: str, param: str | None, code: str | None = None) -> web.Response:
        self.refusals.append(message)
        return _error_response(400, message, "invalid_request_error", code, param)

    def _response(self, body: dict[str, Any], reply: TextReply | ToolCallsReply) -> dict[str, Any]:
        n = next(self._ids)
        output: list[dict[str, Any]] = []
        if self.thinks:
            said = f"Thinking about: {newest_user_text(body)}"
            summary = (
                [{"type": "summary_text", "text": said}]
                if (body.get("reasoning") or {}).get("summary")
                else []
            )
            item: dict[str, Any] = {"id": f"rs_{n:04d}", "type": "reasoning", "summary": summary}
            if "reasoning.encrypted_content" in (body.get("include") or []):
                item["encrypted_content"] = seal(self.secret, item["id"], said)
            output.append(item)
        if reply.content:
            text = {"type": "output_text", "text": reply.content, "annotations": [], "logprobs": []}
            output.append(
                {
                    "id": f"msg_{n:04d}",
                    "type": "message",
                    "status": "completed",
                    "role": "assistant",
                    "content": [text],
                }
            )
        for i, call in enumerate(reply.calls if isinstance(reply, ToolCallsReply) else ()):
            call_id = call.id or f"call_{n:04d}_{i}"
            if self.thinks:
                self.reasoned[call_id] = f"rs_{n:04d}"
            output.append(
                {
                    "id": f"fc_{n:04d}_{i}",
                    "type": "function_call",
                    "status": "completed",
                    "call_id": call_id,
                    "name": call.name,
                    "arguments": call.arguments,
                }
            )
        return {
            "id": f"resp_{n:04d}",
            "object": "response",
            "created_at": time.time(),
            "status": "incomplete" if reply.finish_reason == "length" else "completed",
            "incomplete_details": {"reason": "max_output_tokens"}
            if reply.finish_reason == "length"
            else None,
            "model": body.get("model"),
            "output": output,
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [],
            "store": body.get("store", True),
            "usage": self._usage(body, output),
        }

    def _usage(self, body: dict[str, Any], output: list[dict[str, Any]]) -> dict[str, Any]:
        items = body.get("input") if isinstance(body.get("input"), list) else []
        size = tokens([body.get("instructions"), body.get("tools"), items])
        last, self._last_input = self._last_input, list(items or [])
        cached = tokens(last) if last and items[: len(last)] == last else 0
        thought = REASONING_TOKENS if self.thinks else 0
        out = tokens([o for o in output if o["type"] != "reasoning"]) + thought
        return {
            "input_tokens": size,
            "input_tokens_details": {"cached_tokens": min(cached, size)},
            "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": thought},
            "total_tokens": size + out,
        }

    async def _sse(self, request: web.Request, response: dict[str, Any]) -> web.StreamResponse:
        seq = itertools.count()
        events: list[bytes] = []

        def event(kind: str, **fields: Any) -> None:
            data = {"type": kind, "sequence_number": next(seq), **fields}
            events.append(f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode())

        started = {**response, "status": "in_progress", "output": [], "usage": None}
        event("response.created", response=started)
        event("response.in_progress", response=started)
        size = max(1, self.stream_chunk_chars)
        for index, item in enumerate(response["output"]):
            where = {"item_id": item["id"], "output_index": index}
            event("response.output_item.added", output_index=index, item=_opened(item))
            if item["type"] == "reasoning":
                for s, part in enumerate(item["summary"]):
                    for piece in _split(part["text"], size):
                        event(
                            "response.reasoning_summary_text.delta",
                            **where,
                            summary_index=s,
                            delta=piece,
                        )
            elif item["type"] == "message":
                text = item["content"][0]["text"]
                empty = {"type": "output_text", "text": "", "annotations": []}
                event("response.content_part.added", **where, content_index=0, part=empty)
                for piece in _split(text, size):
                    event(
                        "response.output_text.delta",
                        **where,
                        content_index=0,
                        delta=piece,
                        logprobs=[],
                    )
                event("response.output_text.done", **where, content_index=0, text=text, logprobs=[])
            else:
                for piece in _split(item["arguments"], size):
                    event("response.function_call_arguments.delta", **where, delta=piece)
                event("response.function_call_arguments.done", **where, arguments=item["arguments"])
            event("response.output_item.done", output_index=index, item=item)
        final = (
            "response.incomplete" if response["status"] == "incomplete" else "response.completed"
        )
        event(final, response=response)
        return await self._send_events(request, events)


def _opened(item: dict[str, Any]) -> dict[str, Any]:
    """An output item as ``response.output_item.added`` announces it: before its content."""
    if item["type"] == "message":
        return {**item, "status": "in_progress", "content": []}
    if item["type"] == "function_call":
        return {**item, "status": "in_progress", "arguments": ""}
    return {**item, "summary": []}
