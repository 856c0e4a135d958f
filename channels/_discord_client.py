"""discord.py's Client with relaybot's start-up, events, slash commands and answer buttons.

Everything here is a discord.py extension point: ``setup_hook`` for async start-up, event methods,
``app_commands`` for /reset /stop /help, and a :class:`discord.ui.DynamicItem` for the answer
buttons, whose state lives in the custom_id so they keep working after a restart. The events are
handed to the adapter (:class:`channels.discord.DiscordChannel`).

A button press reaches the engine only when its custom_id is one of the buttons on the message it
was pressed on: discord.py's DynamicItem dispatch checks that, and presses it drops are answered
in :meth:`_Client.on_interaction` without the engine (a press that raced the edit removing the
buttons gets "no longer works"; a custom_id the message does not carry is refused and logged).

discord.py warns at start-up that the voice libraries (PyNaCl, davey) are missing; relaybot has no
voice, so nobody can act on that warning and it is switched off.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

import aiohttp
import discord
import yarl
from discord import app_commands
from discord.gateway import DiscordWebSocket

from channels._discord_inbound import DECISION_RE, PressOn, press_on
from channels._discord_shards import IdentifyPacer, layout
from engine import _metrics as metrics
from engine._channel import (
    ACTION_PATTERN,
    Choice,
    Command,
    Reply,
    encode_action,
    encode_decision,
)

if TYPE_CHECKING:
    from channels.discord import DiscordChannel

log = logging.getLogger("channels.discord")
T = TypeVar("T")

STALE_BUTTON = "This button no longer works."
FOREIGN_BUTTON = "This button does not belong to this message; nothing was done."
_ACK_BUDGET_S = 2.0  # answer an interaction at once if the engine decides within this, else defer
_SLASH = tuple(c for c in Command if c is not Command.START)  # /start is Telegram's


class Client(discord.AutoShardedClient):
    """discord.py's client with relaybot's start-up (setup_hook) and events, connecting the
    shards ``[discord] shard_count`` and ``shard_ids`` name (see ``_discord_shards``)."""

    def __init__(self, adapter: DiscordChannel) -> None:
        intents = discord.Intents.none()
        intents.guilds = True
        intents.guild_messages = True
        intents.dm_messages = True
        intents.message_content = True  # privileged: enable it in the Developer Portal
        # No voice here: the warning that its libraries are missing is no news to anyone.
        discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False
        super().__init__(
            intents=intents,
            allowed_mentions=discord.AllowedMentions(everyone=False, roles=False, users=False),
            chunk_guilds_at_startup=False,
            http_trace=_failures(),
            shard_count=adapter.config.shard_count,
            # None (every shard) is discord.py's default, though it types the option as a list
            shard_ids=adapter.config.shard_ids,  # type: ignore[arg-type]
        )
        self.adapter = adapter
        self.pacer = IdentifyPacer()
        self.tree = app_commands.CommandTree(self)
        for command in _SLASH:
            self.tree.add_command(_slash_command(adapter, command))

    async def setup_hook(self) -> None:
        _, url, limits = await self.http.get_bot_gateway()
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(url)  # see channels.discord's docstring
        self.pacer.max_concurrency = limits.get("max_concurrency", 1)
        log.info(
            "discord: logged in as %s (%s); gateway %s; %s",
            self.user,
            self.user and self.user.id,
            url,
            layout(self.shard_count, self.shard_ids),
        )
        self.add_dynamic_items(DecisionButton, ActionButton)
        await self._sync_commands()

    async def _sync_commands(self) -> None:
        guild_ids = self.adapter.config.command_guilds
        try:
            for guild_id in guild_ids:
                guild = discord.Object(int(guild_id))
                self.tree.copy_global_to(guild=guild)
                await self.tree.sync(guild=guild)
            if not guild_ids:
                await self.tree.sync()
        except discord.HTTPException as exc:
            log.warning(
                "discord: slash commands not synced (%s); /reset /stop /help may be missing", exc
            )

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        await self.pacer.wait(shard_id or 0)  # Discord's pace, not discord.py's fixed 5 s

    async def on_connect(self) -> None:
        self.adapter.connected.set()

    async def on_shard_connect(self, shard_id: int) -> None:
        log.info("discord: shard %d of %s connected", shard_id, self.shard_count)

    async def on_resumed(self) -> None:
        log.info("discord: gateway session resumed")

    async def on_message(self, message: discord.Message) -> None:
        if self.user is not None:
            await self.adapter.on_message(message, self.user)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        """Answer the presses on answer buttons that discord.py's DynamicItem dispatch drops
        (those whose custom_id is not on the message), without asking the engine."""
        if interaction.type is not discord.InteractionType.component or not interaction.message:
            return
        data: Any = interaction.data or {}
        custom_id = str(data.get("custom_id", ""))
        if DECISION_RE.fullmatch(custom_id) is None:
            return
        where = press_on(interaction.message, custom_id)
        if where is PressOn.SHOWN:
            return  # DecisionButton.callback has it
        if where is PressOn.FOREIGN:
            log.warning(
                "discord: user %s pressed a button that message %s does not carry; refused",
                interaction.user.id,
                interaction.message.id,
            )
        answer = STALE_BUTTON if where is PressOn.CLOSED else FOREIGN_BUTTON
        await interaction.response.send_message(answer, ephemeral=True)


class DecisionButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=DECISION_RE):
    """One answer button; custom_id ``rb:<id>:<choice>`` carries everything a press needs."""

    def __init__(self, confirmation_id: str, choice: Choice) -> None:
        super().__init__(
            discord.ui.Button(
                label=choice.label,
                style=discord.ButtonStyle.danger
                if choice.approves
                else discord.ButtonStyle.secondary,
                custom_id=encode_decision(confirmation_id, choice),
            )
        )
        self.confirmation_id = confirmation_id
        self.choice = choice

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> DecisionButton:
        return cls(match["id"], Choice(match["choice"]))

    async def callback(self, interaction: discord.Interaction) -> None:
        client = interaction.client
        assert isinstance(client, Client)
        await client.adapter.on_decision(interaction, self.confirmation_id, self.choice)


class ActionButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=ACTION_PATTERN):
    """A button under a command's reply; custom_id ``ra:<action>``."""

    def __init__(self, label: str, action: str) -> None:
        super().__init__(
            discord.ui.Button(
                label=label[:80],
                style=discord.ButtonStyle.secondary,
                custom_id=encode_action(action),
            )
        )
        self.action = action

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> ActionButton:
        return cls(getattr(item, "label", None) or "", match["action"])

    async def callback(self, interaction: discord.Interaction) -> None:
        client = interaction.client
        assert isinstance(client, Client)
        await client.adapter.on_action(interaction, self.action)


