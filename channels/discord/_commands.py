"""The slash commands (/reset, /stop, /help, ...: the engine's commands but Telegram's /start) as
discord.py ``app_commands``, each handing its interaction to the adapter's events. Their
descriptions are localized for Discord's command menu in every language relaybot speaks
(:class:`Localizations`, discord.py's translator hook, used when the commands are synced)."""

from __future__ import annotations

from typing import Any

import discord
from discord import app_commands

from channels.discord._events import Events
from engine import Command
from engine.i18n import DEFAULT, supported, translator

SLASH = tuple(c for c in Command if c is not Command.START)  # /start is Telegram's


def slash_command(events: Events, command: Command) -> app_commands.Command[Any, ..., None]:
    async def callback(interaction: discord.Interaction) -> None:
        await events.on_command(interaction, command)

    async def with_text(interaction: discord.Interaction, text: str | None = None) -> None:
        await events.on_command(interaction, command, text or "")

    description = app_commands.locale_str(command.description)
    if command.argument is not None:  # one optional text option, read as Telegram's arguments
        argument = app_commands.locale_str(command.argument[:100])
        described = app_commands.describe(text=argument)(with_text)
        return app_commands.Command(name=command.value, description=description, callback=described)
    return app_commands.Command(name=command.value, description=description, callback=callback)


class Localizations(app_commands.Translator):
    """The commands' descriptions (and their option's) in the language of a Discord locale;
    None (Discord shows the English) where relaybot has no catalog or no translation."""

    async def translate(
        self,
        string: app_commands.locale_str,
        locale: discord.Locale,
        context: app_commands.TranslationContextTypes,
    ) -> str | None:
        language = supported(str(locale.value))
        if language is None or language == DEFAULT:
            return None
        said = translator(language).gettext(string.message)
        return said[:100] if said != string.message else None
