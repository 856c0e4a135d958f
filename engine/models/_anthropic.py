"""The Anthropic Messages provider: Claude models through the official ``anthropic`` SDK.

Everything Anthropic-shaped lives here; the request's translation (thinking blocks included) in
engine/models/_anthropic_shapes.py.

The answer back: text blocks joined, ``tool_use`` blocks as calls, thinking blocks as reasoning
kept with the message (``thinking``: the budget of extended thinking, None for none),
``stop_reason`` as a :class:`FinishReason`, usage with cache reads and writes. Errors map by the
API's error type (also for one sent inside a stream): overloaded and api errors →
ModelServerError, rate limits → ModelRateLimited, authentication → ModelAuthError, "prompt is
too long" → ContextOverflow, any other refusal → ModelRefused; no answer at all →
ModelUnreachable or ModelTimedOut (engine/models/_failures.py).

The SDK is an optional extra (``pip install 'relaybot[anthropic]'``); it is imported on first
use, in a thread (:meth:`AnthropicModel.warm_up`), because importing it takes seconds.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
from types import ModuleType
from typing import TYPE_CHECKING, Any

from engine.models._anthropic_shapes import EARLIER, NO_OUTPUT, thinking_blocks, to_anthropic
from engine.models._failures import connection_failure, status_failure
from engine.models._pricing import Amount, spend
from engine.models._stream import emit
from engine.models._types import (
    FinishReason,
    ModelRequest,
    ModelResponse,
    OnText,
    ToolCall,
    Usage,
)
from tools.errors import (
    ConfigError,
    ContextOverflow,
    LLMError,
    ModelAuthError,
    ModelRateLimited,
    ModelUnavailable,
)

if TYPE_CHECKING:
    import anthropic

log = logging.getLogger(__name__)

EXTRA = "pip install 'relaybot[anthropic]'"
DEFAULT_MAX_TOKENS = 4096
__all__ = ["DEFAULT_MAX_TOKENS", "EARLIER", "NO_OUTPUT", "AnthropicModel"]

_FINISH = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "tool_use": FinishReason.TOOL_CALLS,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "refusal": FinishReason.REFUSAL,
}


class AnthropicModel:
    """A :class:`engine.Model` over Anthropic's Messages API.

    `max_tokens` is the longest answer (the API requires one); `options` (temperature, top_p,
    ...) go into every request; `cache` marks the prompt's stable parts for prompt caching;
    `thinking` is extended thinking's budget (None: off), given on top of `max_tokens`.
    """

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str,
        model: str,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        options: dict[str, Any] | None = None,
        cache: bool = True,
        thinking: int | None = None,
        http_client: Any = None,
    ) -> None:
        self.name = model
        self.thinking = thinking
        self.max_tokens = max_tokens
        self.max_retries = max_retries
        self.options = dict(options or {})
        self.cache = cache
        self._settings = {
            "base_url": base_url,
            "api_key": api_key or "not-needed",
            "timeout": timeout_s,
            "max_retries": max_retries,
            "http_client": http_client,
        }
        self._sdk: anthropic.AsyncAnthropic | None = None

    @property
    def sdk(self) -> anthropic.AsyncAnthropic:
        if self._sdk is None:
            sdk = _anthropic()
            settings = dict(self._settings)
            if settings["http_client"] is None:
                settings["http_client"] = sdk.DefaultAioHttpClient()  # as for OpenAI: cheap pools
            self._sdk = sdk.AsyncAnthropic(**settings)
        return self._sdk

    async def warm_up(self) -> None:
        """Import the SDK in a worker thread, so neither start-up nor the event loop waits."""
        if self._sdk is None:
            await asyncio.to_thread(_anthropic)

    async def aclose(self) -> None:
        if self._sdk is not None:
            await self._sdk.close()

    async def complete(self, request: ModelRequest, on_text: OnText | None = None) -> ModelResponse:
        body = {
            "model": self.name,
            "max_tokens": request.max_output_tokens or self.max_tokens,
            **to_anthropic(request, cache=self.cache, thinking=self.thinking),
        }
        if "thinking" in body:  # the budget comes on top of the answer's room
            body["max_tokens"] += body["thinking"]["budget_tokens"]
        if self.options:
            body["extra_body"] = self.options
        await self.warm_up()
        sdk = _anthropic()
        try:
            if request.stream:
                reply = await self._stream(body, on_text)
            else:
                reply = _response(await self.sdk.messages.create(**body))
        except sdk.APIStatusError as exc:
            raise _status_error(exc) from exc
        except sdk.APIConnectionError as exc:  # timeouts too: the cause says which
            raise connection_failure(exc) from exc
        except sdk.AnthropicError as exc:
            raise LLMError(f"the model request failed: {exc}") from exc
        u = reply.usage
        log.debug(
            "%s: %d prompt tokens (cache: %d read, %d written), %d out",
            self.name,
            u.prompt_tokens,
            u.cached_tokens,
            u.cache_write_tokens,
            u.completion_tokens,
        )
        await spend(self.name, Amount(u))  # charged to whom the task is for
        return reply

    async def _stream(self, body: dict[str, Any], on_text: OnText | None) -> ModelResponse:
        """A streamed request. The SDK retries the request itself; a stream that breaks before
        its first token is started again (bounded), one that breaks later is an error."""
        sdk = _anthropic()
        for attempt in range(self.max_retries + 1):
            emitted = False
            async with self.sdk.messages.stream(**body) as stream:
                try:
                    async for event in stream:
                        if event.type == "text" and event.text:
                            emitted = True
                            await emit(on_text, event.text)
                    return _response(await stream.get_final_message())
                except (sdk.APIConnectionError, sdk.APIStatusError) as exc:
                    if emitted or attempt == self.max_retries or not _transient(exc):
                        raise
                    log.warning("the stream broke before its first token (%s); starting again", exc)
        raise AssertionError("unreachable")


def _response(msg: Any) -> ModelResponse:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in msg.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            calls.append(ToolCall(block.id, block.name, json.dumps(block.input)))
    reason = _FINISH.get(msg.stop_reason or "", FinishReason.OTHER)
    thoughts = tuple(thinking_blocks(msg.content))
    text = "".join(texts) or None
    return ModelResponse(text, calls, reason, _usage(msg.usage), msg.model or "", thoughts)


def _usage(raw: Any) -> Usage:
    if raw is None:
        return Usage()
    read = raw.cache_read_input_tokens or 0
    written = raw.cache_creation_input_tokens or 0
    return Usage((raw.input_tokens or 0) + read + written, raw.output_tokens or 0, read, written)


def _transient(exc: Exception) -> bool:
    """A failure worth another try: a broken connection, an overloaded or failing server."""
    return not hasattr(exc, "status_code") or isinstance(
        _status_error(exc), ModelUnavailable | ModelRateLimited
    )


def _status_error(exc: Any) -> LLMError:
    kind, message = _error_body(exc)
    status = exc.status_code
    detail = f"the model endpoint answered {status} ({kind or 'error'}): {message}"
    if status == 413 or kind == "request_too_large" or "prompt is too long" in message.lower():
        return ContextOverflow(detail)
    if status in (401, 403) or kind in ("authentication_error", "permission_error"):
        return ModelAuthError(detail)
    if status == 429 or kind == "rate_limit_error":
        return ModelRateLimited(detail)
    if kind in ("api_error", "overloaded_error"):
        return status_failure(max(status, 500), detail)
    return status_failure(status, detail)


def _error_body(exc: Any) -> tuple[str | None, str]:
    """The API's error type and message: ``{"type": "error", "error": {type, message}}``."""
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            kind = err.get("type") if isinstance(err.get("type"), str) else None
            return kind, str(err.get("message") or exc.message)[:300]
    return None, str(exc.message)[:300]


def _anthropic() -> ModuleType:
    try:
        return importlib.import_module("anthropic")
    except ImportError:
        raise ConfigError(
            "llm.provider", f'provider "anthropic" needs the anthropic SDK: {EXTRA}'
        ) from None
