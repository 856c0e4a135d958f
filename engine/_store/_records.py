"""What the store holds, as typed rows, and the state machines of its rows.

Each state machine is one enum and its transition table; the store refuses a transition the
table does not list (``transition`` returns False, and a row never moves backwards).

Inbox message::

    QUEUED ──take──▶ TAKEN ──answer──▶ ANSWERED

Confirmation::

    PENDING ──press yes──▶ APPROVED ──run──▶ EXECUTING ──done──▶ EXECUTED
       │                      │                 └──cut off──▶ INTERRUPTED
       ├──press no──▶ DECLINED └──/stop, /reset──▶ CANCELLED
       ├──timeout──▶ EXPIRED
       └──new message, /stop, /reset──▶ CANCELLED

Background job::

    RUNNING ──result──▶ DONE ──told the chat──▶ DELIVERED
       │  └──restart, resumable──▶ RESUMED ──result──▶ DONE
       └──restart, not resumable──▶ INTERRUPTED   (RESUMED ──restart──▶ RESUMED | INTERRUPTED)

Delivery (an answer the user must see)::

    PENDING ──sent, platform id recorded──▶ SENT
       └──the platform refused it──▶ FAILED

Scheduled task: ACTIVE ──cancel──▶ CANCELLED. One run of it, recorded with its due time before
it runs (so a run is never made twice, and none is lost without the chat being told)::

    QUEUED ──its turn starts──▶ RUNNING ──answered──▶ DONE
       │                           ├──the model or a step failed, /stop──▶ FAILED
       │                           └──restart──▶ INTERRUPTED
       └──cancelled, or too late after a restart──▶ SKIPPED   (missed past the grace: SKIPPED)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from engine._channel import Attachment
from engine.models import ToolCall


class InboxState(enum.StrEnum):
    QUEUED = "queued"
    TAKEN = "taken"
    ANSWERED = "answered"


class ConfirmationState(enum.StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    DECLINED = "declined"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    EXECUTING = "executing"
    EXECUTED = "executed"
    INTERRUPTED = "interrupted"


class JobState(enum.StrEnum):
    RUNNING = "running"
    RESUMED = "resumed"
    DONE = "done"
    DELIVERED = "delivered"
    INTERRUPTED = "interrupted"


class DeliveryState(enum.StrEnum):
    PENDING = "pending"
    SENT = "sent"
    FAILED = "failed"


class ScheduleState(enum.StrEnum):
    ACTIVE = "active"
    CANCELLED = "cancelled"


class RunState(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    SKIPPED = "skipped"


class ReplyMode(enum.StrEnum):
    """Which group messages a chat's answers follow (unset: the channel's own setting)."""

    MENTIONS = "mentions"  # @mentions, replies to the bot, commands
    ALL = "all"  # every message


_C = ConfirmationState
CONFIRMATION_TRANSITIONS: dict[ConfirmationState, frozenset[ConfirmationState]] = {
    _C.PENDING: frozenset({_C.APPROVED, _C.DECLINED, _C.EXPIRED, _C.CANCELLED}),
    _C.APPROVED: frozenset({_C.EXECUTING, _C.CANCELLED}),
    _C.EXECUTING: frozenset({_C.EXECUTED, _C.INTERRUPTED}),
}
_J = JobState
JOB_TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    _J.RUNNING: frozenset({_J.DONE, _J.RESUMED, _J.INTERRUPTED}),
    _J.RESUMED: frozenset({_J.DONE, _J.RESUMED, _J.INTERRUPTED}),
    _J.DONE: frozenset({_J.DELIVERED}),
}

_R = RunState
RUN_TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    _R.QUEUED: frozenset({_R.RUNNING, _R.SKIPPED}),
    _R.RUNNING: frozenset({_R.DONE, _R.FAILED, _R.INTERRUPTED}),
}


def allowed(table: dict[Any, frozenset[Any]], from_state: Any, to_state: Any) -> bool:
    return to_state in table.get(from_state, frozenset())


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

    @property
    def speaker(self) -> str | None:
        """Who wrote it, as the model is told in a group (by name, never by id)."""
        return None if self.is_private else self.user_name or "someone"

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


# -- operating it: what `relaybot status` shows, what housekeeping and forgetting did ------------


@dataclass(frozen=True, slots=True)
class ChannelError:
    """The newest error of a channel (or of the model, as "llm"), as the operator reads it."""

    channel: str
    at: float  # unix time
    text: str  # redacted like the log


@dataclass(frozen=True, slots=True)
class QueuedChat:
    """A chat with messages waiting for their turn."""

    channel: str
    chat_id: str
    messages: int
    oldest: float  # when the oldest arrived (unix time)
    held_until: float | None  # the earliest a message held by the rate limit may be taken


@dataclass(frozen=True, slots=True)
class Running:
    """Work in progress in a chat: a turn answering messages, a scheduled run, an approved
    action."""

    channel: str
    chat_id: str
    what: str
    since: float | None  # unix time it started (None: not recorded, e.g. an older version's)


@dataclass(frozen=True, slots=True)
class PendingPrompt:
    """A confirmation waiting for its requester."""

    id: str
    channel: str
    chat_id: str
    user_id: str
    tool: str
    summary: str
    expires_at: float


@dataclass(frozen=True, slots=True)
class JobView:
    """A background job not yet told to its chat; `due` is a reminder's time (its `at`)."""

    id: str
    channel: str
    chat_id: str
    user_id: str
    tool: str
    state: JobState
    since: float
    due: float | None = None


