"""Discord adapter on discord.py: gateway events in, REST calls out.

The adapter decides, per gateway message, whether it is for the bot (:func:`_inbound`, pure) and
hands it to the engine; the engine answers through :class:`DiscordChannel`'s send / edit / typing /
confirmation methods. Confirmation buttons are a :class:`discord.ui.DynamicItem` whose state lives
in the button's custom_id, so they keep working after a restart; /reset /stop /help are
application commands synced in ``setup_hook``.

Pointing discord.py at another server (``api_base_url``) takes two process-wide settings, both
class attributes in discord.py: ``Route.BASE`` for REST, and ``DiscordWebSocket.DEFAULT_GATEWAY``,
which a plain ``Client`` connects to without asking. ``setup_hook`` sets the latter to the URL the
REST server's ``GET /gateway/bot`` returns, so nothing connects anywhere the config did not name.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections import OrderedDict
from collections.abc import Coroutine
from typing import Any, Literal, TypeVar

import aiohttp
import discord
import yarl
from discord import app_commands
from discord.backoff import ExponentialBackoff
from discord.gateway import DiscordWebSocket
from discord.http import Route

from channels._config import DEFAULT_DISCORD_API as DEFAULT_API_BASE_URL
from channels._config import DiscordConfig
from channels._split import split_text
from engine._channel import (
    DECISION_PATTERN,
    Capabilities,
    Channel,
    Choice,
    Command,
    ConfirmationPrompt,
    Engine,
    InboundMessage,
    MessageRef,
    Press,
    encode_decision,
)

__all__ = ["DEFAULT_API_BASE_URL", "DiscordChannel", "DiscordConfig"]

log = logging.getLogger(__name__)

_LIMIT = 2000
_ACK_BUDGET_S = 2.0  # answer an interaction at once if the engine decides within this, else defer
_CONNECT_WAIT_S = 30.0
_EDIT_MEMORY = 256  # messages whose last text (and overflow parts) we remember for edits
_SLASH = (Command.RESET, Command.STOP, Command.HELP)
_DECISION_RE = re.compile(DECISION_PATTERN)
T = TypeVar("T")


class DiscordChannel(Channel):
    """The engine's view of Discord: chats are channel, thread or DM channel ids."""

    name = "discord"
    capabilities = Capabilities(
        max_message_length=_LIMIT,
        buttons=True,
        edits=True,
        markdown="discord",
        edit_interval_s=1.5,  # Discord allows about 5 edits per 5 s per channel
        typing_interval_s=8.0,  # the indicator lasts about 10 s
    )

    def __init__(self, config: DiscordConfig) -> None:
        self.config = config
        self._engine: Engine | None = None
        self._client: _Client | None = None
        self._runner: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()  # set when a gateway session starts
        # message id -> the parts it is shown as: [(message id, text)], first is itself
        self._shown: OrderedDict[str, list[tuple[str, str]]] = OrderedDict()

    # ---- lifecycle

    async def start(self, engine: Engine) -> None:
        """Log in, sync commands and connect; returns once the gateway session is up.

        A rejected token or a missing privileged intent is logged, not raised, and an unreachable
        Discord is retried in the background: the rest of the daemon keeps running.
        """
        token = self.config.resolve_token()
        self._engine = engine
        self._connected.clear()
        Route.BASE = self.config.api_base_url  # process-wide in discord.py
        self._runner = asyncio.create_task(self._run(token), name="discord")
        connected = asyncio.create_task(self._connected.wait())
        done, _ = await asyncio.wait(
            {connected, self._runner}, timeout=_CONNECT_WAIT_S, return_when=asyncio.FIRST_COMPLETED
        )
        connected.cancel()
        if not done:
            log.warning("discord: not connected after %.0f s; still trying", _CONNECT_WAIT_S)

    async def stop(self) -> None:
        if self._client is not None:
            await self._client.close()
        if self._runner is not None:
            self._runner.cancel()  # it may be waiting to retry
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
        self._client = self._runner = None

    async def _run(self, token: str) -> None:
        client = await self._login(token)
        if client is None:
            return
        self._client = client
        try:
            await client.connect(reconnect=True)  # reconnects and resumes by itself
        except discord.PrivilegedIntentsRequired:
            log.error(
                "discord: the Message Content intent is not enabled for this bot. Enable it in the"
                " Developer Portal (Bot > Privileged Gateway Intents) and restart relaybot."
            )
        except discord.ConnectionClosed as exc:
            log.error("discord: the gateway closed the connection (code %s); giving up", exc.code)
        except Exception:
            log.exception("discord: the gateway connection failed; giving up")
        finally:
            await client.close()
            self._client = None  # sends now fail with "not running"

    async def _login(self, token: str) -> _Client | None:
        """A logged-in client (commands synced), retrying while Discord cannot be reached; None
        if the token is rejected."""
        backoff: ExponentialBackoff[Literal[False]] = ExponentialBackoff()
        while True:
            client = _Client(self)
            try:
                await client.login(token)
            except BaseException as exc:
                await client.close()
                if isinstance(exc, discord.LoginFailure):
                    log.error("discord: the bot token was rejected; check [discord] token(_env)")
                    return None
                if not isinstance(exc, discord.DiscordException | aiohttp.ClientError | OSError):
                    raise
                delay = backoff.delay()
                log.warning(
                    "discord: cannot log in at %s (%s); retrying in %.0f s",
                    self.config.api_base_url,
                    exc,
                    delay,
                )
                await asyncio.sleep(delay)
            else:
                return client

    # ---- engine -> Discord

    async def send(
        self, chat_id: str, text: str, *, reply_to: str | None = None, formatted: bool = True
    ) -> MessageRef:
        channel = self._messageable(chat_id)
        shown: list[tuple[str, str]] = []
        for i, part in enumerate(_parts(text, formatted)):
            reference = _reference(chat_id, reply_to) if i == 0 and reply_to else None
            sent = await channel.send(part, reference=reference)  # type: ignore[arg-type]
            shown.append((str(sent.id), part))
        last_id = shown[-1][0]
        self._remember(last_id, shown)  # an edit of the returned ref rewrites every part
        return MessageRef(chat_id, last_id)

    async def edit(self, ref: MessageRef, text: str, *, formatted: bool = True) -> None:
        """Edit in place; text past 2000 characters goes to follow-up messages, kept for later
        edits. Parts whose text did not change are not sent again."""
        channel = self._messageable(ref.chat_id)
        shown = self._shown.get(ref.message_id) or [(ref.message_id, "")]
        parts = _parts(text, formatted)
        updated: list[tuple[str, str]] = []
        for i, part in enumerate(parts):
            if i < len(shown):
                message_id, old = shown[i]
                if part != old:
                    await channel.get_partial_message(int(message_id)).edit(content=part)
            else:
                message_id = str((await channel.send(part)).id)
            updated.append((message_id, part))
        for message_id, _ in shown[len(parts) :]:
            await channel.get_partial_message(int(message_id)).delete()
        self._remember(ref.message_id, updated)

    async def typing(self, chat_id: str) -> None:
        await self._messageable(chat_id).typing()  # one-shot: POST /channels/{id}/typing

    async def show_confirmation(self, prompt: ConfirmationPrompt) -> MessageRef:
        footer = (
            f"\n-# Only {prompt.user_name} can confirm · expires <t:{int(prompt.expires_at)}:R>"
        )
        summary = prompt.summary
        if len(summary) + len(footer) > _LIMIT:
            summary = summary[: _LIMIT - len(footer) - 1] + "…"
        view = discord.ui.View(timeout=None)
        for choice in prompt.choices:
            view.add_item(_DecisionButton(prompt.id, choice))
        reference = _reference(prompt.chat_id, prompt.reply_to) if prompt.reply_to else None
        sent = await self._messageable(prompt.chat_id).send(
            summary + footer,
            view=view,
            reference=reference,  # type: ignore[arg-type]  # None is fine at run time
        )
        return MessageRef(prompt.chat_id, str(sent.id))

    async def resolve_confirmation(self, ref: MessageRef, text: str) -> None:
        message = self._messageable(ref.chat_id).get_partial_message(int(ref.message_id))
        await message.edit(content=_parts(text, True)[0], view=None)  # view=None drops the buttons

    def _messageable(self, chat_id: str) -> discord.PartialMessageable:
        if self._client is None:
            raise RuntimeError("the Discord channel is not running")
        return self._client.get_partial_messageable(int(chat_id))

    def _remember(self, message_id: str, parts: list[tuple[str, str]]) -> None:
        self._shown[message_id] = parts
        self._shown.move_to_end(message_id)
        while len(self._shown) > _EDIT_MEMORY:
            self._shown.popitem(last=False)

    # ---- Discord -> engine

    async def _on_message(self, message: discord.Message, me: discord.ClientUser) -> None:
        inbound = _inbound(message, me, self.config)
        if inbound is not None:
            await self._require_engine().handle_inbound(inbound)

    async def _on_command(self, interaction: discord.Interaction, command: Command) -> None:
        if not await self._guild_allowed(interaction):
            return
        msg = InboundMessage(
            channel=self.name,
            chat_id=str(interaction.channel_id),
            user_id=str(interaction.user.id),
            user_name=interaction.user.display_name,
            text=f"/{command.value}",
            message_id=str(interaction.id),
            is_private=interaction.guild_id is None,
            mentioned=True,
        )
        ephemeral = command is Command.HELP
        work = self._require_engine().handle_command(msg, command)
        reply = await _within_ack_budget(interaction, work, thinking=True, ephemeral=ephemeral)
        if interaction.response.is_done():
            await interaction.followup.send(reply, ephemeral=ephemeral)
        else:
            await interaction.response.send_message(reply, ephemeral=ephemeral)

    async def _on_decision(
        self, interaction: discord.Interaction, confirmation_id: str, choice: Choice
    ) -> None:
        if not await self._guild_allowed(interaction):
            return
        press = Press(
            self.name,
            str(interaction.channel_id),
            str(interaction.user.id),
            confirmation_id,
            choice,
        )
        work = self._require_engine().handle_press(press)
        decision = await _within_ack_budget(interaction, work, thinking=False, ephemeral=True)
        if decision.accepted:  # the engine edits the prompt itself (resolve_confirmation)
            if not interaction.response.is_done():
                await interaction.response.defer()  # "deferred update": no visible reply
        elif interaction.response.is_done():
            await interaction.followup.send(decision.message, ephemeral=True)
        else:
            await interaction.response.send_message(decision.message, ephemeral=True)

    async def _guild_allowed(self, interaction: discord.Interaction) -> bool:
        guild_id = interaction.guild_id
        if guild_id is None or _guild_allowed(guild_id, self.config):
            return True
        log.debug("discord: interaction from guild %s, not in allowed_guilds", guild_id)
        await interaction.response.send_message("I'm not enabled in this server.", ephemeral=True)
        return False

    def _require_engine(self) -> Engine:
        if self._engine is None:
            raise RuntimeError("the Discord channel is not started")
        return self._engine


