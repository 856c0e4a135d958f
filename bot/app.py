"""Wiring and lifecycle: one engine, its store and tools, and the enabled channels.

async with App(config) as app:   # store open, tools loaded, channels connected
    ...                          # messages flow
# channels stopped, running turns finished (bounded), store closed
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Iterator, Sequence

from bot._engine import build_engine
from bot._generation import Generation, close_generations, loop_options, open_generation
from bot._logging import RedactingFilter
from bot._mcp_oauth import SignIns, prepare_key
from bot._media import media_parts
from bot._models import build_model
from bot._settings import engine_settings
from bot._web import WebConsole
from bot.config import Config
from engine import Backoff, Channel, Clock, SystemClock
from engine.chat import Dispatcher
from engine.metrics import ErrorLog, enable_metrics, set_state, use_error_log
from engine.store import Store, open_store
from engine.work import InstanceSettings
from tools import Tool
from tools.errors import StoreUnavailable
from tools.registry import ToolRegistry

log = logging.getLogger(__name__)


@contextlib.contextmanager
def _lean_telegram_import() -> Iterator[None]:
    """Import python-telegram-bot without two things relaybot never uses through it.

    PTB loads ``cryptography`` when it is installed (mcp brings it, through PyJWT) only to decrypt
    Telegram Passport data, which relaybot never asks for: 7.6 MiB of the daemon's resident
    memory. PTB imports httpx for its own HTTP client (relaybot's requests go over aiohttp:
    channels/telegram/_http.py), and httpx tries to import its command-line client, which loads
    click and pygments when they are installed (~9 ms of start-up). Both are hidden while PTB is
    first imported (httpx then keeps a stand-in for its `main`); whatever imports them later
    gets the real ones."""
    if "telegram" in sys.modules:
        yield
        return
    hidden = [name for name in ("cryptography", "httpx._main") if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # an import of it fails
    try:
        yield
    finally:
        for name in hidden:
            del sys.modules[name]


def enabled_channels(config: Config) -> list[Channel]:
    channels: list[Channel] = []
    if config.telegram.enabled:
        with _lean_telegram_import():
            from channels.telegram import TelegramChannel

        channels.append(TelegramChannel(config.telegram))
    if config.discord.enabled:
        from channels.discord import DiscordChannel

        channels.append(DiscordChannel(config.discord))
    return channels


class App:
    """The daemon: `channels` defaults to the enabled ones in `config`."""

    def __init__(
        self,
        config: Config,
        *,
        channels: Sequence[Channel] | None = None,
        extra_tools: Sequence[Tool] = (),
        clock: Clock | None = None,
    ) -> None:
        self._config = config  # until the engine holds it (see `config`)
        self.clock = clock or SystemClock()  # scheduled tasks run by it (tests pass their own)
        self.channels = list(enabled_channels(config) if channels is None else channels)
        self.extra_tools = extra_tools
        self._stack = contextlib.AsyncExitStack()
        self.retiring: set[asyncio.Task[None]] = set()  # tools a reload replaced, closing
        self.pictures: tuple[Tool, ...] = ()  # the picture tool ([media] image_model)
        self.console = WebConsole(self)  # served where [web] listen in force says
        self.signins = SignIns()  # MCP servers' OAuth sign-ins waiting for [web]'s callback
        self._redacting: tuple[Config | None, RedactingFilter] = (None, RedactingFilter())
        self.generation: Generation  # the model and tools in force (bot/_generation.py)
        self.store: Store
        self.dispatcher: Dispatcher

    async def __aenter__(self) -> App:
        try:
            await self._start()
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def _start(self) -> None:
        cfg = self.config
        stack = self._stack
        if cfg.metrics.listen:
            enable_metrics()  # counting from the start; served once the channels run
        self.store = await _opened(cfg)
        stack.push_async_callback(self.store.__aexit__, None, None, None)
        stack.callback(use_error_log(ErrorLog(self.redact)))
        self.model = build_model(cfg)  # the first: warmed up, and the media parts use it
        stack.push_async_callback(self.model.aclose)
        media = media_parts(
            cfg, self.model, self.store, lambda: self.config, lambda: self.generation.model
        )
        self.pictures = (media.picture_tool,) if media.picture_tool is not None else ()
        await prepare_key(cfg)  # an MCP sign-in's key: before any tool runs, hidden from them
        self.generation = await open_generation(self, cfg, model=self.model)
        stack.push_async_callback(close_generations, self)  # after the turns have ended
        self.dispatcher = build_engine(
            self.store,
            self.model,
            self.generation.registry,
            engine_settings(cfg, self.generation.models),
            loop_options(cfg),
            media.transcriber,
            speaker=media.speaker,
            clock=self.clock,
            instance=InstanceSettings(cfg.instance.name(), cfg.instance.lease_s),
            parts=self.generation.parts(),
            source=cfg,
        )
        # Exit order (reverse): the dispatcher finishes running turns while the channels can
        # still deliver their answers; then the channels stop.
        started: list[Channel] = []
        stack.push_async_callback(self._stop_channels, started)
        stack.push_async_callback(self.dispatcher.aclose)
        for channel in self.channels:
            self.dispatcher.add_channel(channel)
            if self.store.cluster is not None:
                for part in channel.receivers():  # each until this instance holds its lease
                    await channel.set_receiving(part.lease, False)
        await self.dispatcher.prepare()  # before the channels deliver anything new
        for channel in self.channels:
            await channel.start(self.dispatcher)
            started.append(channel)
            log.info("channel %s started", channel.name)
        await self.dispatcher.start()
        self.signins.channels_up.set()  # an MCP sign-in's link can reach an owner now
        if cfg.metrics.listen:
            from bot._metrics_http import metrics_server  # its HTTP server: only when asked for

            host, port = cfg.metrics.address()
            await stack.enter_async_context(metrics_server(host, port, self._metrics_state))
        stack.push_async_callback(self.console.aclose)
        await (await self.console.move(cfg.web)).keep()  # [web] listen: bot/_web.py
        await self.model.warm_up()  # in a thread; the channels are already listening
        await self.store.settled()  # a successful start: an upgrade's copy is not needed now

    @property
    def config(self) -> Config:
        """The config in force: what the engine's settings in force were made from (a reload
        swaps both in one step: engine.chat.Live), or the one given, until the engine is built."""
        dispatcher: Dispatcher | None = getattr(self, "dispatcher", None)
        if dispatcher is not None and isinstance(dispatcher.live.source, Config):
            return dispatcher.live.source
        return self._config

    def redact(self, text: str) -> str:
        """`text` without the secrets of the config in force (for the store's error log)."""
        config = self.config
        if self._redacting[0] is not config:  # made once per config (secrets() reads files)
            self._redacting = (config, RedactingFilter(config.secrets()))
        return self._redacting[1].redact(text)

    @property
    def registry(self) -> ToolRegistry:
        """The tools in force (a reload replaces them: bot/_generation.py)."""
        return self.generation.registry

    def is_admin(self, channel: str, user_id: str) -> bool:
        """One of `[access] admins` (who may change a group's memory)."""
        return f"{channel}:{user_id}" in self.config.access.admins

    async def _metrics_state(self) -> None:
        c = await self.store.ops.counts()
        queues = self.dispatcher.queues
        set_state(
            queues.depths(),
            queues.busy,
            c.confirmations_pending,
            c.jobs_running,
            c.db_bytes,
            c.wal_bytes,
        )

    @staticmethod
    async def _stop_channels(started: list[Channel]) -> None:
        for channel in reversed(started):
            try:
                await channel.stop()
            except Exception:
                log.exception("stopping channel %s failed", channel.name)

    def status(self) -> str:
        names = ", ".join(c.name for c in self.channels) or "none"
        status = f"channels: {names}; turns running: {self.dispatcher.busy}"
        if self.dispatcher.cluster is not None:
            status += f"; instance {self.config.instance.name()}"
        return status


async def _opened(config: Config) -> Store:
    """The configured store, open. A PostgreSQL server that cannot be reached yet is waited
    for (retried with backoff, logged once a minute): instances may start before it."""
    url = config.storage.resolved_url()
    backoff = Backoff(1.0, max_s=10.0)
    reported = -60.0
    while True:
        store = open_store(
            url,
            config.storage.resolved_path(),
            wal_limit_bytes=int(config.storage.wal_limit_mb * 1024 * 1024),
        )
        try:
            return await store.__aenter__()
        except StoreUnavailable as exc:
            if backoff.waited_s - reported >= 60:
                reported = backoff.waited_s
                log.error("%s; retrying", exc)
            await backoff.sleep()
