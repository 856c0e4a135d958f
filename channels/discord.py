"""Discord adapter on discord.py: gateway events in, REST calls out.

Events arrive through discord.py's Client (``_discord_client``); whether a message or a button
press is for the bot is decided without side effects (``_discord_inbound``), and what is for the
engine is handed to it. The engine answers through :class:`DiscordChannel`'s send / edit / typing /
confirmation methods; long and growing texts are kept up to date part by part by
``_shown.ShownMessages``, on the Discord surface defined here.

Pointing discord.py at another server (``api_base_url``) takes two process-wide settings, both
class attributes in discord.py: ``Route.BASE`` for REST, and ``DiscordWebSocket.DEFAULT_GATEWAY``,
which a plain ``Client`` connects to without asking. ``setup_hook`` sets the latter to the URL the
REST server's ``GET /gateway/bot`` returns, so nothing connects anywhere the config did not name.

Logging in is retried with relaybot's :class:`engine._backoff.Backoff` rather than discord.py's
``ExponentialBackoff``: that one draws each pause at random from zero up to a ceiling that grows
to 1,024 s, which suits many shards reconnecting at once, not one daemon that should notice
within 30 s that Discord is back and say truthfully in its log when it will try again. Gateway
reconnects stay discord.py's own (``connect(reconnect=True)``).

With several instances on one store, each receiving part (the whole gateway, or each shard when
``shard_count`` is set: ``_discord_shards.receivers``) is connected by the one instance holding
its lease (``set_receiving``), which resumes the gateway session the part's previous holder left;
every instance logs in, and sends over REST.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import time
from collections.abc import Sequence
from typing import Any

import aiohttp
import discord
from discord.http import Route

from channels import _discord_shards as shards
from channels._config import DEFAULT_DISCORD_API as DEFAULT_API_BASE_URL
from channels._config import DiscordConfig
from channels._discord_client import (
    Client,
    DecisionButton,
    menu,
    too_late_to_answer,
    within_ack_budget,
)
from channels._discord_inbound import guild_allowed, inbound
from channels._discord_media import batches, download
from channels._prompt import ATTACHED_NOTE, ATTACHMENT_NAME, lay_out, who_and_when
from channels._shown import ShownMessages
from channels._split import split_text
from engine import metrics
from engine._backoff import Backoff
from engine._channel import (
    Action,
    Attachment,
    Capabilities,
    Channel,
    Choice,
    Claim,
    Command,
    ConfirmationPrompt,
    Engine,
    InboundMessage,
    MessageRef,
    OutgoingFile,
    Press,
    Receiver,
)

__all__ = ["DEFAULT_API_BASE_URL", "DiscordChannel", "DiscordConfig"]

log = logging.getLogger(__name__)

_LIMIT = 2000
_CONNECT_WAIT_S = 30.0
_GUILD_KEPT_S = 600.0  # a server fetched over REST is fetched again after this
_EDIT_MEMORY = 256  # messages whose last text (and overflow parts) we remember for edits


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
    retry_initial_s = 1.0  # first pause while Discord cannot be reached at start-up

    def __init__(self, config: DiscordConfig) -> None:
        self.config = config
        self.connected = asyncio.Event()  # set when a gateway session starts
        self._engine: Engine | None = None
        self._client: Client | None = None
        self._runner: asyncio.Task[None] | None = None
        self._parts = shards.receivers(config.shard_count, config.shard_ids)
        # the receiving parts on (every one but other instances' own, until set_receiving says)
        self._on = {part.lease for part in self._parts if part.claim is not Claim.FALLBACK}
        self._resume: dict[int, shards.Session] = {}  # sessions left by another instance
        self._receive = asyncio.Event()  # a gateway connection wanted (set_receiving)
        self._receive.set()
        self._gateway: asyncio.Task[None] | None = None
        self._logged_in = asyncio.Event()
        self._shown = ShownMessages[str](self, _EDIT_MEMORY)
        self._guilds: dict[int, tuple[float, discord.Guild]] = {}  # see _uncached_guild

    # ---- lifecycle

    async def start(self, engine: Engine) -> None:
        """Log in, sync commands and connect; returns once the gateway session is up.

        A rejected token or a missing privileged intent is logged, not raised, and an unreachable
        Discord is retried in the background: the rest of the daemon keeps running.
        """
        token = self.config.resolve_token()
        self._engine = engine
        self.connected.clear()
        Route.BASE = self.config.api_base_url  # process-wide in discord.py
        self._runner = asyncio.create_task(self._run(token), name="discord")
        ready = self.connected if self._receive.is_set() else self._logged_in
        connected = asyncio.create_task(ready.wait())
        done, _ = await asyncio.wait(
            {connected, self._runner}, timeout=_CONNECT_WAIT_S, return_when=asyncio.FIRST_COMPLETED
        )
        connected.cancel()
        if not done:
            log.warning("discord: not connected after %.0f s; still trying", _CONNECT_WAIT_S)

    def receivers(self) -> Sequence[Receiver]:
        """The whole gateway, or each shard when ``shard_count`` is set (see _discord_shards)."""
        return self._parts

    async def set_receiving(self, lease: str, on: bool, resume: str | None = None) -> str | None:
        """Keep a gateway connection for the part `lease` names (True) or not (False; sending
        goes on over REST). Turning on resumes the sessions in `resume`; turning off returns
        those of the shards let go, closed so that they stay resumable."""
        if on:
            self._on.add(lease)
            self._resume.update(shards.decode(resume))
        else:
            self._on.discard(lease)
        client = self._client
        if self._on:
            self._receive.set()
            if client is None or self._gateway is None or self._gateway.done():
                return None  # _run connects what is wanted
            client.wanted = self._wanted()
            shard = shards.shard_of_lease(lease)
            session = None if on or shard is None else await client.drop_shard(shard)
            client.connect_wanted_soon()
            return self._state(lease, {shard: session} if shard is not None and session else {})
        self._receive.clear()
        dropped = await client.drop_all() if client is not None else {}
        gateway, self._gateway = self._gateway, None
        if gateway is not None:
            gateway.cancel()
            await asyncio.gather(gateway, return_exceptions=True)
        self.connected.clear()
        return self._state(lease, dropped)

    def receiving_state(self, lease: str) -> str | None:
        return None if self._client is None else self._state(lease, self._client.sessions())

    @staticmethod
    def _state(lease: str, sessions: dict[int, shards.Session]) -> str | None:
        """What the next holder of `lease` resumes from: its shard's session, or every one."""
        shard = shards.shard_of_lease(lease)
        if shard is not None:
            sessions = {i: s for i, s in sessions.items() if i == shard}
        return shards.encode(sessions)

    def _wanted(self) -> set[int] | None:
        """The shards to connect (None: every one, as discord.py decides)."""
        if self.config.shard_count is None:
            return None
        ids = (shards.shard_of_lease(lease) for lease in self._on)
        return {i for i in ids if i is not None}

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
        self._logged_in.set()
        try:
            while True:
                await self._receive.wait()
                client.wanted = self._wanted()
                client.resume = self._resume
                self._gateway = asyncio.create_task(client.connect(reconnect=True))
                try:
                    await self._gateway  # reconnects and resumes by itself
                    return
                except asyncio.CancelledError:
                    current = asyncio.current_task()
                    if current is not None and current.cancelling():
                        raise  # stop()
                    log.info("discord: another instance receives now")
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

    async def _login(self, token: str) -> Client | None:
        """A logged-in client (commands synced), retrying while Discord cannot be reached; None
        if the token is rejected."""
        backoff = Backoff(self.retry_initial_s)
        while True:
            client = Client(self)
            try:
                await client.login(token)
            except BaseException as exc:
                await client.close()
                if isinstance(exc, discord.LoginFailure):
                    log.error("discord: the bot token was rejected; check [discord] token(_env)")
                    return None
                if not isinstance(exc, discord.DiscordException | aiohttp.ClientError | OSError):
                    raise
                log.warning(
                    "discord: cannot log in at %s (%s); retrying in %g s",
                    self.config.api_base_url,
                    exc,
                    backoff.upcoming_s,
                )
                metrics.api_retry(self.name)
                await backoff.sleep()
            else:
                return client

    # ---- engine -> Discord

    async def send(
        self, chat_id: str, text: str, *, reply_to: str | None = None, formatted: bool = True
    ) -> MessageRef:
        return await self._shown.send(chat_id, text, reply_to=reply_to, formatted=formatted)

    async def edit(self, ref: MessageRef, text: str, *, formatted: bool = True) -> None:
        """Edit in place; text past 2000 characters goes to follow-up messages, kept for later
        edits. Parts whose text did not change are not sent again."""
        await self._shown.edit(ref, text, formatted=formatted)

    async def typing(self, chat_id: str) -> None:
        await self._messageable(chat_id).typing()  # one-shot: POST /channels/{id}/typing

    async def show_confirmation(self, prompt: ConfirmationPrompt) -> MessageRef:
        """One message with the buttons: the summary, the action as a code block and who may
        answer until when; when the action does not fit, it goes with the buttons as a file."""
        who = discord.utils.escape_markdown(prompt.user_name)
        footer = "-# " + who_and_when(who, f"<t:{int(prompt.expires_at)}:R>")

        def render(summary: str, details: str | None, attached: bool) -> str:
            lines = [discord.utils.escape_markdown(summary)]
            if details is not None:  # a fence inside the action cannot close the block
                lines.append("```\n" + details.replace("```", "``\u200b`") + "\n```")
            if attached:
                lines.append(f"**{ATTACHED_NOTE}**")
            return "\n".join([*lines, footer])

        message = lay_out(prompt, render, len, limit=_LIMIT, attached_limit=_LIMIT)
        view = discord.ui.View(timeout=None)
        for choice in prompt.choices:
            view.add_item(DecisionButton(prompt.id, choice))
        attached: dict[str, Any] = {}
        if message.attachment is not None:
            attached["file"] = discord.File(io.BytesIO(message.attachment), ATTACHMENT_NAME)
        sent = await self._messageable(prompt.chat_id).send(
            message.text,
            view=view,
            reference=_reference(prompt.chat_id, prompt.reply_to),  # type: ignore[arg-type]
            **attached,
        )
        return MessageRef(prompt.chat_id, str(sent.id))

    async def resolve_confirmation(self, ref: MessageRef, text: str) -> None:
        """The final text in place of the prompt's, the buttons removed; an attached action
        stays, as the record of what was answered."""
        message = self._messageable(ref.chat_id).get_partial_message(int(ref.message_id))
        await message.edit(content=self.render(text, True)[0], view=None)

    async def send_files(
        self, chat_id: str, files: Sequence[OutgoingFile], *, reply_to: str | None = None
    ) -> MessageRef:
        """Uploads, up to ten files to a message, in order."""
        messageable = self._messageable(chat_id)
        sent_id = ""
        for batch in batches(files):
            reference = _reference(chat_id, reply_to)
            sent = await messageable.send(files=batch, reference=reference)  # type: ignore[arg-type]
            sent_id = str(sent.id)
        return MessageRef(chat_id, sent_id)

    async def download(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        if self._client is None:
            raise RuntimeError("the Discord channel is not running")
        return await download(self._client, attachment, max_bytes)

    # the Surface that ShownMessages works on

    def render(self, text: str, formatted: bool) -> list[str]:
        """``text`` as Discord message contents: Markdown passes through, plain text is escaped."""
        if not formatted:
            text = discord.utils.escape_markdown(text)
        return split_text(text, _LIMIT) or ["…"]

    async def send_part(self, chat_id: str, part: str, reply_to: str | None) -> str:
        reference = _reference(chat_id, reply_to)
        sent = await self._messageable(chat_id).send(part, reference=reference)  # type: ignore[arg-type]
        return str(sent.id)

    async def edit_part(self, chat_id: str, message_id: str, part: str) -> None:
        await self._messageable(chat_id).get_partial_message(int(message_id)).edit(content=part)

    async def delete_part(self, chat_id: str, message_id: str) -> None:
        with contextlib.suppress(discord.NotFound):  # already gone
            await self._messageable(chat_id).get_partial_message(int(message_id)).delete()

    def _messageable(self, chat_id: str) -> discord.PartialMessageable:
        if self._client is None:
            raise RuntimeError("the Discord channel is not running")
        return self._client.get_partial_messageable(int(chat_id))

    # ---- Discord -> engine (called by Client)

    async def on_message(self, message: discord.Message, me: discord.ClientUser) -> None:
        engine = self._require_engine()
        bot_roles: set[int] = set()
        guild_id = message.guild.id if message.guild else getattr(message.channel, "guild_id", 0)
        if guild_id and message.raw_role_mentions and not message.role_mentions:
            guild = await self._uncached_guild(guild_id)  # a resumed shard's server
            bot_roles = {r.id for r in guild.roles if r.tags and r.tags.bot_id == me.id}

        def listens(chat_id: str) -> bool:
            return engine.listens(self.name, chat_id)

        msg = inbound(message, me, self.config, listens, bot_roles)
        if msg is not None:
            await engine.handle_inbound(msg)

    async def on_command(
        self, interaction: discord.Interaction, command: Command, text: str = ""
    ) -> None:
        with too_late_to_answer():
            await self._command(interaction, command, text)

    async def _command(self, interaction: discord.Interaction, command: Command, text: str) -> None:
        if self._replayed(interaction) or not await self._guild_allowed(interaction):
            return
        msg = InboundMessage(
            channel=self.name,
            chat_id=str(interaction.channel_id),
            user_id=str(interaction.user.id),
            user_name=interaction.user.display_name,
            text=f"/{command.value} {text}".strip(),
            message_id=str(interaction.id),
            is_private=interaction.guild_id is None,
            mentioned=True,
        )
        ephemeral = command is Command.HELP
        work = self._require_engine().handle_command(msg, command)
        reply = await within_ack_budget(interaction, work, thinking=True, ephemeral=ephemeral)
        text, view = reply.text or "Done.", menu(reply)
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
            self.name,
            str(interaction.channel_id),
            str(interaction.user.id),
            action,
            interaction.guild_id is None,
        )
        work = self._require_engine().handle_action(pressed)
        reply = await within_ack_budget(interaction, work, thinking=False, ephemeral=True)
        if interaction.response.is_done():
            await interaction.edit_original_response(content=reply.text, view=menu(reply))
        else:
            await interaction.response.edit_message(content=reply.text, view=menu(reply))

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
            self.name,
            str(interaction.channel_id),
            str(interaction.user.id),
            confirmation_id,
            choice,
        )
        work = self._require_engine().handle_press(press)
        decision = await within_ack_budget(interaction, work, thinking=False, ephemeral=True)
        if decision.accepted:  # the engine edits the prompt itself (resolve_confirmation)
            if not interaction.response.is_done():
                await interaction.response.defer()  # "deferred update": no visible reply
        elif interaction.response.is_done():
            await interaction.followup.send(decision.message, ephemeral=True)
        else:
            await interaction.response.send_message(decision.message, ephemeral=True)

    async def is_chat_admin(self, chat_id: str, user_id: str) -> bool:
        """Manage Server in the channel's guild, or a role named in `admin_roles`."""
        if self._client is None:
            return False
        channel = self._client.get_channel(int(chat_id))
        guild = getattr(channel, "guild", None)
        if channel is None:  # not cached: a DM, or a server on a shard resumed here
            home = getattr(await self._client.fetch_channel(int(chat_id)), "guild", None)
            guild = None if home is None else await self._uncached_guild(home.id)
        if guild is None:
            return False
        member = guild.get_member(int(user_id)) or await guild.fetch_member(int(user_id))
        if member.guild_permissions.manage_guild:
            return True
        wanted = set(self.config.admin_roles)
        return any(str(role.id) in wanted or role.name in wanted for role in member.roles)

    async def _uncached_guild(self, guild_id: int) -> discord.Guild:
        """A server discord.py has not cached (Discord sends a server's details to a new
        gateway session, not to one resumed from another instance), from REST; kept a while."""
        now = time.monotonic()
        kept = self._guilds.get(guild_id)
        if kept is not None and now - kept[0] < _GUILD_KEPT_S:
            return kept[1]
        if self._client is None:
            raise RuntimeError("the Discord channel is not running")
        guild = await self._client.fetch_guild(guild_id)
        if len(self._guilds) > _EDIT_MEMORY:
            self._guilds.clear()
        self._guilds[guild_id] = (now, guild)
        return guild

    def _replayed(self, interaction: discord.Interaction) -> bool:
        if self._client is None or not self._client.replayed(interaction):
            return False
        log.info(
            "discord: not acting on an interaction by user %s from before this instance resumed"
            " its shard: too old to answer, its user was told it failed",
            interaction.user.id,
        )
        return True

    async def _guild_allowed(self, interaction: discord.Interaction) -> bool:
        guild_id = interaction.guild_id
        if guild_id is None or guild_allowed(guild_id, self.config):
            return True
        log.debug("discord: interaction from guild %s, not in allowed_guilds", guild_id)
        await interaction.response.send_message("I'm not enabled in this server.", ephemeral=True)
        return False

    def _require_engine(self) -> Engine:
        if self._engine is None:
            raise RuntimeError("the Discord channel is not started")
        return self._engine


def _reference(chat_id: str, message_id: str | None) -> discord.MessageReference | None:
    if not message_id:
        return None
    return discord.MessageReference(
        message_id=int(message_id), channel_id=int(chat_id), fail_if_not_exists=False
    )
