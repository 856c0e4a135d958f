"""What a line typed in ``relaybot chat`` means: a command (``/help``, ``/reset now``), an
answer to a confirmation's yes/no question, or (anything else) a message for the model."""

from __future__ import annotations

import re

from engine import Choice, Command

ANSWERS = {"y": Choice.ONCE, "yes": Choice.ONCE, "n": Choice.CANCEL, "no": Choice.CANCEL}
_COMMANDS = ", ".join(f"/{c}" for c in Command)
_COMMAND_LIKE = re.compile(r"^/[A-Za-z_]+$")


def unknown_command(text: str) -> str | None:
    """What to say to a line that looks like a command but is none of them (None: it is not)."""
    if _COMMAND_LIKE.match(text) and Command.typed(text) is None:
        return f"Unknown command {text}. Commands: {_COMMANDS}."
    return None
