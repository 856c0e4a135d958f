"""The contract between a chat platform adapter and the engine, defined by the engine.

An adapter turns platform events into :class:`InboundMessage`, :class:`Press` and
:class:`Command` and hands them to an :class:`Engine`; the engine talks back only through the
:class:`Channel` methods (send, edit, typing, show and resolve a confirmation, send files,
download an attachment). Adapters hold no conversation state.

A picture, file or voice note arrives as an :class:`Attachment`: what the platform says about it
and its platform reference, never its bytes. The engine decides what it accepts, and fetches the
bytes through :meth:`Channel.download` when it needs them, which also works after a restart: the
inbox keeps the reference. Arrows point inward: ``channels`` imports this module, the engine never
imports ``channels``.
"""

from __future__ import annotations

import abc
import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from tools.errors import DownloadError


class MediaKind(enum.StrEnum):
    """What an attachment is, as far as the platform tells: the engine decides the rest."""

    IMAGE = "image"  # a photo, a static sticker, an image file
    AUDIO = "audio"  # a voice note or an audio file
    FILE = "file"  # any other file (a text file, an archive, a video, ...)


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file that came with a message: what the platform says about it, and its reference."""

    kind: MediaKind
    name: str  # a file name ("photo.jpg" when the platform gives none)
    mime_type: str  # "" when the platform does not say
    size: int | None  # in bytes, as the platform reports it (None: not told)
    ref: str  # how the adapter fetches it: Telegram's file_id, Discord's attachment URL
    duration_s: float | None = None  # a voice note's or audio file's length, when told


@dataclass(frozen=True, slots=True)
class OutgoingFile:
    """A file the bot sends: its name, MIME type and content."""

    name: str
    mime_type: str
    data: bytes


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
    attachments: tuple[Attachment, ...] = ()
    group_id: str | None = None  # messages sent as one (a Telegram album) share this id


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


class Choice(enum.StrEnum):
    """An answer to a confirmation, as a button (or a typed word) offers it."""

    ONCE = "y"  # run this call
    ALWAYS = "a"  # run it, and from now on this tool in this chat without asking
    CANCEL = "n"  # do not run it

    @property
    def label(self) -> str:
        return _CHOICE_LABELS[self]

    @property
    def approves(self) -> bool:
        return self is not Choice.CANCEL


_CHOICE_LABELS = {
    Choice.ONCE: "Allow once",
    Choice.ALWAYS: "Always allow here",
    Choice.CANCEL: "Don't run",
}


@dataclass(frozen=True, slots=True)
class ConfirmationPrompt:
    """A destructive action waiting for its requester's answer.

    An adapter shows `summary` (one human line), then `details` (the complete action, exactly
    what will run) as a code block in the same message as the buttons. When `details` does not
    fit, the visible part says so and the complete text goes with the prompt as a file: the
    action is never cut silently and the buttons never sit on a part that does not show it.
    """

    id: str  # short hex id; fits in Telegram callback data and Discord custom_id
    chat_id: str
    user_id: str
    user_name: str
    tool: str
    summary: str  # human-readable: what will happen
    expires_at: float  # unix time
    reply_to: str | None = None
    details: str = ""  # the complete action (tool and arguments), shown verbatim
    choices: tuple[Choice, ...] = (Choice.ONCE, Choice.CANCEL)


class Command(enum.StrEnum):
    START = "start"
    HELP = "help"
    RESET = "reset"
    STOP = "stop"
    RETRY = "retry"
    UNDO = "undo"
    PERMISSIONS = "permissions"
    USAGE = "usage"
    SCHEDULES = "schedules"
    SETTINGS = "settings"
    COMPACT = "compact"
    FORGET_ME = "forget_me"

    @property
    def description(self) -> str:
        """The line a platform's command menu shows."""
        return _COMMAND_HELP[self]

    @property
    def argument(self) -> str | None:
        """What the text after the command says (a slash command's option), if it takes any."""
        return _COMMAND_ARGUMENTS.get(self)


