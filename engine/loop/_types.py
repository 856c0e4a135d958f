"""The values a turn is made of: whose chat it is, what it may do, and how it ended."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.loop._containment import Taint
from engine.models import Message, OnText, ToolCall, Usage
from tools import File, ToolResult
from tools.registry import Send
from tools.registry import no_send as _no_send

Record = Callable[[Message], Awaitable[None]]
SendFiles = Callable[[Sequence[File]], Awaitable[str]]  # returns a note for the model
# a tool call starts: its tool, its arguments, and the line the tool describes its step with
Step = Callable[[str, dict[str, Any], str | None], None]


@dataclass(frozen=True, slots=True)
class ConversationKey:
    channel: str
    chat_id: str

    def __str__(self) -> str:
        return f"{self.channel}:{self.chat_id}"


@dataclass(slots=True)
class TurnContext:
    """Who the turn is for, what the model is told, and how to reach the user."""

    key: ConversationKey
    user_id: str
    user_name: str = ""
    send: Send = _no_send  # shows text to the user as it is (for_user results, ctx.send)
    on_text: OnText | None = None  # streamed text deltas
    tools: Collection[str] | None = None  # tool names offered in this turn; None = all
    system: str = ""  # the system prompt of this turn
    send_files: SendFiles | None = None  # sends a tool's files to the user
    granted: frozenset[str] = frozenset()  # destructive tools that run here without asking
    # where `granted` is read from, at the turn's first destructive call (None: read already)
    grants: Callable[[], Awaitable[frozenset[str]]] | None = None
    max_tool_calls: int | None = None  # tool calls this turn may make (None: no limit)
    model: str | None = None  # the model this chat chose (/settings); None: the default
    is_private: bool = False  # a private chat (tools then act for the user alone)
    on_step: Step | None = None  # told of each tool call as it starts (never waits)


@dataclass(slots=True)
class PendingCall:
    """A destructive call halted before it ran, waiting for its requester."""

    id: str
    call_id: str
    tool: str
    args: dict[str, Any]
    summary: str
    user_id: str
    expires_at: float
    remaining: list[ToolCall]  # calls of the same reply not processed yet (raw arguments)
    iteration: int
    details: str = ""  # the complete action, shown verbatim next to the buttons
    after: tuple[str, ...] = ()  # the untrusted sources read before it: why it asks (containment)


@dataclass(slots=True)
class TurnResult:
    text: str | None  # the answer to send; None when halted for a confirmation
    messages: list[Message]  # every message this call produced, in order
    pending: PendingCall | None = None
    usage: Usage = field(default_factory=Usage)  # summed over the turn's requests
    tool_calls: list[str] = field(default_factory=list)  # names of the tools called, in order
    approved: ToolResult | None = None  # the outcome of the approved call a resume ran
    taint: Taint = field(default_factory=lambda: Taint(""))  # what untrusted content it read

    @property
    def thoughts(self) -> str:
        """What the model thought in this turn, as a reader may be shown it ("" when nothing)."""
        said = (r.summary.strip() for m in self.messages for r in m.reasoning)
        return "\n\n".join(s for s in said if s)
