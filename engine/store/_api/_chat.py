"""The store as a chat's turns see it: conversations and deliveries, the inbox, confirmations,
background jobs, and the context budget's memory. One protocol per part (see ``_api``)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Protocol

from engine._channel import InboundMessage
from engine.models import Message
from engine.store._types._rows import (
    ConfirmationRow,
    Conversation,
    Delivery,
    InboxRow,
    JobRow,
    Summary,
    TokenRatio,
)
from engine.store._types._states import ConfirmationState, JobState


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

    async def history(
        self, conversation_id: int, limit: int = 200, *, with_stopped: bool = False
    ) -> list[Message]:
        """The last `limit` messages, oldest first, starting at a user message when cut; the
        turns the user stopped left out (unless `with_stopped`)."""
        ...

    async def last(self, conversation_id: int) -> Message | None:
        """The conversation's newest message (of those not stopped)."""
        ...

    async def lasts(self, conversation_ids: Sequence[int]) -> dict[int, Message]:
        """The newest message (not stopped) of each of these conversations (those that have
        one), in one statement per few hundred."""
        ...

    async def rewind(self, conversation_id: int, *, keep_question: bool = False) -> int:
        """Delete everything after the last user message (and that message too unless
        `keep_question`; kept, a stopped question is no longer stopped); returns how many
        messages were deleted."""
        ...

    async def stop_turn(self, conversation_id: int) -> int:
        """Mark the latest turn as stopped by the user, from the user messages it answers on,
        unless an answer ended it; returns how many messages were marked. Marked messages are
        left out of every read a request is built from."""
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
    async def accept(
        self, msg: InboundMessage, *, hold_until: float | None = None, quote: str | None = None
    ) -> bool:
        """Record an inbound message once; False when it was delivered before. A message held
        (`hold_until`, unix time) is not taken before then; `quote` is what it replies to, as
        the model is shown it with the message."""
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
        user message (what its attachments became: engine/chat/_intake/_media.py)."""
        ...

    async def rows(self, state: Any, channel: str, chat_id: str) -> list[InboxRow]:
        """The chat's inbox rows in `state` (an InboxState), oldest first."""
        ...

    async def answered(
        self, ids: Sequence[int], *, delivered: tuple[int, str] | None = None
    ) -> None:
        """These rows are answered; `delivered`: by the answer (its message id, and the
        platform's id for it) whose delivery is recorded with them, at once."""
        ...

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
        transition the table (engine/store/_types/_states.py) does not list."""
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

    async def finish(
        self,
        job_id: str,
        result: str,
        for_user: str | None,
        is_error: bool,
        untrusted: str | None = None,
    ) -> bool:
        """Store a job's result once (`untrusted`: where it came from, when nobody in the chat
        wrote it); False when it had finished before."""
        ...

    async def transition(self, job_id: str, from_state: JobState, to_state: JobState) -> bool: ...

    async def set_resume(self, job_id: str, resume: str) -> bool:
        """Keep where a running job is (e.g. the MCP task it waits for), for its resumption
        after a restart; False when it is no longer running."""
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
