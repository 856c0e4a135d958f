"""Questions and buttons: a confirmation prompt and the press that answers it, the chat commands,
a command's reply with its buttons and the press on one, and how a button's payload is written
and read (short enough for Telegram's 64 bytes; checked by the engine, never trusted).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from engine.i18n import N_, translator


class Choice(enum.StrEnum):
    """An answer to a confirmation, as a button (or a typed word) offers it."""

    ONCE = "y"  # run this call
    ALWAYS = "a"  # run it, and from now on this tool in this chat without asking
    CANCEL = "n"  # do not run it

    @property
    def label(self) -> str:
        return _CHOICE_LABELS[self]

    def text(self, language: str | None) -> str:
        """The button's label in `language`."""
        return translator(language).gettext(_CHOICE_LABELS[self])

    @property
    def approves(self) -> bool:
        return self is not Choice.CANCEL


_CHOICE_LABELS = {
    Choice.ONCE: N_("Allow once"),
    Choice.ALWAYS: N_("Always allow here"),
    Choice.CANCEL: N_("Don't run"),
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
    language: str | None = None  # the requester's (engine.i18n): the buttons and notes in it


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
    MEMORY = "memory"
    USERS = "users"
    CONSOLE = "console"

    @classmethod
    def typed(cls, text: str) -> Command | None:
        """The command a typed line starts with (`/help`, `/reset now`), or None."""
        word = text.split(maxsplit=1)[0].lower() if text.strip() else ""
        try:
            return cls(word[1:]) if word.startswith("/") else None
        except ValueError:
            return None

    @property
    def description(self) -> str:
        """The line a platform's command menu shows."""
        return _COMMAND_HELP[self]

    def describe(self, language: str | None) -> str:
        """:attr:`description` in `language`."""
        return translator(language).gettext(_COMMAND_HELP[self])

    @property
    def argument(self) -> str | None:
        """What the text after the command says (a slash command's option), if it takes any."""
        return _COMMAND_ARGUMENTS.get(self)

    def argument_in(self, language: str | None) -> str | None:
        """:attr:`argument` in `language`."""
        argument = _COMMAND_ARGUMENTS.get(self)
        return translator(language).gettext(argument) if argument else None


_COMMAND_HELP = {
    Command.START: N_("Say hello and show your user id"),
    Command.HELP: N_("What I can do"),
    Command.RESET: N_("Forget this conversation and start afresh"),
    Command.STOP: N_("Stop what I am doing (and cancel a pending confirmation)"),
    Command.RETRY: N_("Ask again: replace my last answer with a new one"),
    Command.UNDO: N_("Forget your last message and my answer to it"),
    Command.PERMISSIONS: N_("What I may do here without asking; revoke it"),
    Command.USAGE: N_("How much you have used me today and this month"),
    Command.SCHEDULES: N_("Scheduled tasks in this chat; cancel them"),
    Command.SETTINGS: N_("This chat's persona, model, reply mode and language"),
    Command.COMPACT: N_("Condense this conversation into a summary to save tokens"),
    Command.FORGET_ME: N_("Delete everything I have stored about you (asks first)"),
    Command.MEMORY: N_("What I remember about you; delete any of it"),
    Command.USERS: N_("Who may use me; let people in (owners only)"),
    Command.CONSOLE: N_("A one-time link to the web console, in private (owners only)"),
}


_COMMAND_ARGUMENTS = {
    Command.SETTINGS: N_("What to change, e.g. persona You are a pirate / model <name> / mode all"),
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
    language: str | None = None  # the presser's, as the platform says (engine.i18n)


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
    language: str | None = None  # the presser's, as the platform says (engine.i18n)


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
