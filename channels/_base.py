"""The contract between a chat platform adapter and the engine.

An adapter turns platform events into :class:`InboundMessage` / decisions / commands and hands
them to an :class:`Engine`; the engine talks back only through the :class:`Channel` methods
(send, edit, typing, show and resolve a confirmation). Adapters hold no conversation state.
"""

from __future__ import annotations

import abc
import enum
import re
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """One user message, normalised across platforms."""

    channel: str  # "telegram", "discord", "console"
    chat_id: str  # the conversation: a Telegram chat, a Discord channel/thread/DM
    user_id: str
    user_name: str
    text: str
    message_id: str  # platform message/update id, unique per channel (redelivery de-duplication)
    is_private: bool = True
    mentioned: bool = False
    reply_to: str | None = None  # platform id of the message this one replies to


@dataclass(frozen=True, slots=True)
class MessageRef:
    """Where a message the bot sent lives, so it can be edited later."""

    chat_id: str
    message_id: str


@dataclass(frozen=True, slots=True)
class Capabilities:
    max_message_length: int
    buttons: bool
    edits: bool
    markdown: str  # "telegram-html", "discord", "plain"
    edit_interval_s: float = 1.0  # streaming: at most one edit per this many seconds per chat
    typing_interval_s: float = 4.0  # how often the typing indicator must be refreshed


@dataclass(frozen=True, slots=True)
class ConfirmationPrompt:
    """A destructive action waiting for its requester's yes or no."""

    id: str  # short hex id; fits in Telegram callback data and Discord custom_id
    chat_id: str
    user_id: str
    user_name: str
    tool: str
    summary: str  # human-readable: what will happen
    expires_at: float  # unix time
    reply_to: str | None = None


class Command(enum.StrEnum):
    START = "start"
    HELP = "help"
    RESET = "reset"
    STOP = "stop"


class DecisionStatus(enum.StrEnum):
    APPROVED = "approved"
    DECLINED = "declined"
    NOT_YOURS = "not_yours"
    ALREADY_DECIDED = "already_decided"
    EXPIRED = "expired"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Decision:
    """What the engine made of a button press; `message` is a short text for the presser."""

    status: DecisionStatus
    message: str

    @property
    def accepted(self) -> bool:
        return self.status in (DecisionStatus.APPROVED, DecisionStatus.DECLINED)


class Engine(Protocol):
    """What an adapter may call. Every method returns quickly: turns run in the background."""

    async def handle_inbound(self, msg: InboundMessage) -> None:
        """Persist `msg` (idempotent on channel + message_id) and queue its turn."""

    async def handle_decision(self, confirmation_id: str, user_id: str, approved: bool) -> Decision:
        """Record a button press; the engine edits the prompt message itself."""

    async def handle_command(self, msg: InboundMessage, command: Command) -> str:
        """Run /start, /help, /reset or /stop for `msg`'s chat; returns the text to reply."""


class Channel(abc.ABC):
    """A chat platform adapter. The engine sees only these methods."""

    name: str
    capabilities: Capabilities

    @abc.abstractmethod
    async def start(self, engine: Engine) -> None:
        """Begin delivering messages to `engine`. Returns once connected, or at once when the
        platform is unreachable (the adapter keeps retrying in the background)."""

    @abc.abstractmethod
    async def stop(self) -> None:
        """Stop taking messages and disconnect."""

    @abc.abstractmethod
    async def send(
        self, chat_id: str, text: str, *, reply_to: str | None = None, formatted: bool = True
    ) -> MessageRef:
        """Send `text` (Markdown when `formatted`), split to the platform's limit.

        Returns the reference of the last part sent.
        """

    @abc.abstractmethod
    async def edit(self, ref: MessageRef, text: str, *, formatted: bool = True) -> None:
        """Replace the text of a message the bot sent (used for streaming)."""

    @abc.abstractmethod
    async def typing(self, chat_id: str) -> None:
        """Show the typing indicator once (the engine refreshes it)."""

    @abc.abstractmethod
    async def show_confirmation(self, prompt: ConfirmationPrompt) -> MessageRef:
        """Show `prompt` with [Confirm] [Cancel] (or a yes/no text fallback)."""

    @abc.abstractmethod
    async def resolve_confirmation(self, ref: MessageRef, text: str) -> None:
        """Edit a confirmation message to its final `text` and remove its buttons."""


# Button payloads, shared by every adapter: "rb:<id>:y" / "rb:<id>:n" (well inside 64 bytes).
_DECISION_RE = re.compile(r"^rb:(?P<id>[0-9a-f]{6,32}):(?P<choice>[yn])$")


def encode_decision(confirmation_id: str, approved: bool) -> str:
    return f"rb:{confirmation_id}:{'y' if approved else 'n'}"


def parse_decision(data: str) -> tuple[str, bool] | None:
    """Return (confirmation id, approved) for a payload made by :func:`encode_decision`."""
    m = _DECISION_RE.match(data or "")
    if m is None:
        return None
    return m["id"], m["choice"] == "y"
