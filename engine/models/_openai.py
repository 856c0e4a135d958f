# Left whole: one provider: everything OpenAI-shaped (requests, streams, errors) in one translation.
"""The OpenAI chat-completions provider: OpenAI, vLLM, Ollama, llama.cpp, LiteLLM, ...

Everything OpenAI-shaped lives here: the translation of neutral messages and tool specs
(strict schemas included) into request JSON, of replies (plain or streamed) back into a
:class:`ModelResponse` with usage, and of the endpoint's errors onto relaybot's (a 404 told
apart: a base_url missing /v1, or a model the server does not list; engine/models/_probe.py).

A plain request's first attempt is sent as prepared JSON over a session kept for it
(engine/models/_wire.py): the SDK's per-request building costs three times the HTTP exchange.
What follows a failure (retries with their delays) and every streamed request go through the
official SDK's client with ``post("/chat/completions")`` (``chat.completions.create`` would
first walk the whole history through its type-driven transform). The SDK is imported only when
it is needed (~0.4 s and ~45 MB), in a thread (:meth:`warm_up`), so a daemon that streams
nothing and meets no failure never loads it.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import secrets
from types import ModuleType
from typing import TYPE_CHECKING, Any

import aiohttp

from engine.models._failures import connection_failure
from engine.models._openai_shapes import (
    finish_reason,
    parse,
    read_usage,
    sdk_status_error,
    status_error,
    to_openai,
)
from engine.models._pricing import Amount, spend
from engine.models._probe import explain_404
from engine.models._stream import CallAccumulator, emit
from engine.models._thoughts import FIELDS, ThinkFilter, reasoning
from engine.models._types import (
    ModelRequest,
    ModelResponse,
    OnText,
    ToolSpec,
    Usage,
)
from engine.models._wire import Answer, FirstAttempt, error_body, retry_delay
from tools.errors import LLMError, ModelRefused

if TYPE_CHECKING:
    import openai
    from openai import RequestOptions

log = logging.getLogger(__name__)

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
        reasoning_back: bool = False,
        http_client: Any = None,
    ) -> None:
        self.name = model
        self.reasoning_back = reasoning_back  # thoughts go back in their field (DeepSeek)
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
        self._key_prefix = f"relaybot-{secrets.token_hex(8)}"
        self._requests = 0
        # The first attempt's own way; not with an HTTP client of the caller's (tests, proxies).
        self._first = (
            FirstAttempt(
                f"{(base_url or 'https://api.openai.com/v1').rstrip('/')}/chat/completions",
                {"Authorization": f"Bearer {self._settings['api_key']}"},
                timeout_s,
            )
            if http_client is None
            else None
        )

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
        """Import the SDK in a worker thread, so neither start-up nor the event loop waits, when
        every request will need it (a caller's HTTP client); otherwise the first request that
        needs it (streamed, or retried) imports it the same way."""
        if self._first is None:
            await self._import_sdk()

    async def _import_sdk(self) -> None:
        if self._sdk is None:
            await asyncio.to_thread(_openai)

    async def aclose(self) -> None:
        if self._first is not None:
            await self._first.aclose()
        if self._sdk is not None:
            await self._sdk.close()

    async def complete(self, request: ModelRequest, on_text: OnText | None = None) -> ModelResponse:
        body: dict[str, Any] = {
            **self.options,
            "model": self.name,
            "messages": to_openai(
                request.system, request.messages, reasoning_back=self.reasoning_back
            ),
        }
        if (cap := self._cap(request)) is not None:
            for key in _CAPS:
                body.pop(key, None)
            body[self._cap_field] = cap
        if request.tools:
            body["tools"] = [self._tool(t) for t in request.tools]
        try:
            if not request.stream and self._first is not None:
                reply = await self._plain(body, self._first)
            else:
                reply = await self._by_sdk(body, request.stream, on_text)
        except ModelRefused as exc:
            if exc.kind != "model":
                raise
            base = self._settings["base_url"] or "https://api.openai.com/v1"
            better = await explain_404(exc, base, self._settings["api_key"], self.name)
            if better is exc:
                raise
            raise better from exc
        await spend(self.name, Amount(reply.usage))  # charged to whom the task is for
        return reply

    async def _plain(self, body: dict[str, Any], first: FirstAttempt) -> ModelResponse:
        """The first attempt on its own way; a failure the SDK would retry goes to the SDK with
        the attempts left, after the delay it would have waited (engine/models/_wire.py)."""
        answer: Answer | None = None
        try:
            answer = await first.post(json.dumps(body).encode())
        except (OSError, TimeoutError, aiohttp.ClientError) as exc:
            if self.max_retries == 0:
                raise connection_failure(exc) from exc
        if answer is not None and answer.status < 300:
            try:
                return parse(json.loads(answer.body))
            except ValueError:
                raise LLMError(
                    f"the model endpoint answered no completion: {answer.body[:200]!r}"
                ) from None
        delay = retry_delay(answer) if self.max_retries > 0 else None
        if delay is None:
            assert answer is not None  # a connection error is retried or raised above
            data, text = error_body(answer)
            raise status_error(answer.status, data, text or f"Error code: {answer.status}")
        await asyncio.sleep(delay)  # before the next attempt, as the SDK would
        return await self._by_sdk(body, False, None, retries=self.max_retries - 1)

    async def _by_sdk(
        self,
        body: dict[str, Any],
        stream: bool,
        on_text: OnText | None,
        *,
        retries: int | None = None,
    ) -> ModelResponse:
        await self._import_sdk()
        openai = _openai()
        try:
            if not stream:
                return parse(await self._post(body, stream=False, retries=retries))
            return await self._stream(body, on_text)
        except openai.APIStatusError as exc:
            raise sdk_status_error(exc) from exc
        except openai.APIConnectionError as exc:  # timeouts too: the cause says which
            raise connection_failure(exc) from exc
        except openai.OpenAIError as exc:
            raise LLMError(f"the model request failed: {exc}") from exc

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

    async def _post(
        self,
        body: dict[str, Any],
        *,
        stream: bool,
        retries: int | None = None,
    ) -> Any:
        """A plain answer as its JSON (the SDK's typed ChatCompletion is a model per part, read
        once), a stream's chunks typed; the idempotency key (which the SDK wants, and OpenAI's
        client does not send) a prefix and a count, not a uuid4; `retries` when the first
        attempt has been made."""
        openai = _openai()
        chat = openai.types.chat
        self._requests += 1
        options: RequestOptions = {
            "security": {"bearer_auth": True},
            "idempotency_key": f"{self._key_prefix}-{self._requests}",
        }
        if retries is not None:
            options["max_retries"] = retries
        return await self.sdk.post(
            "/chat/completions",
            body={**body, "stream": True, "stream_options": {"include_usage": True}}
            if stream
            else body,
            cast_to=object if not stream else chat.ChatCompletion,
            options=options,
            stream=stream,
            stream_cls=openai.AsyncStream[chat.ChatCompletionChunk],
        )

    async def _stream(self, body: dict[str, Any], on_text: OnText | None) -> ModelResponse:
        """A streamed request. The SDK retries a failed request itself; a stream that breaks
        before its first token is started again (bounded), one that breaks later is an error."""
        openai = _openai()
        for attempt in range(self.max_retries + 1):
            stream = await self._post(body, stream=True)
            text: list[str] = []
            thinking = ThinkFilter()
            fields: dict[str, list[str]] = {}  # thoughts by the field they came in
            calls = CallAccumulator()
            finish: str | None = None
            usage = Usage()
            try:
                async with stream:
                    async for chunk in stream:
                        if chunk.usage is not None:
                            usage = read_usage(chunk.usage)
                        if not chunk.choices:
                            continue
                        choice = chunk.choices[0]
                        delta = choice.delta
                        if delta is not None:
                            if delta.content and (shown := thinking.feed(delta.content)):
                                text.append(shown)
                                await emit(on_text, shown)
                            if delta.model_extra:
                                _thought(delta.model_extra, fields)
                            for tc in delta.tool_calls or ():
                                calls.add(tc)
                        if choice.finish_reason:
                            finish = choice.finish_reason
            except openai.APIConnectionError as exc:
                if text or calls or attempt == self.max_retries:
                    raise
                log.warning("the stream broke before its first token (%s); starting again", exc)
                continue
            if rest := thinking.finish():
                text.append(rest)
                await emit(on_text, rest)
            field = next(iter(fields), None)
            thoughts = "".join(fields[field]) if field else thinking.thought
            return ModelResponse(
                "".join(text) or None,
                calls.finish(),
                finish_reason(finish),
                usage,
                reasoning=reasoning(thoughts, field),
            )
        raise AssertionError("unreachable")


def _thought(extra: dict[str, Any], fields: dict[str, list[str]]) -> None:
    """A streamed delta's thoughts, in the field a server put them (``reasoning_content``)."""
    for field in FIELDS:
        if isinstance(piece := extra.get(field), str) and piece:
            fields.setdefault(field, []).append(piece)


def _openai() -> ModuleType:
    return importlib.import_module("openai")
