"""One turn as it runs, and what it starts from: the types the runner's steps pass along
(engine/chat/_turns/_runner.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from engine._channel import Channel
from engine._clock import monotonic
from engine.chat._settings._tooling import Tooling
from engine.chat._turns._streaming import LiveReply
from engine.context import Window
from engine.loop import TurnContext
from engine.models import Message
from engine.store import ConfirmationRow, Conversation, InboxRow

# a confirmation answered: its row, whether approved, and the reason a refusal gave
Resume = tuple[ConfirmationRow, bool, str | None]


@dataclass(frozen=True, slots=True)
class Start:
    """What a turn starts from: the history, and with a context budget its window."""

    window: Window | None
    history: list[Message]


@dataclass(slots=True)
class Turn:
    """One turn as it runs: where it answers, with which tooling, and what it has stored."""

    conv: Conversation
    ctx: TurnContext
    channel: Channel
    tooling: Tooling  # the one in force when it started, kept to its end
    reply_to: str | None
    answering: Sequence[InboxRow]  # the messages it answers (none for a resumed turn)
    started: float  # monotonic
    live: LiveReply | None  # the reply as it streams; None: sent whole at the end
    answer: list[int] = field(default_factory=list)  # the stored answer's message ids
    # what the model has read so far (history, then each message stored): how the texts shown
    # to the chat are shown after untrusted content (engine/chat/_turns/_untrusted.py)
    read: list[Message] = field(default_factory=list)

    def seconds(self) -> float:
        return monotonic() - self.started

    def answered_ids(self) -> list[int]:
        return [r.id for r in self.answering]
