"""One face for the model backends a test can run against, so a case is written once.

A :class:`Backend` gives a real :class:`engine.Model` (the OpenAI provider against the fake
OpenAI server, the Anthropic provider against the fake Anthropic server, or the in-process
ScriptedModel), takes one script language (the reply helpers of
:mod:`tests.fakes.openai_server`: ``text``, ``tool_call(s)``, ``error``), and shows every request
the model received read back into the neutral shape (:class:`Sent`). Reading the provider's JSON
back is written here independently of the providers' own translation, so a case that passes on
every backend shows the translation there and back keeps what the loop meant.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from engine import (
    FinishReason,
    Image,
    Model,
    ModelRequest,
    ModelResponse,
    Role,
    Text,
    ToolCall,
    ToolOutput,
    Usage,
)
from engine.models import AnthropicModel, Message, OpenAIModel, ScriptedModel
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import ErrorReply, FakeOpenAI, Reply, TextReply, ToolCallsReply
from tools.errors import LLMError, ModelAuthError, ModelRateLimited, ModelUnavailable

BACKENDS = ("openai", "anthropic", "scripted")
HTTP_BACKENDS = ("openai", "anthropic")


@dataclass
class Sent:
    """One request as the model received it, in the neutral shape."""

    system: str
    messages: list[Message]
    tools: list[str]  # the tools the model may call

    @property
    def results(self) -> list[ToolOutput]:
        return [m.result for m in self.messages if m.result is not None]

    @property
    def calls(self) -> list[ToolCall]:
        return [c for m in self.messages for c in m.tool_calls]

    @property
    def last_result(self) -> str:
        return self.results[-1].text

    @property
    def images(self) -> list[tuple[Role, Image]]:
        """Each picture sent, with the role of the message it came in."""
        return [(m.role, i) for m in self.messages for i in m.images]


ReplyFn = Callable[[Sent], Reply]


@dataclass
class Backend:
    name: str
    server: FakeOpenAI | None  # FakeAnthropic is one too
    models: list[Model] = field(default_factory=list)
    _scripted: list[Reply] = field(default_factory=list)
    _default: ReplyFn | None = None
    _sent: list[Sent] = field(default_factory=list)  # the scripted model's requests

    def model(self, retries: int = 0, name: str = "fake-model") -> Model:
        """A model on this backend (closed when the backend closes)."""
        if self.name == "openai":
            assert self.server is not None
            model: Model = OpenAIModel(
                base_url=self.server.base_url,
                api_key="k",
                model=name,
                max_retries=retries,
                timeout_s=10,
            )
        elif self.name == "anthropic":
            assert self.server is not None
            model = AnthropicModel(
                base_url=self.server.base_url,
                api_key="k",
                model=name,
                max_retries=retries,
                timeout_s=10,
            )
        else:
            model = ScriptedModel(self._answer, name=name)
        self.models.append(model)
        return model

    def script(self, *replies: Reply) -> None:
        if self.server is not None:
            self.server.script(*replies)
        else:
            self._scripted.extend(replies)

    @property
    def default(self) -> ReplyFn | None:
        return self._default

    @default.setter
    def default(self, fn: ReplyFn) -> None:
        self._default = fn
        if self.server is not None:
            self.server.default = lambda body: fn(self.read(body))

    @property
    def sent(self) -> list[Sent]:
        if self.server is None:
            return self._sent
        return [self.read(body) for body in self.server.requests]

    def read(self, body: dict[str, Any]) -> Sent:
        return read_openai(body) if self.name == "openai" else read_anthropic(body)

    def _answer(self, request: ModelRequest) -> ModelResponse | LLMError:
        sent = Sent(request.system, list(request.messages), [t.name for t in request.tools])
        self._sent.append(sent)
        if self._scripted:
            reply = self._scripted.pop(0)
        elif self._default is not None:
            reply = self._default(sent)
        else:
            raise AssertionError("nothing scripted for this request")
        return as_response(reply)


_ids = itertools.count(1)


def as_response(reply: Reply) -> ModelResponse | LLMError:
    """A scripted HTTP reply as the ScriptedModel's answer."""
    if isinstance(reply, ErrorReply):
        kind = {401: ModelAuthError, 429: ModelRateLimited}.get(reply.status)
        kind = kind or (ModelUnavailable if reply.status >= 500 else LLMError)
        return kind(f"the model endpoint answered {reply.status}: {reply.message}")
    finish = {"stop": FinishReason.STOP, "length": FinishReason.LENGTH}
    if isinstance(reply, TextReply):
        return ModelResponse(
            reply.content or None,
            [],
            finish.get(reply.finish_reason, FinishReason.OTHER),
            Usage(10, 5),
        )
    assert isinstance(reply, ToolCallsReply), reply
    calls = [ToolCall(c.id or f"call_{next(_ids)}", c.name, c.arguments) for c in reply.calls]
    reason = finish.get(reply.finish_reason, FinishReason.TOOL_CALLS)
    return ModelResponse(reply.content, calls, reason, Usage(10, 5))


