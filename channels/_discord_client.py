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
import contextlib
import datetime
import logging
import re
from collections.abc import Coroutine, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import aiohttp
import discord
import yarl
from discord import app_commands
from discord.gateway import DiscordWebSocket
from discord.shard import Shard

from channels._discord_inbound import DECISION_RE, PressOn, press_on
from channels._discord_shards import IdentifyPacer, Session, layout, shard_of
from engine import metrics
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
_TOO_LATE = {10062, 40060}  # Discord's codes: unknown interaction, already acknowledged
_ANSWERABLE_FOR = datetime.timedelta(seconds=3)  # Discord's limit for a first answer
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
        # The shards to connect (None: discord.py's choice, every one), and the sessions to
        # resume them from, which another instance left (see _discord_shards).
        self.wanted: set[int] | None = None
        self.resume: dict[int, Session] = {}
        self._resumed_at: dict[int, datetime.datetime] = {}  # shard → when it resumed here
        self._syncing: asyncio.Task[None] | None = None  # connecting the wanted shards
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
        return {i: s for i, shard in self._shards().items() if (s := self._session(shard.ws))}

    async def launch_shard(
        self, gateway: yarl.URL, shard_id: int, *, initial: bool = False
    ) -> None:
        session = self.resume.pop(shard_id, None)
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
        log.info("discord: shard %d: resuming the session another instance left", shard_id)
        self._resumed_at[shard_id] = discord.utils.utcnow()
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
        session = self._session(shard.ws)
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

    def _session(self, ws: DiscordWebSocket) -> Session | None:
        if not ws.session_id or self.shard_count is None:
            return None
        return Session(ws.session_id, ws.sequence, str(ws.gateway), self.shard_count)

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
        with too_late_to_answer():
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


@contextlib.contextmanager
def too_late_to_answer() -> Iterator[None]:
    """An interaction Discord no longer takes an answer to (answered already, or older than its
    three seconds: sent again when a shard's session was resumed elsewhere) is logged, not
    raised: what the engine did with it stands."""
    try:
        yield
    except discord.HTTPException as exc:
        if exc.code not in _TOO_LATE:
            raise
        log.info("discord: an interaction could not be answered any more (%s)", exc.text)


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error("discord: connecting shards failed", exc_info=exc)


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
