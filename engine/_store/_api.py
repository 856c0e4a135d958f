"""The store as each consumer sees it: one narrow protocol per part of the engine.

A backend (SQLite, PostgreSQL) implements :class:`Store`, whose attributes are the parts. The
engine depends on these protocols only, and ``tests/test_store_contract.py`` checks every backend
against them, unchanged. A backend that several processes can share also has a
:class:`ClusterStore` (``Store.cluster``; None for one that only one process may use).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any, Protocol

from engine._channel import InboundMessage
from engine._store._records import (
    Adoption,
    ChannelError,
    ChatPrefs,
    ConfirmationRow,
    ConfirmationState,
    Conversation,
    Delivery,
    Forgotten,
    Grant,
    InboxRow,
    JobRow,
    JobState,
    Pruned,
    RunState,
    ScheduleRow,
    ScheduleRun,
    ServerInfo,
    StatusSnapshot,
    StoreCounts,
    Summary,
    TokenRatio,
    UsageTotals,
)
from engine.models import Message


class ConversationStore(Protocol):
    async def active(self, channel: str, chat_id: str, *, is_private: bool = True) -> Conversation:
        """The chat's active conversation, created on first use (safe under concurrency)."""
        ...

    async def reset(self, channel: str, chat_id: str) -> None:
        """Start afresh: the active conversation is kept, inactive."""
        ...

    async def append(
        self,
        conversation_id: int,
        msg: Message,
        *,
        deliver: str | None = None,
        user_id: str | None = None,
    ) -> int:
        """Store `msg`; returns its id. `deliver` (a reply_to id, or "" for none) records that
        the message is an answer still to be delivered; `user_id`, who wrote a user message
        (so forgetting that user deletes it)."""
        ...

    async def history(self, conversation_id: int, limit: int = 200) -> list[Message]:
        """The last `limit` messages, oldest first, starting at a user message when cut."""
        ...

    async def last(self, conversation_id: int) -> Message | None:
        """The conversation's newest message."""
        ...

    async def rewind(self, conversation_id: int, *, keep_question: bool = False) -> int:
        """Delete everything after the last user message (and that message too unless
        `keep_question`); returns how many messages were deleted."""
        ...

    async def close_dangling(
        self, conversation_id: int, reason: str, *, keep: Collection[str] = ()
    ) -> int:
        """Give every recent tool call without a result (but those in `keep`) the error
        result `reason`; returns how many."""
        ...

    async def undelivered(self, channel: str, chat_id: str) -> list[Delivery]:
        """Answers stored for the chat but not yet delivered, oldest first."""
        ...

    async def delivered(self, message_id: int, ref: str | None, *, failed: bool = False) -> None:
        """Record the platform's id of a delivered answer (or that delivery failed for good)."""
        ...


class InboxStore(Protocol):
    async def accept(self, msg: InboundMessage, *, hold_until: float | None = None) -> bool:
        """Record an inbound message once; False when it was delivered before. A message held
        (`hold_until`, unix time) is not taken before then."""
        ...

    async def take_queued(self, channel: str, chat_id: str) -> list[InboxRow]:
        """Move the chat's queued messages into its active conversation as user messages, in
        order, in one transaction; they stay TAKEN until :meth:`answered`."""
        ...

    async def ready(self, channel: str, chat_id: str) -> list[InboxRow]:
        """The chat's queued messages that may be taken now, oldest first."""
        ...

    async def take(self, conversation_id: int, taken: Sequence[tuple[InboxRow, Message]]) -> None:
        """Like :meth:`take_queued`, for these rows (from :meth:`ready`) only, each as the given
        user message (what its attachments became: engine/chat/_media.py)."""
        ...

    async def rows(self, state: Any, channel: str, chat_id: str) -> list[InboxRow]:
        """The chat's inbox rows in `state` (an InboxState), oldest first."""
        ...

    async def answered(self, ids: Sequence[int]) -> None: ...

    async def unfinished_chats(self) -> list[tuple[str, str]]:
        """Chats with messages not answered yet."""
        ...

    async def sent_since(self, channel: str, user_id: str, since: float) -> list[float]:
        """When the user's messages received since `since` arrived, oldest first."""
        ...

    async def next_release(self, channel: str, chat_id: str) -> float | None:
        """When the chat's earliest held message may be taken (None: none is held)."""
        ...

    async def prune(self, older_than: float) -> int:
        """Delete answered rows received before `older_than` (unix time); returns how many."""
        ...


