"""Discord → engine: gateway messages, slash commands and button presses handed to the engine.

Whether an event is for the bot is decided without side effects (``_inbound``); these handlers
act on it and answer within Discord's limits (``_interactions``). An interaction from before
this instance resumed its shard, sent again by the resume, is not acted on (its user was told it
failed); an interaction from a server not in ``allowed_guilds`` is refused. A message the store
cannot record now is held and handed over again (``_held``), and settled (``_unstored``) only
once it is recorded, so a restart has Discord send it again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import discord

from channels._config import DiscordConfig
from channels.discord._buttons import menu
from channels.discord._client import Client
from channels.discord._guilds import Guilds
from channels.discord._held import Held
from channels.discord._inbound import guild_allowed, inbound
from channels.discord._interactions import too_late_to_answer, within_ack_budget
from channels.discord._threads import Threads
from channels.discord._unstored import Unstored
from engine import Action, Choice, Command, Engine, InboundMessage, Press
from engine.i18n import translator

PERSONAL = frozenset({Command.USAGE, Command.MEMORY, Command.SETTINGS, Command.PERMISSIONS})

log = logging.getLogger("channels.discord")

CHANNEL = "discord"


class Handlers:
    """The adapter's :class:`~channels.discord._events.Events`: `engine()` is the engine the
    adapter was started with, `client()` the running client (None: not running)."""

    def __init__(
        self,
        config: DiscordConfig,
        engine: Callable[[], Engine],
        client: Callable[[], Client | None],
        guilds: Guilds,
        threads: Threads,
        unstored: Unstored,
        ack_budget_s: float = 2.0,
    ) -> None:
        self._config = config
        self._ack_budget_s = ack_budget_s
        self._engine = engine
        self._client = client
        self._guilds = guilds
        self._threads = threads
        hand = self._engine_inbound
        self.held = Held(hand, unstored.settled)  # what the store refused, until it takes it

    async def _engine_inbound(self, msg: InboundMessage) -> None:
        await self._engine().handle_inbound(msg)

    async def on_message(self, message: discord.Message, me: discord.ClientUser) -> bool:
        """Hand a gateway message to the engine; True when it is held (see ``_held``)."""
        engine = self._engine()
        bot_roles: set[int] = set()
        guild_id = message.guild.id if message.guild else getattr(message.channel, "guild_id", 0)
        if guild_id and message.raw_role_mentions and not message.role_mentions:
            guild = await self._guilds.uncached(guild_id)  # a resumed shard's server
            bot_roles = {r.id for r in guild.roles if r.tags and r.tags.bot_id == me.id}

        def listens(chat_id: str) -> bool:
            return engine.listens(CHANNEL, chat_id)

        in_thread = self._config.reply_in_thread
        own_thread = in_thread and await self._threads.own(message, me)
        msg = inbound(message, me, self._config, listens, bot_roles, own_thread=own_thread)
        if msg is None:
            return False
        if in_thread and not own_thread:
            msg = await self._threads.start_for(message, msg)
        return await self.held.hand(msg)  # held while the store refuses

    async def on_command(
        self, interaction: discord.Interaction, command: Command, text: str = ""
    ) -> None:
        with too_late_to_answer():
            await self._command(interaction, command, text)

    async def _command(self, interaction: discord.Interaction, command: Command, text: str) -> None:
        if self._replayed(interaction) or not await self._guild_allowed(interaction):
            return
        msg = InboundMessage(
            channel=CHANNEL,
            chat_id=str(interaction.channel_id),
            user_id=str(interaction.user.id),
            user_name=interaction.user.display_name,
            text=f"/{command.value} {text}".strip(),
            message_id=str(interaction.id),
            is_private=interaction.guild_id is None,
            mentioned=True,
            language=locale_of(interaction),
        )
        # /help, and in a server the answers about the member who asked (private replies)
        ephemeral = command is Command.HELP or (not msg.is_private and command in PERSONAL)
        work = self._engine().handle_command(msg, command)
        reply = await within_ack_budget(
            interaction, work, thinking=True, ephemeral=ephemeral, budget_s=self._ack_budget_s
        )
        text, view = reply.text or translator(msg.language).gettext("Done."), menu(reply)
        if interaction.response.is_done():
            if view is None:
                await interaction.followup.send(text, ephemeral=ephemeral)
            else:
                await interaction.followup.send(text, ephemeral=ephemeral, view=view)
        elif view is None:
            await interaction.response.send_message(text, ephemeral=ephemeral)
        else:
            await interaction.response.send_message(text, ephemeral=ephemeral, view=view)

    async def on_action(self, interaction: discord.Interaction, action: str) -> None:
        """A press on a command reply's button: the message shows what the engine says now."""
        with too_late_to_answer():
            await self._action(interaction, action)

    async def _action(self, interaction: discord.Interaction, action: str) -> None:
        if self._replayed(interaction) or not await self._guild_allowed(interaction):
            return
        pressed = Action(
            CHANNEL,
            str(interaction.channel_id),
            str(interaction.user.id),
            action,
            interaction.guild_id is None,
            locale_of(interaction),
        )
        work = self._engine().handle_action(pressed)
        reply = await within_ack_budget(
            interaction, work, thinking=False, ephemeral=True, budget_s=self._ack_budget_s
        )
        try:  # the press was handled: a refused edit (the message gone) is one log line
            if interaction.response.is_done():
                await interaction.edit_original_response(content=reply.text, view=menu(reply))
            else:
                await interaction.response.edit_message(content=reply.text, view=menu(reply))
        except discord.HTTPException as exc:
            log.warning("discord: the menu in %s was not updated: %s", interaction.channel_id, exc)

    async def on_decision(
        self, interaction: discord.Interaction, confirmation_id: str, choice: Choice
    ) -> None:
        with too_late_to_answer():
            await self._decision(interaction, confirmation_id, choice)

    async def _decision(
        self, interaction: discord.Interaction, confirmation_id: str, choice: Choice
    ) -> None:
        if self._replayed(interaction) or not await self._guild_allowed(interaction):
            return
        press = Press(
            CHANNEL,
            str(interaction.channel_id),
            str(interaction.user.id),
            confirmation_id,
            choice,
            locale_of(interaction),
        )
        work = self._engine().handle_press(press)
        decision = await within_ack_budget(
            interaction, work, thinking=False, ephemeral=True, budget_s=self._ack_budget_s
        )
        if decision.accepted:  # the engine edits the prompt itself (resolve_confirmation)
            if not interaction.response.is_done():
                await interaction.response.defer()  # "deferred update": no visible reply
        elif interaction.response.is_done():
            await interaction.followup.send(decision.message, ephemeral=True)
        else:
            await interaction.response.send_message(decision.message, ephemeral=True)

    def _replayed(self, interaction: discord.Interaction) -> bool:
        client = self._client()
        if client is None or not client.replayed(interaction):
            return False
        log.info(
            "discord: not acting on an interaction by user %s from before this instance resumed"
            " its shard: too old to answer, its user was told it failed",
            interaction.user.id,
        )
        return True

    async def _guild_allowed(self, interaction: discord.Interaction) -> bool:
        guild_id = interaction.guild_id
        if guild_id is None or guild_allowed(guild_id, self._config):
            return True
        log.debug("discord: interaction from guild %s, not in allowed_guilds", guild_id)
        not_here = translator(locale_of(interaction)).gettext("I'm not enabled in this server.")
        await interaction.response.send_message(not_here, ephemeral=True)
        return False


def locale_of(interaction: discord.Interaction) -> str:
    """The language of the user's Discord app ("de", "es-ES", "zh-CN"), as the interaction says."""
    return str(interaction.locale.value)
