"""The state machines of the store's rows: one enum and one transition table each, and the
one guard (:func:`guard`) every part calls before it moves a row, whatever the backend.

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
from typing import Any


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


class VoiceReplies(enum.StrEnum):
    """When a chat's answers are spoken too (with [media] speech_model; unset: TO_VOICE)."""

    TO_VOICE = "voice"  # a turn that began with a voice message
    ALWAYS = "always"
    NEVER = "never"


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


def guard(what: str, table: dict[Any, frozenset[Any]], from_state: Any, to_state: Any) -> None:
    """The one check every backend makes before moving a row: ValueError for a move `table`
    does not list (`what` names the row: "a confirmation", "a job", "a scheduled run")."""
    if not allowed(table, from_state, to_state):
        raise ValueError(f"{what} cannot go from {from_state} to {to_state}")
