"""/help in the user's words: what the bot can do here, then every command it answers.

A built-in tool is described by what it does for a person ("Remind you of something at the time
you say"), not by its description, which is written for the model ("… before your final
answer"); the tools that only serve another one (recall, list_schedules, send_message, …) add
no line of their own. A plugin's or MCP server's tool is described by its author's first
sentence. Commands come with the line the platform's command menu shows.
"""

from __future__ import annotations

from collections.abc import Iterable

from engine._channel import Command
from engine.i18n import N_, translator
from tools import Tool
from tools.registry import summary

_BUILTIN = {
    "current_time": N_("Tell the date and time, anywhere in the world"),
    "fetch_url": N_("Read a web page or a file from a link you give me"),
    "web_search": N_("Search the web"),
    "remind_me": N_("Remind you of something at the time you say"),
    "remember": N_("Remember what you ask me to, across conversations"),
    "schedule_task": N_("Do a task for you on a schedule, e.g. every morning"),
    "use_skill": N_("Follow the skills installed here (instructions for certain tasks)"),
}
_SERVING = {"send_message", "recall", "forget", "list_schedules", "cancel_schedule", "delegate"}
# every command a user can give, in the order a newcomer needs them; START and HELP are known
_COMMANDS = (
    Command.STOP,
    Command.RESET,
    Command.RETRY,
    Command.UNDO,
    Command.COMPACT,
    Command.SETTINGS,
    Command.PERMISSIONS,
    Command.USAGE,
    Command.SCHEDULES,
    Command.MEMORY,
    Command.FORGET_ME,
)
_OWNERS = (Command.USERS, Command.CONSOLE)


def help_text(tools: Iterable[Tool], language: str | None, *, memory: bool, owner: bool) -> str:
    """The /help answer for these `tools` (those in force) in `language`; `memory`: /memory
    works here; `owner`: the asker is one of the bot's owners."""
    _ = translator(language).gettext
    lines = []
    tools = list(tools)
    names = {tool.name for tool in tools}
    for tool in tools:
        if tool.name in _SERVING:
            continue
        if tool.name in _BUILTIN:
            first = _(_BUILTIN[tool.name])
        else:
            first = summary(tool.description, sentence=True).rstrip(".")
        if first:
            ask = " " + _("(I ask you first)") if tool.destructive else ""
            lines.append(f"• {first[0].upper()}{first[1:]}{ask}")
    skip = set()
    if not memory:
        skip.add(Command.MEMORY)
    if "schedule_task" not in names:
        skip.add(Command.SCHEDULES)
    commands = [c for c in _COMMANDS if c not in skip] + (list(_OWNERS) if owner else [])
    return "\n".join(
        [
            _("Talk to me in plain language. Besides answering, I can:"),
            "\n".join(lines) or _("• Just talk: I have no tools here."),
            "",
            _("Commands:"),
            *(f"/{command.value} — {command.describe(language)}" for command in commands),
        ]
    )
