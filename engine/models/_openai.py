"""The OpenAI chat-completions provider: OpenAI, vLLM, Ollama, llama.cpp, LiteLLM, ...

Everything OpenAI-shaped lives here: the translation of neutral messages and tool specs
(strict schemas included) into request JSON, of replies (plain or streamed) back into a
:class:`ModelResponse` with usage, and of the SDK's errors onto relaybot's.

Requests go through the official SDK's client (auth, retries, timeouts, parsing) with
``post("/chat/completions")``: ``chat.completions.create`` would first walk the whole history
through its type-driven transform, several ms of CPU per request for a long conversation, and
our messages are already plain JSON in the API's shape. The SDK is imported on first use (it
costs ~0.4 s and ~45 MB), in a thread once the channels listen (:meth:`warm_up`).
"""

from __future__ import annotations

import asyncio
import base64
import importlib
import logging
from types import ModuleType
from typing import TYPE_CHECKING, Any

from engine.models._alternate import alternating
from engine.models._failures import connection_failure, status_failure
from engine.models._pricing import Amount, spend
from engine.models._stream import CallAccumulator, emit
from engine.models._types import (
    FinishReason,
    Image,
    Message,
    ModelRequest,
    ModelResponse,
    OnText,
    Role,
    Text,
    ToolCall,
    ToolSpec,
    Usage,
)
from tools.errors import ContextOverflow, LLMError, ModelAuthError, ModelRateLimited

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

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
_CAPS = ("max_tokens", "max_completion_tokens")


class OpenAIModel:
    """A :class:`engine.Model` over an OpenAI-compatible endpoint.

    `timeout_s` and `max_retries` are explicit (the SDK's 600 s default is far too long for a
    chat); `options` (temperature, max_tokens, ...) go into every request. A request's own
    `max_output_tokens` (a summary's) replaces a configured max_tokens; without one configured,
    an answer is capped by the request's `output_room`, since a local server would otherwise
    write until its window is full. OpenAI's own API is left to its models' limits unless a cap
    is configured (its reasoning models count their thinking in the cap) and gets the cap as
    max_completion_tokens (they refuse max_tokens); other servers get max_tokens.
    """

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str,
        model: str,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        options: dict[str, Any] | None = None,
        strict_tools: bool = False,
        http_client: Any = None,
    ) -> None:
        self.name = model
        self.max_retries = max_retries
        self.options = dict(options or {})
        self.strict_tools = strict_tools
        self._settings = {
            "base_url": base_url,
            "api_key": api_key or "not-needed",
            "timeout": timeout_s,
            "max_retries": max_retries,
            "http_client": http_client,
        }
        self._sdk: openai.AsyncOpenAI | None = None
        self._capped = any(k in self.options for k in _CAPS)
        self._hosted = base_url is None or "api.openai.com" in base_url
        self._cap_field = "max_completion_tokens" if self._hosted else "max_tokens"

    @property
    def sdk(self) -> openai.AsyncOpenAI:
        if self._sdk is None:
            openai = _openai()
            settings = dict(self._settings)
            if settings["http_client"] is None:
                # aiohttp's connection pool stays cheap with many connections open; httpx's
                # scans every pooled connection on each request (measurable at 100 chats).
                settings["http_client"] = openai.DefaultAioHttpClient()
            self._sdk = openai.AsyncOpenAI(**settings)
        return self._sdk

    async def warm_up(self) -> None:
        """Import the SDK in a worker thread, so neither start-up nor the event loop waits."""
        if self._sdk is None:
            await asyncio.to_thread(_openai)

    async def aclose(self) -> None:
        if self._sdk is not None:
            await self._sdk.close()

    async def complete(self, request: ModelRequest, on_text: OnText | None = None) -> ModelResponse:
        body: dict[str, Any] = {
            **self.options,
            "model": self.name,
            "messages": to_openai(request.system, request.messages),
        }
        if (cap := self._cap(request)) is not None:
            for key in _CAPS:
                body.pop(key, None)
            body[self._cap_field] = cap
        if request.tools:
            body["tools"] = [self._tool(t) for t in request.tools]
        await self.warm_up()
        openai = _openai()
        try:
            if not request.stream:
                reply = self._parse(await self._post(body, stream=False))
            else:
                reply = await self._stream(body, on_text)
        except openai.APIStatusError as exc:
            raise _status_error(exc) from exc
        except openai.APIConnectionError as exc:  # timeouts too: the cause says which
            raise connection_failure(exc) from exc
        except openai.OpenAIError as exc:
            raise LLMError(f"the model request failed: {exc}") from exc
        await spend(self.name, Amount(reply.usage))  # charged to whom the task is for
        return reply

    def _cap(self, request: ModelRequest) -> int | None:
        """The answer cap to send in place of the configured one; None: as configured."""
        if self._hosted and not self._capped:
            return None
        if request.max_output_tokens is not None:
            return request.max_output_tokens
        return None if self._capped else request.output_room

    def _tool(self, spec: ToolSpec) -> dict[str, Any]:
        fn: dict[str, Any] = {"name": spec.name, "description": spec.description}
        if self.strict_tools and spec.strict:
            fn["parameters"] = spec.strict_parameters
            fn["strict"] = True
        else:
            fn["parameters"] = spec.parameters
        return {"type": "function", "function": fn}

    async def _post(self, body: dict[str, Any], *, stream: bool) -> Any:
        openai = _openai()
        chat = openai.types.chat
        return await self.sdk.post(
            "/chat/completions",
            body={**body, "stream": True, "stream_options": {"include_usage": True}}
            if stream
            else body,
            cast_to=chat.ChatCompletion,
            options={"security": {"bearer_auth": True}},
            stream=stream,
            stream_cls=openai.AsyncStream[chat.ChatCompletionChunk],
        )

    def _parse(self, resp: Any) -> ModelResponse:
        usage = _usage(resp.usage)
        if not resp.choices:
            return ModelResponse(None, [], FinishReason.OTHER, usage, resp.model or "")
        choice = resp.choices[0]
        msg = choice.message
        calls = [
            ToolCall(c.id, c.function.name, c.function.arguments or "")
            for c in (msg.tool_calls or [])
            if getattr(c, "type", "function") == "function"
        ]
        text = msg.content or getattr(msg, "refusal", None)
        return ModelResponse(text, calls, _finish(choice.finish_reason), usage, resp.model or "")

    async def _stream(self, body: dict[str, Any], on_text: OnText | None) -> ModelResponse:
        """A streamed request. The SDK retries a failed request itself; a stream that breaks
        before its first token is started again (bounded), one that breaks later is an error."""
        openai = _openai()
        for attempt in range(self.max_retries + 1):
            stream = await self._post(body, stream=True)
            text: list[str] = []
            calls = CallAccumulator()
            finish: str | None = None
            usage = Usage()
            try:
                async with stream:
                    async for chunk in stream:
                        if chunk.usage is not None:
                            usage = _usage(chunk.usage)
                        if not chunk.choices:
                            continue
                        choice = chunk.choices[0]
                        delta = choice.delta
                        if delta is not None:
                            if delta.content:
                                text.append(delta.content)
                                await emit(on_text, delta.content)
                            for tc in delta.tool_calls or ():
                                calls.add(tc)
                        if choice.finish_reason:
                            finish = choice.finish_reason
            except openai.APIConnectionError as exc:
                if text or calls or attempt == self.max_retries:
                    raise
                log.warning("the stream broke before its first token (%s); starting again", exc)
                continue
            return ModelResponse("".join(text) or None, calls.finish(), _finish(finish), usage)
        raise AssertionError("unreachable")