class _Client(discord.Client):
    """discord.py's client with relaybot's start-up (setup_hook) and events."""

    def __init__(self, adapter: DiscordChannel) -> None:
        intents = discord.Intents.none()
        intents.guilds = True
        intents.guild_messages = True
        intents.dm_messages = True
        intents.message_content = True  # privileged: enable it in the Developer Portal
        super().__init__(
            intents=intents,
            allowed_mentions=discord.AllowedMentions(everyone=False, roles=False, users=False),
            chunk_guilds_at_startup=False,
        )
        self.adapter = adapter
        self.tree = app_commands.CommandTree(self)
        for command in _SLASH:
            self.tree.add_command(_slash_command(adapter, command, command.description))

    async def setup_hook(self) -> None:
        _, url, _ = await self.http.get_bot_gateway()
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(url)  # see the module docstring
        log.info(
            "discord: logged in as %s (%s); gateway %s", self.user, self.user and self.user.id, url
        )
        self.add_dynamic_items(_DecisionButton)
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

    async def on_connect(self) -> None:
        self.adapter._connected.set()

    async def on_resumed(self) -> None:
        log.info("discord: gateway session resumed")

    async def on_message(self, message: discord.Message) -> None:
        if self.user is not None:
            await self.adapter._on_message(message, self.user)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        # A press racing the edit that removed the buttons comes with a message that no longer
        # has them; discord.py's DynamicItem dispatch then drops it unanswered. Answer it here.
        if interaction.type is not discord.InteractionType.component or not interaction.message:
            return
        custom_id = str((interaction.data or {}).get("custom_id", ""))
        match = _DECISION_RE.fullmatch(custom_id)
        shown = {getattr(c, "custom_id", None) for c in _components(interaction.message)}
        if match is not None and custom_id not in shown:
            await self.adapter._on_decision(interaction, match["id"], Choice(match["choice"]))


