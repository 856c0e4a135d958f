"""The OpenAI Responses provider (``/v1/responses``): OpenAI's reasoning models with their tools.

Where OpenAI's reasoning models keep their reasoning between tool calls. Requests go through
the official SDK's ``client.responses.create`` (streamed: its event stream), shaped by
engine/models/_responses_shapes.py.

Stateless by default: ``store: false`` with ``include: ["reasoning.encrypted_content"]``, so the
API keeps nothing and hands each reasoning item back encrypted; relaybot keeps it with the
assistant message in its own store (a restart in the middle of a tool loop sends it again) and
sends it back verbatim before its calls (a model that does not reason refuses to be asked for
it: that refusal is learnt, once). With `store` (the owner's opt-in to OpenAI keeping
responses), a request that goes on from a response of this API (its tool results, nothing else
after it) names it by ``previous_response_id`` and sends only what came after it.

`effort` ("minimal", "low", "medium", "high") goes in ``reasoning.effort`` with a request for
an automatic summary of the reasoning (`summary`), which is what a chat with ``/settings thinking
on`` is shown. Errors map as for Chat Completions (engine/models/_openai_shapes.py): the two APIs
answer with the same error bodies.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from engine.models._failures import connection_failure, status_failure
from engine.models._openai_shapes import sdk_status_error
from engine.models._pricing import Amount, spend
from engine.models._responses_shapes import outputs, parse, response_id, to_input, tool
from engine.models._stream import emit
from engine.models._types import Message, ModelRequest, ModelResponse, OnText, Role
from tools.errors import LLMError, ModelRateLimited, ModelRefused

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

ENCRYPTED = "reasoning.encrypted_content"
_NO_ENCRYPTION = "encrypted content is not supported"  # how a model that does not reason says
_FINAL = ("response.completed", "response.incomplete")


class ResponsesModel:
    """A :class:`engine.Model` over OpenAI's Responses API (see the module's docstring).

    `options` go into every request as they are, but ``max_tokens``, which is sent as the
    API's ``max_output_tokens`` (a request's own `max_output_tokens` replaces it).
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
        effort: str | None = None,
        summary: bool = True,
        store: bool = False,
        http_client: Any = None,
    ) -> None:
        self.name = model
        self.max_retries = max_retries
        self.options = dict(options or {})
        self.cap = self.options.pop("max_tokens", None)
        self.effort = effort
        self.summary = summary
        self.store = store
        # A model that does not reason (gpt-4o) refuses the encrypted reasoning: learnt from
        # its refusal, once, and not asked for again.
        self.encrypted = True
        self._settings = {
            "base_url": base_url,
            "api_key": api_key or "not-needed",
            "timeout": timeout_s,
            "max_retries": max_retries,
            "http_client": http_client,
        }
        self._sdk: openai.AsyncOpenAI | None = None

    @property
    def sdk(self) -> openai.AsyncOpenAI:
        if self._sdk is None:
            sdk = _openai()
            settings = dict(self._settings)
            if settings["http_client"] is None:
                settings["http_client"] = sdk.DefaultAioHttpClient()  # cheap connection pools
            self._sdk = sdk.AsyncOpenAI(**settings)
        return self._sdk

    async def warm_up(self) -> None:
        """Import the SDK in a worker thread, so neither start-up nor the event loop waits."""
        if self._sdk is None:
            await asyncio.to_thread(_openai)

    async def aclose(self) -> None:
        if self._sdk is not None:
            await self._sdk.close()

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The request's fields for ``responses.create``."""
        previous, after = self._chained(request.messages)
        items = to_input(request.messages) if previous is None else outputs(after)
        body: dict[str, Any] = {"model": self.name, "input": items}
        body["store"] = self.store
        if previous is not None:
            body["previous_response_id"] = previous
        if not self.store and self.encrypted:
            body["include"] = [ENCRYPTED]
        if request.system:
            body["instructions"] = request.system
        if request.tools:
            body["tools"] = [tool(t) for t in request.tools]
        if self.effort is not None:
            body["reasoning"] = {"effort": self.effort}
            if self.summary:
                body["reasoning"]["summary"] = "auto"
        if (cap := request.max_output_tokens or self.cap) is not None:
            body["max_output_tokens"] = cap
        if self.options:
            body["extra_body"] = self.options
        return body

    def _chained(self, messages: Sequence[Message]) -> tuple[str | None, Sequence[Message]]:
        """With server storage, the response the request goes on from and what came after it."""
        if not self.store:
            return None, messages
        last = max((i for i, m in enumerate(messages) if m.role is not Role.TOOL), default=-1)
        if last < 0 or messages[last].role is not Role.ASSISTANT or last == len(messages) - 1:
            return None, messages
        found = {response_id(r) for r in messages[last].reasoning} - {None}
        if len(found) != 1:
            return None, messages
        return found.pop(), messages[last + 1 :]

    async def complete(self, request: ModelRequest, on_text: OnText | None = None) -> ModelResponse:
        try:
            return await self._complete(request, on_text)
        except ModelRefused as exc:
            if not self.encrypted or _NO_ENCRYPTION not in str(exc).lower():
                raise
            log.info("%s does not reason: its reasoning is no longer asked for", self.name)
            self.encrypted = False
            return await self._complete(request, on_text)

    async def _complete(self, request: ModelRequest, on_text: OnText | None) -> ModelResponse:
        body = self.body(request)
        await self.warm_up()
        sdk = _openai()
        try:
            if request.stream:
                reply = await self._stream(body, on_text)
            else:
                reply = parse((await self.sdk.responses.create(**body)).to_dict())
        except sdk.APIStatusError as exc:
            raise sdk_status_error(exc) from exc
        except sdk.APIConnectionError as exc:  # timeouts too: the cause says which
            raise connection_failure(exc) from exc
        except sdk.OpenAIError as exc:
            raise LLMError(f"the model request failed: {exc}") from exc
        u = reply.usage
        log.debug(
            "%s: %d prompt tokens (%d cached), %d out (%d reasoning)",
            self.name,
            u.prompt_tokens,
            u.cached_tokens,
            u.completion_tokens,
            u.reasoning_tokens,
        )
        await spend(self.name, Amount(u))  # charged to whom the task is for
        return reply

    async def _stream(self, body: dict[str, Any], on_text: OnText | None) -> ModelResponse:
        """A streamed request: text deltas shown as they come, the final response read whole.
        The SDK retries a failed request itself; a stream that breaks before its first token is
        started again (bounded), one that breaks later is an error."""
        sdk = _openai()
        for attempt in range(self.max_retries + 1):
            emitted = False
            stream = await self.sdk.responses.create(**body, stream=True)
            try:
                async with stream:
                    async for event in stream:
                        if event.type == "response.output_text.delta" and event.delta:
                            emitted = True
                            await emit(on_text, event.delta)
                        elif event.type in _FINAL:
                            return parse(event.response.to_dict())
                        elif event.type == "response.failed":
                            raise _failed(event.response.error)
                        elif event.type == "error":
                            raise _failed(event)
            except sdk.APIConnectionError as exc:
                if emitted or attempt == self.max_retries:
                    raise
                log.warning("the stream broke before its first token (%s); starting again", exc)
                continue
            raise LLMError("the model's stream ended without its response")
        raise AssertionError("unreachable")


def _failed(error: Any) -> LLMError:
    """A failure the API reported inside a stream (an ``error`` event, a failed response)."""
    code = str(getattr(error, "code", None) or "")
    detail = f"the model endpoint failed the response ({code or 'error'}): "
    detail += str(getattr(error, "message", None) or "")[:300]
    if "rate_limit" in code:
        return ModelRateLimited(detail)
    return status_failure(500 if code in ("server_error", "") else 400, detail)


def _openai() -> ModuleType:
    return importlib.import_module("openai")