def to_openai(system: str, messages: Any) -> list[dict[str, Any]]:
    """Neutral messages as the chat-completions `messages` list: the system prompt once, first,
    then messages as strict chat templates accept them (engine/models/_alternate.py)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for m in alternating(messages):
        out.append(_message(m))
    return out


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


def _image_url(image: Image) -> str:
    if image.data is not None:
        return f"data:{image.media_type};base64,{base64.b64encode(image.data).decode()}"
    return image.url or ""


def _finish(reason: str | None) -> FinishReason:
    if reason is None:
        return FinishReason.OTHER
    return _FINISH.get(reason, FinishReason.OTHER)


def _usage(raw: Any) -> Usage:
    if raw is None:
        return Usage()
    details = getattr(raw, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) or 0
    return Usage(raw.prompt_tokens or 0, raw.completion_tokens or 0, cached)


def _status_error(exc: openai.APIStatusError) -> LLMError:
    detail = f"the model endpoint answered {exc.status_code}: {_reason(exc)}"
    code = _code(exc)
    if code == "context_length_exceeded" or (
        exc.status_code in (400, 413) and any(w in detail.lower() for w in _TOO_LONG)
    ):
        return ContextOverflow(detail)
    if exc.status_code in (401, 403):
        return ModelAuthError(detail)
    if exc.status_code == 429:
        return ModelRateLimited(detail)
    return status_failure(exc.status_code, detail)


def _code(exc: openai.APIStatusError) -> str | None:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("code"), str):
            return err["code"]
    return getattr(exc, "code", None)


def _reason(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
        if isinstance(err, str):
            return err[:300]
    return str(exc.message)[:300]


def _openai() -> ModuleType:
    return importlib.import_module("openai")