class ConfirmationStore(Protocol):
    async def add(self, row: ConfirmationRow) -> None: ...

    async def get(self, confirmation_id: str) -> ConfirmationRow | None: ...

    async def in_state(
        self, state: ConfirmationState, channel: str | None = None, chat_id: str | None = None
    ) -> list[ConfirmationRow]: ...

    async def transition(
        self, confirmation_id: str, from_state: ConfirmationState, to_state: ConfirmationState
    ) -> bool:
        """Move atomically; False if it was not in `from_state`. Raises ValueError for a
        transition the table (engine/_store/_records.py) does not list."""
        ...

    async def set_ref(self, confirmation_id: str, message_ref: str) -> None: ...


class JobStore(Protocol):
    async def add(
        self,
        conversation: Conversation,
        job_id: str,
        user_id: str,
        tool: str,
        args: dict[str, Any],
        *,
        resumable: bool,
    ) -> bool:
        """Record a started job; False when a job with that id exists already."""
        ...

    async def get(self, job_id: str) -> JobRow | None: ...

    async def in_state(self, state: JobState) -> list[JobRow]: ...

    async def finish(self, job_id: str, result: str, for_user: str | None, is_error: bool) -> bool:
        """Store a job's result once; False when it had finished before."""
        ...

    async def transition(self, job_id: str, from_state: JobState, to_state: JobState) -> bool: ...


class GrantStore(Protocol):
    """Standing permissions: a tool that runs without asking in one chat."""

    async def grant(
        self, channel: str, chat_id: str, tool: str, user_id: str, user_name: str
    ) -> None: ...

    async def in_chat(self, channel: str, chat_id: str) -> list[Grant]: ...

    async def revoke(self, channel: str, chat_id: str, tool: str | None = None) -> int: ...


class UsageStore(Protocol):
    """What each user spent, per day (UTC, "YYYY-MM-DD")."""

    async def add(
        self,
        channel: str,
        user_id: str,
        day: str,
        prompt_tokens: int,
        completion_tokens: int,
        tool_calls: int,
    ) -> None:
        """Add one turn's figures."""
        ...

    async def totals(self, channel: str, user_id: str, day_prefix: str) -> UsageTotals: ...

    async def top(self, channel: str, day_prefix: str, limit: int = 5) -> list[UsageTotals]: ...


class NoteStore(Protocol):
    """The notes tools' store (tools.builtins.NotesStore). `owner` is "<channel>:<user id>"."""

    async def add_note(self, owner: str, text: str) -> int: ...

    async def list_notes(
        self, owner: str, query: str | None = None, limit: int = 20
    ) -> list[tuple[int, str, float]]: ...

    async def delete_note(self, owner: str, note_id: int) -> bool: ...


class ScheduleStore(Protocol):
    """Scheduled tasks: the tools' side (tools.builtins.ScheduleBook) and the scheduler's."""

    async def add_schedule(
        self,
        channel: str,
        chat_id: str,
        user_id: str,
        task: str,
        kind: str,
        spec: str,
        timezone: str,
        next_due: float,
    ) -> ScheduleRow: ...

    async def chat_schedules(self, channel: str, chat_id: str) -> list[ScheduleRow]: ...

    async def cancel_schedule(self, channel: str, chat_id: str, schedule_id: int) -> bool: ...

    async def user_timezone(self, channel: str, user_id: str) -> str | None: ...

    async def set_user_timezone(self, channel: str, user_id: str, timezone: str) -> None: ...

    async def get(self, schedule_id: int) -> ScheduleRow | None: ...

    async def due(self, until: float) -> list[ScheduleRow]: ...

    async def next_due(self) -> float | None: ...

    async def claim(
        self, schedule_id: int, expected: float, run: ScheduleRun, next_due: float
    ) -> bool:
        """Record `run` and move the schedule's next run from `expected` to `next_due`
        atomically; False when it was not active at `expected`, or that run exists."""
        ...

    async def runs(self, state: RunState) -> list[ScheduleRun]: ...

    async def run(self, schedule_id: int, due: float) -> ScheduleRun | None: ...

    async def transition(
        self,
        schedule_id: int,
        due: float,
        from_state: RunState,
        to_state: RunState,
        error: str | None = None,
    ) -> bool: ...

    async def wait_changed(self) -> None:
        """Return once a schedule was added or cancelled since the last call."""
        ...


class ChatSettingsStore(Protocol):
    """Each chat's own settings (/settings)."""

    async def all(self) -> list[ChatPrefs]: ...

    async def save(self, prefs: ChatPrefs, user_id: str) -> None: ...