@contextlib.asynccontextmanager
async def backend(name: str, **server: Any) -> AsyncIterator[Backend]:
    """A backend with its fake server running (none for "scripted")."""
    async with contextlib.AsyncExitStack() as stack:
        fake = None
        if name == "openai":
            fake = await stack.enter_async_context(FakeOpenAI(**server))
        elif name == "anthropic":
            fake = await stack.enter_async_context(FakeAnthropic(**server))
        made = Backend(name, fake)
        try:
            yield made
        finally:
            for model in made.models:
                await model.aclose()


# -- reading a provider's request back ---------------------------------------------------------


def read_openai(body: dict[str, Any]) -> Sent:
    system = ""
    messages: list[Message] = []
    for m in body["messages"]:
        role, content = m["role"], m.get("content")
        if role == "system":
            system = content
        elif role == "tool":
            messages.append(Message.tool_result(m["tool_call_id"], content))
        elif role == "assistant":
            calls = [
                ToolCall(c["id"], c["function"]["name"], c["function"]["arguments"])
                for c in m.get("tool_calls") or []
            ]
            messages.append(Message.assistant(content, calls))
        elif isinstance(content, str):
            messages.append(Message.user(content))
        else:
            parts: list[Any] = [
                Text(p["text"]) if p["type"] == "text" else Image("", url=p["image_url"]["url"])
                for p in content
            ]
            messages.append(Message(Role.USER, parts))
    tools = [t["function"]["name"] for t in body.get("tools") or []]
    return Sent(system, messages, tools)


def read_anthropic(body: dict[str, Any]) -> Sent:
    system = body.get("system") or ""
    if isinstance(system, list):
        system = "\n".join(b["text"] for b in system)
    messages: list[Message] = []
    for turn in body["messages"]:
        content = turn["content"]
        blocks: list[dict[str, Any]] = (
            [{"type": "text", "text": content}] if isinstance(content, str) else content
        )
        if turn["role"] == "assistant":
            text = "".join(b["text"] for b in blocks if b["type"] == "text") or None
            calls = [
                ToolCall(b["id"], b["name"], json.dumps(b["input"]))
                for b in blocks
                if b["type"] == "tool_use"
            ]
            messages.append(Message.assistant(text, calls))
            continue
        parts: list[Any] = []
        for b in blocks:
            if b["type"] == "tool_result":
                result = b.get("content", "")
                shown = []
                if isinstance(result, list):
                    shown = [r for r in result if r["type"] == "image"]
                    result = "".join(r.get("text", "") for r in result)
                message = Message.tool_result(
                    b["tool_use_id"], result, is_error=b.get("is_error", False)
                )
                for r in shown:  # the pictures a tool returned, in its result
                    source = r["source"]
                    message.parts.append(Image(source.get("media_type", ""), url=source.get("url")))
                messages.append(message)
            elif b["type"] == "text":
                parts.append(Text(b["text"]))
            elif b["type"] == "image":
                source = b["source"]
                parts.append(Image(source.get("media_type", ""), url=source.get("url")))
        if parts:
            messages.append(Message(Role.USER, parts))
    choice = (body.get("tool_choice") or {}).get("type")
    tools = [] if choice == "none" else [t["name"] for t in body.get("tools") or []]
    return Sent(system, messages, tools)