_COMMAND_HELP = {
    Command.START: "Say hello and show your user id",
    Command.HELP: "What I can do",
    Command.RESET: "Forget this conversation and start afresh",
    Command.STOP: "Stop what I am doing (and cancel a pending confirmation)",
    Command.RETRY: "Ask again: replace my last answer with a new one",
    Command.UNDO: "Forget your last message and my answer to it",
    Command.PERMISSIONS: "What I may do here without asking; revoke it",
    Command.USAGE: "How much you have used me today and this month",
    Command.SCHEDULES: "Scheduled tasks in this chat; cancel them",
    Command.SETTINGS: "This chat's persona, model and reply mode",
    Command.COMPACT: "Condense this conversation into a summary to save tokens",
    Command.FORGET_ME: "Delete everything I have stored about you (asks first)",
}


_COMMAND_ARGUMENTS = {
    Command.SETTINGS: "What to change, e.g. persona You are a pirate / model <name> / mode all",
}


@dataclass(frozen=True, slots=True)
class Press:
    """A button press (or a typed answer) on a confirmation prompt.

    Everything here comes from the platform's event, except `confirmation_id` and `choice`,
    which come from the button's payload and are therefore checked by the engine against the
    confirmation it names (same channel, chat and requester; still pending; still allowed).
    """

    channel: str
    chat_id: str
    user_id: str
    confirmation_id: str
    choice: Choice


class Claim(enum.Enum):
    """This instance's claim on a receiving part (see engine/work/_receivers.py)."""

    EQUAL = "equal"  # every instance's alike: taken by whoever finds it free
    OWN = "own"  # this instance's (Discord's shard_ids): taken when free, asked back if not
    FALLBACK = "fallback"  # another instance's: taken while that one is down, given back


@dataclass(frozen=True, slots=True)
class Receiver:
    """A part of a channel's receiving side, held by one instance at a time when several share
    a store: Telegram's long polling, the Discord gateway, or one Discord shard."""

    lease: str  # the store's name for it: "telegram", "discord", "discord/shard-3"
    claim: Claim = Claim.EQUAL


@dataclass(frozen=True, slots=True)
class Button:
    """A button under a command's reply; its `action` comes back in an :class:`Action`."""

    label: str
    action: str  # short: [A-Za-z0-9_:.-]{1,61} (Telegram allows 64 bytes of payload)


@dataclass(frozen=True, slots=True)
class Reply:
    """What a command (or a press on one of its buttons) shows: text, and buttons under it."""

    text: str
    buttons: tuple[Button, ...] = ()


@dataclass(frozen=True, slots=True)
class Action:
    """A press on a command reply's button. Like a :class:`Press`, the platform, chat and user
    come from the platform's event; only `action` comes from the button's payload."""

    channel: str
    chat_id: str
    user_id: str
    action: str
    is_private: bool = False  # a DM; False (a group) unless the adapter knows otherwise


class DecisionStatus(enum.StrEnum):
    APPROVED = "approved"
    DECLINED = "declined"
    NOT_YOURS = "not_yours"
    ALREADY_DECIDED = "already_decided"
    EXPIRED = "expired"
    UNKNOWN = "unknown"
    NOT_NOW = "not_now"  # the engine is stopping: the press was not taken, the buttons stay


@dataclass(frozen=True, slots=True)
class Decision:
    """What the engine made of a press; `message` is a short text for the presser."""

    status: DecisionStatus
    message: str

    @property
    def accepted(self) -> bool:
        return self.status in (DecisionStatus.APPROVED, DecisionStatus.DECLINED)


