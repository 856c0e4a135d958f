"""The provider-neutral model layer: what the loop sends a model and what it gets back.

A conversation is a list of :class:`Message`, each a role and a list of parts (text, image, tool
call, tool result, the model's reasoning). The store keeps messages in this shape; each provider
(``models/_openai.py``, ``models/_responses.py``, ``models/_anthropic.py``) translates them on
the way out and the reply on the way back, so the loop, the store and the stored history never
see a provider's format, and a conversation started on one provider goes on with another (a
reasoning item goes back only to the API that made it). The system prompt travels apart from the
messages (:attr:`ModelRequest.system`), as most providers want it.

A :class:`Model` raises :class:`tools.LLMError` (or a subclass) when a request fails after its
own retries; the error's text is for the log, never for a chat.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from engine.models._provenance import TRUSTED, Provenance
from tools.registry import ToolDefinition

OnText = Callable[[str], Awaitable[None] | None]


class Role(enum.StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"  # a tool's result, answering one call of the assistant message before it


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Image:
    """An image the model can look at: inline bytes, or a URL the provider fetches.

    An image a user sent is stored by its platform reference (`ref`) and `size`, not its bytes;
    the turn fetches the bytes again when the image is recent enough to send (chat/_media.py).
    """

    media_type: str
    data: bytes | None = field(default=None, repr=False)
    url: str | None = None
    name: str = ""
    ref: str | None = None  # the chat platform's reference (Telegram file_id, Discord URL)
    size: int | None = None  # bytes


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # the raw JSON text the model sent


@dataclass(frozen=True, slots=True)
class ToolOutput:
    call_id: str
    text: str
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class Reasoning:
    """What a model thought before the text and calls of its message.

    `api` names whose item it is ("responses", "anthropic", "chat"); `item` is that API's own
    item as JSON text (a Responses ``reasoning`` item with its encrypted content, an Anthropic
    ``thinking`` or ``redacted_thinking`` block with its signature), sent back verbatim to that
    API alone and never to another ("" when nothing is to be sent back: an open model's
    thoughts); `summary` is what a reader may be shown of it (a summary, or the thoughts).
    """

    api: str
    item: str = field(default="", repr=False)
    summary: str = ""


Part = Text | Image | ToolCall | ToolOutput | Reasoning


@dataclass(slots=True)
class Message:
    """One message of a conversation. `speaker` names who wrote a user message in a group;
    `quote` is the message a user message replied to, as the model is shown it in the turn that
    answers it (engine/context/_prompt.py), and only then; `provenance` is where its words came
    from (engine/models/_provenance.py)."""

    role: Role
    parts: list[Part] = field(default_factory=list)
    speaker: str | None = None
    quote: str | None = None
    provenance: Provenance = TRUSTED

    @classmethod
    def user(
        cls,
        text: str,
        *,
        speaker: str | None = None,
        images: Sequence[Image] = (),
        provenance: Provenance = TRUSTED,
    ) -> Message:
        return cls(Role.USER, [Text(text), *images], speaker, provenance=provenance)

    @classmethod
    def assistant(
        cls, text: str | None, calls: Sequence[ToolCall] = (), reasoning: Sequence[Reasoning] = ()
    ) -> Message:
        """The model's message: its reasoning first (as the APIs want it back), then its text,
        then its calls."""
        parts: list[Part] = [Text(text)] if text else []
        return cls(Role.ASSISTANT, [*reasoning, *parts, *calls])

    @classmethod
    def tool_result(
        cls, call_id: str, text: str, *, is_error: bool = False, provenance: Provenance = TRUSTED
    ) -> Message:
        return cls(Role.TOOL, [ToolOutput(call_id, text, is_error)], provenance=provenance)

    @property
    def text(self) -> str | None:
        """The text parts joined (a tool result's text for a tool message); None if none."""
        texts = [p.text for p in self.parts if isinstance(p, Text | ToolOutput)]
        return "\n".join(texts) if texts else None

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [p for p in self.parts if isinstance(p, ToolCall)]

    @property
    def result(self) -> ToolOutput | None:
        """The tool result a tool message carries."""
        return next((p for p in self.parts if isinstance(p, ToolOutput)), None)

    @property
    def reasoning(self) -> list[Reasoning]:
        return [p for p in self.parts if isinstance(p, Reasoning)]

    @property
    def images(self) -> list[Image]:
        return [p for p in self.parts if isinstance(p, Image)]

    @property
    def is_answer(self) -> bool:
        """An assistant message meant for the user: text and no tool calls."""
        return self.role is Role.ASSISTANT and bool(self.text) and not self.tool_calls


# A tool as a model sees it: the registry's one canonical definition (name, description, JSON
# Schema, its strict-mode variant, tier), which each provider maps to its own format.
ToolSpec = ToolDefinition


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One request. `max_output_tokens` caps this answer whatever the model is configured with
    (a summary asks for its own room); `output_room` is the room the context budget left for
    the answer, the cap of a model configured without one (a local server would otherwise write
    until its window is full)."""

    system: str
    messages: Sequence[Message]
    tools: Sequence[ToolSpec] = ()
    stream: bool = False
    max_output_tokens: int | None = None
    output_room: int | None = None


class FinishReason(enum.StrEnum):
    STOP = "stop"
    TOOL_CALLS = "tool_calls"
    LENGTH = "length"  # cut by the output limit
    REFUSAL = "refusal"  # the provider's content filter or a refusal
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens of one request (or summed over a turn). `prompt_tokens` counts the whole prompt,
    cached parts included: `cached_tokens` of it were read from the provider's prompt cache,
    `cache_write_tokens` were written to it."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0  # of completion_tokens, spent thinking

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cached_tokens + other.cached_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
        )


@dataclass(frozen=True, slots=True)
class ModelResponse:
    text: str | None
    tool_calls: list[ToolCall]
    finish_reason: FinishReason
    usage: Usage = Usage()
    model: str = ""
    reasoning: tuple[Reasoning, ...] = ()  # what the model thought first, in its order

    @property
    def thoughts(self) -> str:
        """What a reader may be shown of the reasoning ("" when none)."""
        return "\n\n".join(r.summary for r in self.reasoning if r.summary.strip())


class Model(Protocol):
    """What the loop calls. `complete` raises tools.LLMError when the request fails."""

    name: str

    async def complete(self, request: ModelRequest, on_text: OnText | None = None) -> ModelResponse:
        """One request; `on_text` receives text deltas when `request.stream` is set."""
        ...

    async def warm_up(self) -> None:
        """Load what the first request needs (an SDK import) without blocking the event loop."""
        ...

    async def aclose(self) -> None: ...


def sanitised(call: ToolCall) -> ToolCall:
    """The call as it is stored: arguments that are not a JSON object become a valid one."""
    raw = call.arguments.strip()
    if not raw:
        return ToolCall(call.id, call.name, "{}")
    try:
        if isinstance(json.loads(raw), dict):
            return call
    except json.JSONDecodeError:
        pass
    return ToolCall(call.id, call.name, json.dumps({"invalid_json": raw[:2000]}))
