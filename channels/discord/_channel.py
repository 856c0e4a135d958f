# Left whole: DiscordChannel's lifecycle and receiving, one class; its other parts are the modules
# it hands work to.
"""Discord adapter on discord.py: gateway events in, REST calls out. :class:`DiscordChannel` is
what the engine sees: its lifecycle and receiving parts here, the rest in the modules it hands
each idea to.

Events arrive through discord.py's client (``_client``) and are handed to the engine by
``_handlers``; the engine answers through send / edit / typing / confirmations (``_outbox``;
answers with structure as components v2 cards: ``_layout``, sent by ``_answers``).

Logging in is retried with relaybot's :class:`engine.Backoff` rather than discord.py's
``ExponentialBackoff``: that one draws each pause at random from zero up to a ceiling that grows
to 1,024 s, which suits many shards reconnecting at once, not one daemon that should notice
within 30 s that Discord is back and say truthfully in its log when it will try again. Gateway
reconnects stay discord.py's own (``connect(reconnect=True)``).

With several instances on one store, each receiving part (the whole gateway, or each shard when
``shard_count`` is set: ``_discord_shards.receivers``) is connected by the one instance holding
its lease (``set_receiving``), which resumes the gateway session the part's previous holder left;
every instance logs in, and sends over REST. One process alone on its store resumes its own from
before the restart the same way (``engine.work.Resuming``). Either way the session kept counts
only messages already stored (``_unstored``), and a stop closes the connections with 4000, not
1000, so that their sessions stay resumable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

import aiohttp
import discord
from discord.http import Route

from channels import _discord_shards as shards
from channels._config import DiscordConfig
from channels.discord._answers import Answers
from channels.discord._client import Client
from channels.discord._guilds import Guilds
from channels.discord._handlers import CHANNEL, Handlers
from channels.discord._media import download
from channels.discord._outbox import LIMIT, Outbox
from channels.discord._reactions import set_status
from channels.discord._threads import Threads
from channels.discord._unstored import Unstored
from engine import (
    Attachment,
    Backoff,
    Capabilities,
    Channel,
    Claim,
    ConfirmationPrompt,
    Engine,
    MessageRef,
    OutgoingFile,
    Reaction,
    Receiver,
    Reply,
    Untrusted,
)
from engine.metrics import api_retry

log = logging.getLogger("channels.discord")
THOUGHTS_CHARS = LIMIT - 100  # of a thinking view: with its markup, within one message
_REMEMBERED = 256  # answers whose shown parts are kept, to skip unchanged edits

_CONNECT_WAIT_S = 30.0


class DiscordChannel(Channel):
    """The engine's view of Discord: chats are channel, thread or DM channel ids."""

    name = CHANNEL
    capabilities = Capabilities(
        max_message_length=LIMIT,
        buttons=True,
        edits=True,
        markdown="discord",
        edit_interval_s=1.5,  # Discord allows about 5 edits per 5 s per channel
        typing_interval_s=8.0,  # the indicator lasts about 10 s
    )

    def __init__(
        self, config: DiscordConfig, *, retry_initial_s: float = 1.0, ack_budget_s: float = 2.0
    ) -> None:
        """`retry_initial_s`: the first pause while Discord cannot be reached at start-up;
        `ack_budget_s`: how long an interaction waits for the engine before it is deferred."""
        self.config = config
        self.retry_initial_s = retry_initial_s
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
        self._threads = Threads(self._running)
        self._unstored = Unstored()  # messages received, not stored yet (kept across logins)
        self._outbox = Outbox(self._running, self._threads)
        self._answers = Answers(self._outbox, _REMEMBERED)
        self._guilds = Guilds(config, self._running)
        self._handlers = Handlers(
            config,
            self._require_engine,
            self._running,
            self._guilds,
            self._threads,
            self._unstored,
            ack_budget_s,
        )

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
        await self._handlers.held.aclose()
        if self._client is not None:
            await self._client.drop_all()  # closed with 4000: a restart resumes the sessions
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
                    log.info("discord: the gateway is let go (its sessions stay resumable)")
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
            client = Client(self.config, self._handlers, self.connected, self._unstored)
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
                api_retry(self.name)
                await backoff.sleep()
            else:
                return client

    def _running(self) -> Client | None:
        return self._client

    def _require_engine(self) -> Engine:
        if self._engine is None:
            raise RuntimeError("the Discord channel is not started")
        return self._engine

    # ---- what the engine asks

    async def is_chat_admin(self, chat_id: str, user_id: str) -> bool:
        """Manage Server in the channel's guild, or a role named in `admin_roles`."""
        return await self._guilds.is_chat_admin(chat_id, user_id)

    async def send(
        self,
        chat_id: str,
        text: str,
        *,
        reply_to: str | None = None,
        formatted: bool = True,
        once: str | None = None,
        untrusted: Untrusted | None = None,
    ) -> MessageRef:
        shown = self._answers.shown
        return await shown.send(
            chat_id, text, reply_to=reply_to, formatted=formatted, once=once, untrusted=untrusted
        )

    async def edit(
        self,
        ref: MessageRef,
        text: str,
        *,
        formatted: bool = True,
        untrusted: Untrusted | None = None,
    ) -> None:
        """Edit in place; text past 2000 characters goes to follow-up messages, kept for later
        edits. Parts whose text did not change are not sent again."""
        await self._answers.shown.edit(ref, text, formatted=formatted, untrusted=untrusted)

    async def typing(self, chat_id: str) -> None:
        await self._outbox.typing(chat_id)

    async def send_thoughts(
        self, chat_id: str, thoughts: str, *, reply_to: str | None = None
    ) -> MessageRef:
        """A spoiler: hidden until the user opens it (cut to fit one message)."""
        body = discord.utils.escape_markdown(thoughts[:THOUGHTS_CHARS])
        return await self.send(chat_id, f"💭 ||{body}||", reply_to=reply_to)

    async def delete(self, ref: MessageRef) -> None:
        await self._outbox.delete_part(ref.chat_id, ref.message_id)  # already gone: fine

    async def react(self, chat_id: str, message_id: str, reaction: Reaction) -> None:
        """With ``status_reactions``: 👀 on, 👀 off, or ⚠️ on the message (``_reactions``)."""
        if not self.config.status_reactions:
            return
        if self._client is None:
            raise RuntimeError("the Discord channel is not running")
        await set_status(self._client, self._threads, chat_id, message_id, reaction)

    async def show_confirmation(self, prompt: ConfirmationPrompt) -> MessageRef:
        return await self._outbox.show_confirmation(prompt)

    async def send_private(self, user_id: str, reply: Reply) -> MessageRef:
        return await self._outbox.send_private(user_id, reply)

    async def resolve_confirmation(self, ref: MessageRef, text: str) -> None:
        await self._outbox.resolve_confirmation(ref, text)

    async def send_files(
        self, chat_id: str, files: Sequence[OutgoingFile], *, reply_to: str | None = None
    ) -> MessageRef:
        return await self._outbox.send_files(chat_id, files, reply_to=reply_to)

    async def download(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        if self._client is None:
            raise RuntimeError("the Discord channel is not running")
        return await download(self._client, attachment, max_bytes)