class OpsStore(Protocol):
    """Operating it: what the daemon is doing, its last errors, bounded growth, forgetting."""

    async def status(self) -> StatusSnapshot:
        """What is queued, running and waiting (`relaybot status`); works on a read-only store."""
        ...

    async def counts(self) -> StoreCounts: ...

    async def record_errors(self, errors: Sequence[ChannelError]) -> None:
        """Keep each channel's newest error (one row per channel)."""
        ...

    async def prune(self, settled_before: float, history_before: float | None = None) -> Pruned:
        """Delete what is settled (answered inbox rows, sent deliveries, finished jobs and
        scheduled runs, decided confirmations) from before `settled_before`; with
        `history_before`, also each conversation's messages from before then, cut at a user
        message so every remaining tool result keeps its call. Unix times."""
        ...

    async def compact(self) -> None:
        """Give space back between bursts (SQLite: checkpoint and truncate the WAL; PostgreSQL:
        nothing, the server keeps its own log)."""
        ...

    async def forget_user(
        self, channel: str | None, user_id: str, *, dry_run: bool = False
    ) -> Forgotten:
        """Delete everything stored about a user of `channel` (None: of every channel), in one
        transaction: their private chats whole; in groups their messages and the bot's
        messages of the exchanges they took part in; their inbox rows, notes, reminders and
        jobs, schedules, confirmations, grants they gave, usage and settings; the summaries
        that cover any of it. `dry_run` counts without deleting."""
        ...


class ClusterStore(Protocol):
    """What instances sharing one store keep there (engine/work/_cluster.py drives it): liveness,
    who holds each chat and each channel's receiving side, and notifications of work."""

    @property
    def incarnation(self) -> int | None: ...

    async def join(self, name: str, lease_s: float) -> int:
        """Register this process as a new live instance; returns its id."""
        ...

    async def heartbeat(self) -> bool:
        """Renew this instance's lease; False when it was found dead and taken over."""
        ...

    async def leave(self) -> None:
        """A clean stop: what this instance still holds is taken over at once."""
        ...

    async def adopt(self, channels: Sequence[str]) -> Adoption | None:
        """Take over one dead instance's chats (of `channels`) and running jobs, if any."""
        ...

    async def orphans(self, channels: Sequence[str]) -> Adoption:
        """Claim the chats (of `channels`) with unfinished work nobody holds, and the jobs
        nobody runs."""
        ...

    async def claim(self, channel: str, chat_id: str) -> bool:
        """Hold a chat that nobody holds; False when another instance holds it."""
        ...

    async def release(self, channel: str, chat_id: str) -> None: ...

    async def holder(self, channel: str, chat_id: str) -> str | None:
        """The name of the live instance holding the chat, if any."""
        ...

    async def receive(self, parts: Sequence[str]) -> dict[str, str | None]:
        """Hold those receiving parts that no live instance holds, keeping those held here;
        returns the ones held here, with what their last holder left to resume from."""
        ...

    async def checkpoint(self, part: str, resume: str | None) -> None:
        """Keep what another instance would resume `part` from if this one died now."""
        ...

    async def stop_receiving(self, part: str, resume: str | None = None) -> None: ...

    async def publish(self, payload: str) -> None:
        """Tell every instance (this one too); delivered once committed."""
        ...

    def on_signal(self, listener: Callable[[str], None]) -> None: ...

    def on_reconnect(self, hook: Callable[[], Awaitable[None]]) -> None:
        """Run `hook` after notifications may have been missed."""
        ...

    async def listen(self) -> None: ...

    async def server(self) -> ServerInfo:
        """The server's version, a round trip's time and the live instances."""
        ...


class ContextStore(Protocol):
    """The context budget's memory: each conversation's running summary, and per model the
    ratio of the provider's token counts to relaybot's estimates."""

    async def summary(self, conversation_id: int) -> Summary | None: ...

    async def save_summary(self, summary: Summary) -> None:
        """Replace the conversation's summary (the messages it covers stay stored)."""
        ...

    async def messages_after(
        self, conversation_id: int, after_id: int, limit: int
    ) -> list[tuple[int, Message]]:
        """(id, message) of the last `limit` messages with an id above `after_id`, oldest
        first, starting at a user message when cut. The last user message and what follows it
        are always included, even at or below `after_id` (the turn that answers it needs it,
        e.g. after /retry removed the answer a summary had covered)."""
        ...

    async def token_ratio(self, model: str) -> TokenRatio | None: ...

    async def save_token_ratio(self, ratio: TokenRatio) -> None: ...


class Store(Protocol):
    """A backend: its parts, one transaction spanning them, and its lifecycle."""

    conversations: ConversationStore
    inbox: InboxStore
    confirmations: ConfirmationStore
    jobs: JobStore
    notes: NoteStore
    grants: GrantStore
    usage: UsageStore
    schedules: ScheduleStore
    chat_settings: ChatSettingsStore
    ops: OpsStore
    cluster: ClusterStore | None  # None: one process at a time (SQLite)
    context: ContextStore

    def transaction(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Writes of every part inside the block commit together, or not at all."""
        ...

    async def schema_version(self) -> int: ...

    async def __aenter__(self) -> Store: ...

    async def __aexit__(self, *exc: object) -> None: ...