class _DecisionButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=_DECISION_RE):
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
    ) -> _DecisionButton:
        return cls(match["id"], Choice(match["choice"]))

    async def callback(self, interaction: discord.Interaction) -> None:
        client = interaction.client
        assert isinstance(client, _Client)
        await client.adapter._on_decision(interaction, self.confirmation_id, self.choice)


def _slash_command(
    adapter: DiscordChannel, command: Command, description: str
) -> app_commands.Command[Any, ..., None]:
    async def callback(interaction: discord.Interaction) -> None:
        await adapter._on_command(interaction, command)

    return app_commands.Command(name=command.value, description=description, callback=callback)


def _inbound(
    message: discord.Message, me: discord.ClientUser, config: DiscordConfig
) -> InboundMessage | None:
    """The engine's view of ``message``, or None when it is not for the bot."""
    if message.author.bot or message.author.id == me.id or message.webhook_id is not None:
        return None
    if message.type not in (discord.MessageType.default, discord.MessageType.reply):
        return None
    guild_id = message.guild.id if message.guild else getattr(message.channel, "guild_id", None)
    if guild_id is not None and not _guild_allowed(guild_id, config):
        log.debug("discord: message in guild %s, not in allowed_guilds; ignored", guild_id)
        return None
    resolved = message.reference.resolved if message.reference else None
    replied_to_me = isinstance(resolved, discord.Message) and resolved.author.id == me.id
    # People often pick the bot's own role (same name) from the mention list: that counts too.
    my_roles = [r.id for r in message.role_mentions if r.tags and r.tags.bot_id == me.id]
    mentioned = replied_to_me or bool(my_roles) or any(u.id == me.id for u in message.mentions)
    if guild_id is not None and not mentioned and config.respond_in_guilds == "mentions":
        return None
    mention = "|".join([rf"<@!?{me.id}>", *(f"<@&{role_id}>" for role_id in my_roles)])
    text = re.sub(rf"(?:{mention})\s*", "", message.content).strip()
    if not text:
        return None
    return InboundMessage(
        channel=DiscordChannel.name,
        chat_id=str(message.channel.id),
        user_id=str(message.author.id),
        user_name=message.author.display_name,
        text=text,
        message_id=str(message.id),
        is_private=guild_id is None,
        mentioned=mentioned,
        reply_to=str(message.reference.message_id) if message.reference else None,
    )


def _components(message: discord.Message) -> list[discord.Component]:
    found: list[discord.Component] = []
    for component in message.components:
        found.extend(getattr(component, "children", [component]))
    return found


def _guild_allowed(guild_id: int, config: DiscordConfig) -> bool:
    return not config.allowed_guilds or str(guild_id) in config.allowed_guilds


def _parts(text: str, formatted: bool) -> list[str]:
    """``text`` as Discord message contents: Markdown passes through, plain text is escaped."""
    if not formatted:
        text = discord.utils.escape_markdown(text)
    return split_text(text, _LIMIT) or ["…"]


def _reference(chat_id: str, message_id: str) -> discord.MessageReference:
    return discord.MessageReference(
        message_id=int(message_id), channel_id=int(chat_id), fail_if_not_exists=False
    )


async def _within_ack_budget(
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
