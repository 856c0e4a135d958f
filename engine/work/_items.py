"""The typed work items that travel through a chat's queue (engine/work/_queue.py), dispatched
with ``match``: new messages, what a restart left unsettled, a confirmation's answer, a
background result, a notice, a rewind, a scheduled run, a compaction.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Inbound:
    """Take the chat's queued inbox messages and answer them in one turn."""


@dataclass(frozen=True, slots=True)
class Recover:
    """Settle what a crash left in this chat: deliver stored answers, finish cut-off turns."""


@dataclass(frozen=True, slots=True)
class Decided:
    """A confirmation was answered (or expired): run or refuse the call, go on with the turn."""

    confirmation_id: str


@dataclass(frozen=True, slots=True)
class JobDone:
    """A background job's result is stored: put it in the history and tell the user."""

    job_id: str


@dataclass(frozen=True, slots=True)
class Notice:
    """A text relaybot itself must show in the chat, in order with the answers."""

    text: str
    reply_to: str | None = None


@dataclass(frozen=True, slots=True)
class Rewind:
    """/retry or /undo: drop the last exchange (and for a retry, answer the message again).
    `done` receives the text to reply once it ran in the chat's order."""

    retry: bool
    user_id: str
    user_name: str
    done: asyncio.Future[str] = field(compare=False, repr=False)
    language: str = "en"  # of the reply (engine.i18n)


@dataclass(frozen=True, slots=True)
class ScheduledRun:
    """A scheduled task's run, claimed in the store for its due time: run its turn now."""

    schedule_id: int
    due: float


@dataclass(frozen=True, slots=True)
class Compact:
    """/compact: fold the chat's earlier turns into its summary, in order with its turns;
    `done` receives the text to answer with."""

    done: asyncio.Future[str] = field(compare=False, repr=False)
    user_id: str = ""  # who asked: the summary requests are charged to them
    language: str = "en"  # of the reply (engine.i18n)


WorkItem = Inbound | Recover | Decided | JobDone | Notice | Rewind | ScheduledRun | Compact
