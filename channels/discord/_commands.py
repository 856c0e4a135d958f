"""The slash commands (/reset, /stop, /help, ...: the engine's commands but Telegram's /start) as
discord.py ``app_commands``, each handing its interaction to the adapter's events."""

from __future__ import annotations

from typing import Any

import discord
from discord import app_commands

from channels.discord._events import Events
from engine import Command

SLASH = tuple(c for c in Command if c is not Command.START)  # /start is Telegram's


def slash_command(events: Events, command: Command) -> app_commands.Command[Any, ..., None]:
    async def callback(interaction: discord.Interaction) -> None:
        await events.on_command(interaction, command)

    async def with_text(interaction: discord.Interaction, text: str | None = None) -> None:
        await events.on_command(interaction, command, text or "")

    if command.argument is not None:  # one optional text option, read as Telegram's arguments
        described = app_commands.describe(text=command.argument[:100])(with_text)
        return app_commands.Command(
            name=command.value, description=command.description, callback=described
        )
    return app_commands.Command(
        name=command.value, description=command.description, callback=callback
    )