@dataclass(frozen=True, slots=True)
class UpcomingRun:
    """A scheduled task's next run."""

    schedule_id: int
    channel: str
    chat_id: str
    task: str
    next_due: float


@dataclass(frozen=True, slots=True)
class StatusSnapshot:
    """What the store says the daemon is doing (`relaybot status`)."""

    schema_version: int
    queued: list[QueuedChat]
    running: list[Running]
    confirmations: list[PendingPrompt]
    jobs: list[JobView]
    upcoming: list[UpcomingRun]
    errors: list[ChannelError]
    conversations: int  # active ones
    messages: int  # stored, in every conversation


@dataclass(frozen=True, slots=True)
class StoreCounts:
    """The store's figures for the metrics gauges."""

    confirmations_pending: int
    jobs_running: int
    db_bytes: int
    wal_bytes: int | None  # None: no write-ahead log of the store's own (PostgreSQL)


@dataclass(frozen=True, slots=True)
class Pruned:
    """Rows housekeeping deleted: settled ones past the retention, history past keep_days."""

    inbox: int = 0
    deliveries: int = 0
    jobs: int = 0
    runs: int = 0
    confirmations: int = 0
    messages: int = 0

    @property
    def total(self) -> int:
        return sum(
            (self.inbox, self.deliveries, self.jobs, self.runs, self.confirmations, self.messages)
        )


@dataclass(frozen=True, slots=True)
class Forgotten:
    """What forgetting a user deleted (or would delete: a dry run counts the same way)."""

    messages: int = 0
    conversations: int = 0
    inbox: int = 0
    notes: int = 0
    grants: int = 0
    usage: int = 0
    schedules: int = 0
    settings: int = 0
    confirmations: int = 0
    jobs: int = 0
    summaries: int = 0
    job_ids: tuple[str, ...] = ()  # jobs that may still run in the daemon: cancel them
    private_chats: tuple[tuple[str, str], ...] = ()  # (channel, chat id) removed whole

    def described(self) -> str:
        """The counts in words, the empty ones left out."""
        words = [
            (self.messages, "message", "messages"),
            (self.notes, "note", "notes"),
            (self.schedules, "scheduled task", "scheduled tasks"),
            (self.jobs, "background job or reminder", "background jobs and reminders"),
            (self.confirmations, "confirmation", "confirmations"),
            (self.grants, "permission", "permissions"),
            (self.settings, "setting", "settings"),
            (self.usage, "day of usage figures", "days of usage figures"),
            (self.inbox, "record of a received message", "records of received messages"),
            (self.summaries, "conversation summary", "conversation summaries"),
        ]
        said = [f"{n} {one if n == 1 else many}" for n, one, many in words if n]
        return ", ".join(said) or "nothing"


@dataclass(frozen=True, slots=True)
class Adoption:
    """What an instance took over (engine/work/_cluster.py): a dead instance's chats and running
    jobs (`instance` its name), or chats and jobs that nobody held (`instance` "")."""

    instance: str
    chats: tuple[tuple[str, str], ...]  # (channel, chat id)
    jobs: tuple[str, ...]  # job ids


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """A shared store's server as `relaybot doctor` reports it."""

    version: str
    round_trip_s: float  # the median of a few trivial statements
    instances: tuple[str, ...]  # the live instances' names
    receiving: tuple[tuple[str, str], ...] = ()  # (receiving part, the live instance holding it)


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
