"""What the store holds, as typed rows: what the parts take and give back, the same for every
backend (a flag is a bool, a time unix seconds, a state its enum)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine._channel import Attachment
from engine.models import TRUSTED, Provenance, ToolCall, member, untrusted
from engine.store._types._states import (
    ConfirmationState,
    DeliveryState,
    InboxState,
    JobState,
    ReplyMode,
    RunState,
    ScheduleState,
    VoiceReplies,
)


@dataclass(frozen=True, slots=True)
class Conversation:
    id: int
    channel: str
    chat_id: str
    is_private: bool


@dataclass(frozen=True, slots=True)
class InboxRow:
    id: int
    channel: str
    chat_id: str
    message_id: str
    user_id: str
    user_name: str
    text: str
    is_private: bool
    state: InboxState
    hold_until: float | None = None  # held back by the rate limit until then
    attachments: tuple[Attachment, ...] = ()  # references only, never the bytes
    quote: str | None = None  # what it replies to, as the model is shown it (chat/_quotes.py)
    forwarded: str | None = None  # a forwarded message: who wrote it

    @property
    def speaker(self) -> str | None:
        """Who wrote it, as the model is told in a group (by name, never by id)."""
        return None if self.is_private else self.user_name or "someone"

    @property
    def provenance(self) -> Provenance:
        """Its words are the requester's in a private chat; in a group, its author's; a
        forwarded message's are someone else's."""
        if self.forwarded is not None:
            return untrusted(f"a message forwarded from {self.forwarded}")
        return TRUSTED if self.is_private else member(self.speaker or "", self.user_id)

    def ready(self, now: float) -> bool:
        """Whether it may be taken at `now` (not held back by the rate limit any more)."""
        return self.hold_until is None or self.hold_until <= now


@dataclass(frozen=True, slots=True)
class ConfirmationRow:
    id: str
    conversation_id: int
    channel: str
    chat_id: str
    user_id: str
    user_name: str
    tool: str
    call_id: str
    args: dict[str, Any]
    summary: str
    details: str
    remaining: list[ToolCall]
    iteration: int
    state: ConfirmationState
    message_ref: str | None
    reply_to: str | None
    expires_at: float
    offered: str = "yn"  # the answers its prompt offers (Choice values): a press must be one


@dataclass(frozen=True, slots=True)
class JobRow:
    id: str
    conversation_id: int
    channel: str
    chat_id: str
    user_id: str
    tool: str
    args: dict[str, Any]
    resumable: bool
    state: JobState
    result: str | None
    for_user: str | None
    is_error: bool
    is_private: bool = False  # its conversation is a private chat (False: a group, or gone)
    resume: str | None = None  # where the running job is, kept by its tool (set_resume)
    untrusted: str | None = None  # its result's source, when nobody in the chat wrote it


@dataclass(frozen=True, slots=True)
class Delivery:
    """An answer stored for a chat and whether the platform has it (`ref`: its message id)."""

    message_id: int
    conversation_id: int
    channel: str
    chat_id: str
    text: str
    reply_to: str | None
    state: DeliveryState
    ref: str | None


@dataclass(frozen=True, slots=True)
class Grant:
    """A standing permission: `tool` runs without asking in this chat."""

    channel: str
    chat_id: str
    tool: str
    granted_by: str
    granted_by_name: str
    granted_at: float


@dataclass(frozen=True, slots=True)
class UsageTotals:
    """What one user spent over a period (a day, a month)."""

    user_id: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    turns: int = 0
    tool_calls: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class UserDay:
    """One user's tokens and cost on one day (UTC), all chats and models together."""

    channel: str
    user_id: str
    day: str
    tokens: int
    nano_usd: int


@dataclass(frozen=True, slots=True)
class Spent:
    """What requests cost over a period, for one user, chat or model (`of`), or all of them:
    their count, tokens (a reasoning model's thinking among them), pictures made, characters
    spoken, seconds heard, and nano-dollars (a model without a price adds its figures and no
    cost)."""

    of: str = ""
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    images: int = 0
    chars: int = 0
    seconds: float = 0.0
    nano_usd: int = 0
    reasoning_tokens: int = 0  # of completion_tokens, spent thinking

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    """A recurring task: `task` is run as a request of `user_id` in its chat at each due time.

    `kind` is "cron" (`spec` a cron expression read in `timezone`) or "interval" (`spec` a
    number of seconds). `next_due` (unix time) is the next run not yet recorded.
    """

    id: int
    channel: str
    chat_id: str
    user_id: str
    user_name: str
    is_private: bool
    task: str
    kind: str
    spec: str
    timezone: str
    next_due: float
    state: ScheduleState
    created_at: float


@dataclass(frozen=True, slots=True)
class ScheduleRun:
    """One run of a schedule, keyed by its due time; `missed` counts the earlier due times that
    passed while relaybot was down and were skipped in favour of this one."""

    schedule_id: int
    due: float
    state: RunState
    missed: int = 0
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ChatPrefs:
    """A chat's own settings (/settings); None means the configured default."""

    channel: str
    chat_id: str
    persona: str | None = None
    model: str | None = None
    reply_mode: ReplyMode | None = None
    voice: VoiceReplies | None = None  # spoken answers (None: to voice messages)
    language: str | None = None  # relaybot's own words here (engine.i18n); None: the user's
    thinking: bool = False  # a short view of the model's reasoning is shown before an answer


@dataclass(frozen=True, slots=True)
class Summary:
    """The running summary of a conversation's older messages, sent in their place.

    It covers the stored messages with ids `first_id`..`last_id` (inclusive); the messages stay
    in the store, only what is sent changes.
    """

    conversation_id: int
    text: str
    first_id: int
    last_id: int
    sources: tuple[Provenance, ...] = ()  # where what it folded came from, but the trusted


@dataclass(frozen=True, slots=True)
class TokenRatio:
    """What a model's provider counts per token relaybot estimates, learned from its usage.

    `window` is a context window the provider itself revealed (in an overflow error), when it is
    smaller than the configured or discovered one.
    """

    model: str
    ratio: float
    samples: int
    window: int | None = None
