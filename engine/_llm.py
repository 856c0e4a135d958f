"""A thin adapter over openai.AsyncOpenAI. Our own message types at the boundary."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

from tools import LLMError

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

OnText = Callable[[str], Awaitable[None] | None]


@dataclass(slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # the raw JSON text the model sent


@dataclass(slots=True)
class Message:
    """One chat message in the OpenAI shape, minus the SDK."""

    role: str  # "system", "user", "assistant", "tool"
    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None

    def to_openai(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in self.tool_calls
            ]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out


@dataclass(slots=True)
class Completion:
    content: str | None
    tool_calls: list[ToolCall]
    finish_reason: str | None


class LLMClient:
    """Chat completions, plain or streamed, over the official SDK.

    `timeout_s` and `max_retries` are set explicitly (the SDK's 600 s default is far too long for
    a chat). `options` (temperature, max_tokens, ...) are passed through to every request.
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
        http_client: Any = None,
    ) -> None:
        self.model = model
        self.max_retries = max_retries
        self.options = dict(options or {})
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
            openai = _openai()
            settings = dict(self._settings)
            if settings["http_client"] is None:
                # aiohttp's connection pool stays cheap with many connections open; httpx's
                # scans every pooled connection on each request (measurable at 100 chats).
                settings["http_client"] = openai.DefaultAioHttpClient()
            self._sdk = openai.AsyncOpenAI(**settings)
        return self._sdk

    async def warm_up(self) -> None:
        """Import the SDK in a worker thread (it takes ~0.4 s), so that neither start-up nor
        the event loop waits for it."""
        if self._sdk is None:
            await asyncio.to_thread(_openai)

    async def aclose(self) -> None:
        if self._sdk is not None:
            await self._sdk.close()

    async def complete(
        self,
        messages: Sequence[Message],
        tools: list[dict[str, Any]] | None = None,
        *,
        stream: bool = False,
        on_text: OnText | None = None,
    ) -> Completion:
        """One model request. Raises LLMError (with a readable reason) when it fails."""
        request: dict[str, Any] = {
            **self.options,
            "model": self.model,
            "messages": [m.to_openai() for m in messages],
        }
        if tools:
            request["tools"] = tools
        await self.warm_up()
        openai = _openai()
        try:
            if not stream:
                return self._parse(await self._create(request, stream=False))
            for attempt in range(self.max_retries + 1):
                started = False

                async def mark(delta: str) -> None:
                    nonlocal started
                    started = True
                    if on_text is not None:
                        r = on_text(delta)
                        if inspect.isawaitable(r):
                            await r

                try:
                    return await self._stream(request, mark)
                except (openai.APIConnectionError, openai.APIStatusError) as exc:
                    if started or attempt == self.max_retries:
                        raise
                    log.warning("stream failed before its first token (%s); retrying", exc)
            raise AssertionError("unreachable")
        except openai.APIStatusError as exc:
            raise LLMError(
                f"the model endpoint answered {exc.status_code}: {_reason(exc)}"
            ) from exc
        except openai.APITimeoutError as exc:
            raise LLMError("the model endpoint timed out") from exc
        except openai.APIConnectionError as exc:
            raise LLMError(f"the model endpoint is unreachable ({exc.__cause__ or exc})") from exc
        except openai.OpenAIError as exc:
            raise LLMError(f"the model request failed: {exc}") from exc

    @staticmethod
    def _parse(resp: Any) -> Completion:
        if not resp.choices:
            return Completion(None, [], None)
        choice = resp.choices[0]
        msg = choice.message
        calls = [
            ToolCall(c.id, c.function.name, c.function.arguments or "")
            for c in (msg.tool_calls or [])
            if getattr(c, "type", "function") == "function"
        ]
        return Completion(msg.content, calls, choice.finish_reason)

    async def _create(self, request: dict[str, Any], *, stream: bool) -> Any:
        """POST /chat/completions through the SDK's client (auth, retries, timeouts, parsing).

        `chat.completions.create` would first walk the whole history through its type-driven
        transform, several ms of CPU per request for a long conversation; our messages are
        already plain JSON in the API's shape, so they are sent as they are.
        """
        body = {**request, "stream": True} if stream else request
        openai = _openai()
        chat = openai.types.chat
        return await self.sdk.post(
            "/chat/completions",
            body=body,
            cast_to=chat.ChatCompletion,
            options={"security": {"bearer_auth": True}},
            stream=stream,
            stream_cls=openai.AsyncStream[chat.ChatCompletionChunk],
        )

    async def _stream(self, request: dict[str, Any], on_text: OnText) -> Completion:
        stream = await self._create(request, stream=True)
        text: list[str] = []
        calls = _CallAccumulator()
        finish: str | None = None
        async with stream:
            async for chunk in stream:
                if not chunk.choices:
                    continue
                choice = chunk.choices[0]
                delta = choice.delta
                if delta is not None:
                    if delta.content:
                        text.append(delta.content)
                        await on_text(delta.content)
                    for tc in delta.tool_calls or ():
                        calls.add(tc)
                if choice.finish_reason:
                    finish = choice.finish_reason
        return Completion("".join(text) or None, calls.finish(), finish)


class _CallAccumulator:
    """Assembles streamed tool-call deltas: keyed by `index`, else by `id`, else arrival."""

    def __init__(self) -> None:
        self._calls: dict[Any, dict[str, Any]] = {}
        self._last: Any = None

    def add(self, tc: Any) -> None:
        if getattr(tc, "type", None) not in (None, "function"):
            return
        key: Any = tc.index if tc.index is not None else tc.id
        if key is None:  # no index and no id: a continuation of the previous call
            key = self._last if self._last is not None else len(self._calls)
        entry = self._calls.setdefault(key, {"id": None, "name": "", "args": []})
        self._last = key
        if tc.id:
            entry["id"] = tc.id
        fn = tc.function
        if fn is not None:
            if fn.name and fn.name != entry["name"]:  # some servers repeat the name
                entry["name"] += fn.name
            if fn.arguments:
                entry["args"].append(fn.arguments)

    def finish(self) -> list[ToolCall]:
        return [
            ToolCall(e["id"] or f"call_{i}", e["name"], "".join(e["args"]))
            for i, e in enumerate(self._calls.values())
        ]


def _openai() -> ModuleType:
    """The SDK, imported on first use: it costs ~0.4 s and ~45 MB, which start-up need not wait
    for (App warms it up in a thread once the channels are listening)."""
    return importlib.import_module("openai")


def _reason(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
    return str(exc.message)[:300]