def menu(reply: Reply) -> discord.ui.View | None:
    """A command reply's buttons as a view (None: no buttons, or none any more)."""
    if not reply.buttons:
        return None
    view = discord.ui.View(timeout=None)
    for button in reply.buttons[:25]:  # Discord's limit per message
        view.add_item(ActionButton(button.label, button.action))
    return view


def _slash_command(
    adapter: DiscordChannel, command: Command
) -> app_commands.Command[Any, ..., None]:
    async def callback(interaction: discord.Interaction) -> None:
        await adapter.on_command(interaction, command)

    async def with_text(interaction: discord.Interaction, text: str | None = None) -> None:
        await adapter.on_command(interaction, command, text or "")

    if command.argument is not None:  # one optional text option, read as Telegram's arguments
        described = app_commands.describe(text=command.argument[:100])(with_text)
        return app_commands.Command(
            name=command.value, description=command.description, callback=described
        )
    return app_commands.Command(
        name=command.value, description=command.description, callback=callback
    )


async def within_ack_budget(
    interaction: discord.Interaction,
    work: Coroutine[Any, Any, T],
    *,
    thinking: bool,
    ephemeral: bool,
) -> T:
    """Await ``work``; if it outlasts the ack budget, defer the interaction meanwhile so Discord's
    three seconds are always met."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.wait_for(asyncio.shield(task), _ACK_BUDGET_S)
    except TimeoutError:
        await interaction.response.defer(thinking=thinking, ephemeral=ephemeral)
        return await task


def _failures() -> aiohttp.TraceConfig:
    """discord.py's HTTP requests that failed, for the metrics and `relaybot status` (the
    library waits out a 429 and retries a 5xx itself: those count as retries too)."""
    trace = aiohttp.TraceConfig()

    async def ended(_: Any, __: Any, params: aiohttp.TraceRequestEndParams) -> None:
        status = params.response.status
        if status >= 400:
            metrics.api_error("discord", f"{params.method} {_route(params.url)}: HTTP {status}")
            if status == 429 or status >= 500:
                metrics.api_retry("discord")

    async def failed(_: Any, __: Any, params: aiohttp.TraceRequestExceptionParams) -> None:
        exc = params.exception
        if not isinstance(exc, asyncio.CancelledError):
            where = f"{params.method} {_route(params.url)}"
            metrics.api_error("discord", f"{where}: {type(exc).__name__}: {exc}")

    trace.on_request_end.append(ended)
    trace.on_request_exception.append(failed)
    return trace


def _route(url: Any) -> str:
    """A request's path without ids or tokens (an interaction's URL carries its token)."""
    parts = [p for p in str(url.path).split("/") if p and not re.fullmatch(r"api|v\d+", p)]
    return "/".join("{id}" if p.isdigit() else "{token}" if len(p) > 24 else p for p in parts)