class Engine(Protocol):
    """What an adapter may call. Every method returns quickly: turns run in the background."""

    async def handle_inbound(self, msg: InboundMessage) -> None:
        """Persist `msg` (idempotent on channel + chat + message_id) and queue its turn."""

    async def handle_press(self, press: Press) -> Decision:
        """Record a press on a confirmation; the engine edits the prompt message itself."""

    async def handle_command(self, msg: InboundMessage, command: Command) -> Reply:
        """Run a command for `msg`'s chat; returns what to reply."""

    async def handle_action(self, action: Action) -> Reply:
        """Run a press on a command reply's button; returns what that message shows now."""

    def listens(self, channel: str, chat_id: str) -> bool:
        """True when the group chat asked for every message, not only those addressed to the
        bot: the adapter then hands those to :meth:`handle_inbound` too. Synchronous and
        cheap (a set lookup), for an adapter's message filter."""


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

    # Several instances sharing one store (work/_cluster.py): every one can send; each part of
    # a channel's receiving side is held by one of them at a time. A channel with such parts
    # names them, and switches each on and off, before or after start.

    def receivers(self) -> Sequence[Receiver]:
        """The parts of the receiving side one instance at a time holds; none (the default):
        every instance receives all of its own (a webhook behind a load balancer, a console)."""
        return ()

    async def set_receiving(self, lease: str, on: bool, resume: str | None = None) -> str | None:
        """Take messages for the part `lease` names (True, as after start) or not (False),
        staying able to send. Turning on, `resume` is what the part's previous holder left (see
        :meth:`receiving_state`); turning off returns what the next holder resumes from."""
        return None

    def receiving_state(self, lease: str) -> str | None:
        """What another instance would resume the part from if this one died now (a Discord
        shard's gateway session, so the events it missed are sent again); kept in the store a
        second later while the part is held here. None: nothing to resume."""
        return None

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
        """Show `prompt` with a button per choice (or a typed-answer fallback)."""

    @abc.abstractmethod
    async def resolve_confirmation(self, ref: MessageRef, text: str) -> None:
        """Edit a confirmation message to its final `text` and remove its buttons."""

    @abc.abstractmethod
    async def send_files(
        self, chat_id: str, files: Sequence[OutgoingFile], *, reply_to: str | None = None
    ) -> MessageRef:
        """Send `files` in order, natively (pictures as pictures); returns the last one's ref."""

    async def download(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        """The content of an attachment of an inbound message, through the platform's file API.

        Raises :class:`DownloadError` when it cannot be fetched, or when the platform says it is
        larger than `max_bytes` (checked before the body is read). The caller sets the timeout.
        """
        raise DownloadError(f"the {self.name} channel receives no files")

    async def is_chat_admin(self, chat_id: str, user_id: str) -> bool:
        """True when the platform says `user_id` administers the group `chat_id` (then they
        may change its /settings). A platform without groups keeps this default."""
        return False


# Button payloads, shared by every adapter: "rb:<id>:<choice>" (well inside 64 bytes).
DECISION_PATTERN = r"rb:(?P<id>[0-9a-f]{6,32}):(?P<choice>[yan])"
_DECISION_RE = re.compile(f"^{DECISION_PATTERN}$")


ACTION_PATTERN = r"ra:(?P<action>[A-Za-z0-9_:.-]{1,61})"
_ACTION_RE = re.compile(f"^{ACTION_PATTERN}$")


def encode_action(action: str) -> str:
    if not _ACTION_RE.match(f"ra:{action}"):
        raise ValueError(f"not a valid button action: {action!r}")
    return f"ra:{action}"


def parse_action(data: str) -> str | None:
    """The action of a payload made by :func:`encode_action`, else None."""
    m = _ACTION_RE.match(data or "")
    return m["action"] if m else None


def encode_decision(confirmation_id: str, choice: Choice) -> str:
    return f"rb:{confirmation_id}:{choice.value}"


def parse_decision(data: str) -> tuple[str, Choice] | None:
    """Return (confirmation id, choice) for a payload made by :func:`encode_decision`."""
    m = _DECISION_RE.match(data or "")
    if m is None:
        return None
    return m["id"], Choice(m["choice"])


__all__ = [
    "ACTION_PATTERN",
    "DECISION_PATTERN",
    "Action",
    "Attachment",
    "Button",
    "Capabilities",
    "Channel",
    "Choice",
    "Command",
    "ConfirmationPrompt",
    "Decision",
    "DecisionStatus",
    "Engine",
    "InboundMessage",
    "MediaKind",
    "MessageRef",
    "OutgoingFile",
    "Press",
    "Reply",
    "encode_action",
    "encode_decision",
    "parse_action",
    "parse_decision",
]
