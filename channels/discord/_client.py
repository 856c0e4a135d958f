# Left whole: one class, discord.py's Client; each of its methods overrides one of discord.py's or
# is a hook discord.py calls on the client, so none can live elsewhere.
"""discord.py's Client with relaybot's start-up, events and shards.

Everything here is a discord.py extension point: ``setup_hook`` for async start-up, event methods
(handed to the adapter's :class:`Events`), ``app_commands`` for the slash commands (``_commands``),
the answer buttons (``_buttons``), and the shard hooks, through which the shards this instance
holds are connected and let go one by one (``channels._discord_shards``).

Pointing discord.py at another server (``api_base_url``) takes two process-wide settings, both
class attributes in discord.py: ``Route.BASE`` for REST (set by the adapter), and
``DiscordWebSocket.DEFAULT_GATEWAY``, which a plain ``Client`` connects to without asking.
``setup_hook`` sets the latter to the URL the REST server's ``GET /gateway/bot`` returns, so
nothing connects anywhere the config did not name.

A restart resumes the gateway session the last process left, from the sequence before its oldest
message not yet stored (``_unstored``): ``dispatch`` notes where each message arrived, and
``on_message`` settles it once the adapter has stored it or dropped it on purpose. A saved
session made with another token is not resumed; one Discord no longer knows (op 9) gives way to
a new session, with one log line.

discord.py warns at start-up that the voice libraries (PyNaCl, davey) are missing; relaybot has no
voice, so nobody can act on that warning and it is switched off.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from typing import Any

import discord
import yarl
from discord import app_commands
from discord.gateway import DiscordWebSocket
from discord.shard import Shard

from channels._config import DiscordConfig
from channels._discord_shards import IdentifyPacer, Session, fingerprint, shard_layout, shard_of
from channels.discord._buttons import ActionButton, DecisionButton, answer_dropped_press
from channels.discord._commands import SLASH, Localizations, slash_command
from channels.discord._events import Events
from channels.discord._trace import failures
from channels.discord._unstored import Unstored

log = logging.getLogger("channels.discord")

_ANSWERABLE_FOR = datetime.timedelta(seconds=3)  # Discord's limit for a first answer


class Client(discord.AutoShardedClient):
    """discord.py's client with relaybot's start-up (setup_hook) and events, connecting the
    shards ``[discord] shard_count`` and ``shard_ids`` name (see ``_discord_shards``)."""

    def __init__(
        self,
        config: DiscordConfig,
        events: Events,
        connected: asyncio.Event,
        unstored: Unstored,
    ) -> None:
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
            http_trace=failures(),
            shard_count=config.shard_count,
            # None (every shard) is discord.py's default, though it types the option as a list
            shard_ids=config.shard_ids,  # type: ignore[arg-type]
            # discord.py's own watchdog: a connection that hears nothing (no event, no heartbeat
            # ACK) this long is closed (code 4000) and resumed; it logs one warning for it
            heartbeat_timeout=config.gateway_timeout_s,
        )
        self.config = config
        self.events = events  # what a button's callback finds on interaction.client
        self._connected = connected  # set when a gateway session starts
        self.unstored = unstored  # the messages received and not stored yet (the adapter's)
        self.pacer = IdentifyPacer()
        # The shards to connect (None: discord.py's choice, every one), and the sessions to
        # resume them from, which another instance left (see _discord_shards).
        self.wanted: set[int] | None = None
        self.resume: dict[int, Session] = {}
        self._resumed_at: dict[int, datetime.datetime] = {}  # shard → when it resumed here
        self._resuming: set[int] = set()  # shards whose RESUME Discord has not answered yet
        self._syncing: asyncio.Task[None] | None = None  # connecting the wanted shards
        self.tree = app_commands.CommandTree(self)
        for command in SLASH:
            self.tree.add_command(slash_command(events, command))

    async def setup_hook(self) -> None:
        _, url, limits = await self.http.get_bot_gateway()
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(url)  # see the module docstring
        self.pacer.max_concurrency = limits.get("max_concurrency", 1)
        log.info(
            "discord: logged in as %s (%s); gateway %s; %s",
            self.user,
            self.user and self.user.id,
            url,
            shard_layout(self.shard_count, self.shard_ids),
        )
        self.add_dynamic_items(DecisionButton, ActionButton)
        await self.tree.set_translator(Localizations())  # the command menu in each language
        await self._sync_commands()

    async def _sync_commands(self) -> None:
        guild_ids = self.config.command_guilds
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

    # -- shards: connected and let go one by one (discord.py connects a fixed set) ------------
    # discord.py keeps its shards in private attributes; these methods are the only place
    # that touches them (tests/test_discord_shard_instances.py drives them).

    def _shards(self) -> dict[int, Shard]:
        return self._AutoShardedClient__shards  # type: ignore[attr-defined]

    async def launch_shards(self) -> None:
        if self.wanted is None or self.is_closed():
            await super().launch_shards()
            return
        self._connection.shard_count = self.shard_count
        self.connect_wanted_soon()  # one task connects shards, whoever asks
        assert self._syncing is not None
        await self._syncing

    def connect_wanted_soon(self) -> None:
        """Connect the wanted shards not connected yet, in the background: connecting waits
        for Discord (and its IDENTIFY pace), which the caller must not."""
        if self._syncing is None or self._syncing.done():
            self._syncing = asyncio.create_task(self._connect_wanted(), name="discord-shards")
            self._syncing.add_done_callback(_log_failure)

    async def _connect_wanted(self) -> None:
        while self.wanted is not None and not self.is_closed():
            extra = set(self._shards()) - self.wanted
            for shard_id in sorted(extra):  # let go meanwhile: its session is of no use now
                await self.drop_shard(shard_id)
            missing = sorted(self.wanted - set(self._shards()))
            if not missing:
                return
            await self.launch_shard(DiscordWebSocket.DEFAULT_GATEWAY, missing[0])

    async def drop_all(self) -> dict[int, Session]:
        """Let go of every shard; returns their sessions (resumable)."""
        await self._stop_syncing()
        dropped = {i: await self.drop_shard(i) for i in sorted(self._shards())}
        return {i: s for i, s in dropped.items() if s is not None}

    def sessions(self) -> dict[int, Session]:
        """The connected shards' sessions, as another instance would resume them now."""
        shards = self._shards().items()
        return {i: s for i, shard in shards if (s := self._session(i, shard.ws))}

    async def launch_shard(
        self, gateway: yarl.URL, shard_id: int, *, initial: bool = False
    ) -> None:
        session = self.resume.pop(shard_id, None)
        if session is not None and session.token not in ("", fingerprint(self.http.token or "")):
            log.info("discord: shard %d: its saved session is another token's", shard_id)
            session = None
        if session is None or session.shard_count != self.shard_count:
            await super().launch_shard(gateway, shard_id, initial=initial)
            return
        try:  # RESUME: Discord sends what the session missed, then RESUMED
            ws = await asyncio.wait_for(
                DiscordWebSocket.from_client(
                    self,
                    gateway=yarl.URL(session.gateway),
                    shard_id=shard_id,
                    session=session.session_id,
                    sequence=session.sequence,
                    resume=True,
                ),
                timeout=self.shard_connect_timeout,
            )
        except Exception as exc:
            log.warning("discord: shard %d could not resume its session (%s)", shard_id, exc)
            await super().launch_shard(gateway, shard_id, initial=initial)
            return
        log.info("discord: shard %d: resuming the session it had before", shard_id)
        self._resumed_at[shard_id] = discord.utils.utcnow()
        self._resuming.add(shard_id)
        queue = self._AutoShardedClient__queue  # type: ignore[attr-defined]
        self._shards()[shard_id] = shard = Shard(ws, self, queue.put_nowait)
        shard.launch()

    async def close(self) -> None:
        await self._stop_syncing()  # it would retry connecting a closed client for ever
        await super().close()

    async def _stop_syncing(self) -> None:
        if self._syncing is not None:
            self._syncing.cancel()
            await asyncio.gather(self._syncing, return_exceptions=True)

    async def drop_shard(self, shard_id: int) -> Session | None:
        """Let go of a shard; returns its session, closed so that it stays resumable."""
        shard = self._shards().pop(shard_id, None)
        if shard is None:
            return None
        session = self._session(shard_id, shard.ws)
        shard._cancel_task()
        with contextlib.suppress(Exception):
            await shard.ws.close(code=4000)  # not 1000 or 1001: the session stays resumable
        log.info("discord: shard %d let go", shard_id)
        return session

    def replayed(self, interaction: discord.Interaction) -> bool:
        """An interaction made before its shard's session was resumed here, sent again by the
        resume, and older than Discord lets anyone answer: its user saw "This interaction
        failed", so acting on it now (a /reset, an /undo, again) would surprise them."""
        shard = 0
        if interaction.guild_id is not None and self.shard_count:
            shard = shard_of(interaction.guild_id, self.shard_count)
        resumed = self._resumed_at.get(shard)
        created = interaction.created_at
        return (
            resumed is not None
            and created < resumed
            and discord.utils.utcnow() - created > _ANSWERABLE_FOR
        )

    def _session(self, shard_id: int, ws: DiscordWebSocket) -> Session | None:
        """The shard's session as a restart resumes it: from before its oldest message not
        stored yet (``_unstored``)."""
        if not ws.session_id or self.shard_count is None:
            return None
        sequence = self.unstored.resume_from(shard_id, ws.session_id, ws.sequence)
        token = fingerprint(self.http.token or "")
        return Session(ws.session_id, sequence, str(ws.gateway), self.shard_count, token)

    def dispatch(self, event: str, /, *args: Any, **kwargs: Any) -> None:
        """discord.py's one door for events: a message's sequence is noted on its way in (the
        shard's connection has just set it: see ``_unstored``)."""
        if event == "message":
            message: discord.Message = args[0]
            guild = message.guild.id if message.guild else getattr(message.channel, "guild_id", 0)
            shard_id = shard_of(guild, self.shard_count) if guild and self.shard_count else 0
            shard = self._shards().get(shard_id)
            if shard is not None and shard.ws.session_id and shard.ws.sequence is not None:
                session, sequence = shard.ws.session_id, shard.ws.sequence
                self.unstored.received(str(message.id), shard_id, session, sequence)
        super().dispatch(event, *args, **kwargs)

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        await self.pacer.wait(shard_id or 0)  # Discord's pace, not discord.py's fixed 5 s

    async def on_connect(self) -> None:
        self._connected.set()

    async def on_shard_resumed(self, shard_id: int) -> None:
        self._resuming.discard(shard_id)
        self._connected.set()  # a resumed session has no READY, so no on_connect
        log.info("discord: shard %d: gateway session resumed", shard_id)

    async def on_shard_connect(self, shard_id: int) -> None:
        log.info("discord: shard %d of %s connected", shard_id, self.shard_count)
        if shard_id in self._resuming:  # Discord refused the RESUME (op 9): a new session
            self._resuming.discard(shard_id)
            self._resumed_at.pop(shard_id, None)
            log.warning(
                "discord: shard %d: the saved gateway session had expired; a new one started "
                "(messages sent while relaybot was down are not sent again)",
                shard_id,
            )

    async def on_message(self, message: discord.Message) -> None:
        settled = True  # stored, or dropped on purpose (not for the bot, or it failed)
        try:
            if self.user is not None:  # a held one is settled once the store takes it (_held)
                settled = not await self.events.on_message(message, self.user)
        except asyncio.CancelledError:
            settled = False  # stopped before it was stored: the restart has it sent again
            raise
        finally:
            if settled:
                self.unstored.settled(str(message.id))

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        await answer_dropped_press(interaction)  # the rest go to their DynamicItem or command


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error("discord: connecting shards failed", exc_info=exc)
