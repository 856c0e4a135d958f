"""What a line typed in ``relaybot chat`` means: a command (``/help``, ``/reset now``), an
answer to a confirmation's yes/no question, or (anything else) a message for the model."""

from __future__ import annotations

import re

from engine import Choice, Command

ANSWERS = {"y": Choice.ONCE, "yes": Choice.ONCE, "n": Choice.CANCEL, "no": Choice.CANCEL}
_COMMANDS = ", ".join(f"/{c}" for c in Command)
_COMMAND_LIKE = re.compile(r"^/[A-Za-z_]+$")


def command_of(text: str) -> Command | None:
    """The command a line starts with (`/help`, `/reset now`), or None."""
    word = text.split(maxsplit=1)[0].lower() if text.strip() else ""
    try:
        return Command(word[1:]) if word.startswith("/") else None
    except ValueError:
        return None


def unknown_command(text: str) -> str | None:
    """What to say to a line that looks like a command but is none of them (None: it is not)."""
    if _COMMAND_LIKE.match(text) and command_of(text) is None:
        return f"Unknown command {text}. Commands: {_COMMANDS}."
    return None
