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
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import TYPE_CHECKING

from bot._checks import configured_skills
from bot._engine import build_engine
from bot._logging import RedactingFilter
from bot._media import media_parts
from bot._models import build_model, chat_models
from bot._settings import engine_settings
from bot.config import Config
from engine import Backoff, Channel, Clock, SystemClock
from engine.chat import (
    Dispatcher,
    LoopOptions,
)
from engine.metrics import ErrorLog, enable_metrics, set_state, use_error_log
from engine.store import Store, open_store
from engine.work import InstanceSettings
from tools import Tool
from tools.builtins import MemoryAccess, ScheduleAccess, WallClock, builtin_tools
from tools.config import apply_policy
from tools.errors import StoreUnavailable
from tools.plugins import load_plugins
from tools.registry import ToolRegistry
from tools.skills import Skills, use_skill_tool

if TYPE_CHECKING:
    from tools.mcp import McpManager

log = logging.getLogger(__name__)


@contextlib.contextmanager
def _without_telegram_passport() -> Iterator[None]:
    """Import python-telegram-bot without its Telegram Passport crypto.

    PTB loads ``cryptography`` when it is installed (mcp brings it, through PyJWT) only to decrypt
    Telegram Passport data, which relaybot never asks for: 7.6 MiB of the daemon's resident
    memory. Hidden while PTB is first imported, Passport stays off in PTB; whatever imports the
    package later (an MCP server's OAuth) gets the real one."""
    if "telegram" in sys.modules or "cryptography" in sys.modules:
        yield
        return
    sys.modules["cryptography"] = None  # type: ignore[assignment]  # an import of it fails
    try:
        yield
    finally:
        del sys.modules["cryptography"]


def enabled_channels(config: Config) -> list[Channel]:
    channels: list[Channel] = []
    if config.telegram.enabled:
        with _without_telegram_passport():
            from channels.telegram import TelegramChannel

        channels.append(TelegramChannel(config.telegram))
    if config.discord.enabled:
        from channels.discord import DiscordChannel

        channels.append(DiscordChannel(config.discord))
    return channels


@contextlib.asynccontextmanager
async def open_tools(
    config: Config,
    *,
    memory: MemoryAccess | None = None,
    schedules: ScheduleAccess | None = None,
    extra: Sequence[Tool] = (),
    clock: WallClock | None = None,
    skills: Skills | None = None,
) -> AsyncIterator[tuple[ToolRegistry, McpManager | None]]:
    """The registry with built-ins, plugins, `extra` tools and MCP servers' tools (and
    use_skill when there are `skills`)."""
    registry = ToolRegistry(default_timeout_s=config.tools.default_timeout_s)
    search_key = config.search_key()
    for tool in builtin_tools(
        config.tools, memory=memory, schedules=schedules, search_key=search_key, clock=clock
    ):
        registry.register(tool)
    if skills:
        registry.register(use_skill_tool(skills))
    plugin_tools, _problems = load_plugins(  # each problem already logged
        config.tools.plugins, plugin_dirs=config.plugin_dirs()
    )
    for tool in [*plugin_tools, *extra]:
        try:
            registry.register(tool)
        except Exception as exc:
            log.error("tool %s not registered: %s", getattr(tool, "name", tool), exc)
    async with contextlib.AsyncExitStack() as stack:
        mcp = None
        if config.mcp.servers:  # the mcp SDK takes a while to import: only when used
            from tools.mcp import McpManager

            mcp = await stack.enter_async_context(McpManager(config.mcp.servers, registry))
        for warning in apply_policy(registry, config.tools):
            log.warning("%s", warning)
        yield registry, mcp


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
        self.config = config
        self.clock = clock or SystemClock()  # scheduled tasks run by it (tests pass their own)
        self.channels = list(enabled_channels(config) if channels is None else channels)
        self.extra_tools = extra_tools
        self._stack = contextlib.AsyncExitStack()
        self.store: Store
        self.dispatcher: Dispatcher
        self.registry: ToolRegistry

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
        stack.callback(use_error_log(ErrorLog(RedactingFilter(cfg.secrets()).redact)))
        self.model = build_model(cfg)
        stack.push_async_callback(self.model.aclose)
        media = media_parts(cfg, self.model, self.store)
        pictures = (media.picture_tool,) if media.picture_tool is not None else ()
        self.skills = await asyncio.to_thread(configured_skills, cfg)
        for problem in self.skills.problems:
            log.warning("skill %s", problem)
        self.registry, self.mcp = await stack.enter_async_context(
            open_tools(
                cfg,
                memory=MemoryAccess(self.store.memory, self.is_admin),
                schedules=ScheduleAccess(
                    self.store.schedules,
                    cfg.schedules.max_per_chat,
                    cfg.schedules.min_interval_s,
                    self.clock.now,
                ),
                extra=(*self.extra_tools, *pictures),
                clock=self.clock,
                skills=self.skills,
            )
        )
        models = chat_models(cfg, self.model)
        for other in models.values():
            if other is not self.model:
                stack.push_async_callback(other.aclose)
        loop_options = LoopOptions(
            max_iterations=cfg.llm.max_iterations,
            max_output_chars=cfg.engine.max_tool_output_chars,
            retry_budget=cfg.engine.retry_budget,
            confirmation_timeout_s=cfg.tools.confirmation_timeout_s,
            max_parallel_tools=cfg.engine.max_parallel_tools,
        )
        self.dispatcher = build_engine(
            self.store,
            self.model,
            self.registry,
            engine_settings(cfg, models),
            loop_options,
            media.transcriber,
            speaker=media.speaker,
            clock=self.clock,
            instance=InstanceSettings(cfg.instance.name(), cfg.instance.lease_s),
            parts=[self.skills] if self.skills else [],
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
        if cfg.metrics.listen:
            from bot._metrics_http import metrics_server  # its HTTP server: only when asked for

            host, port = cfg.metrics.address()
            await stack.enter_async_context(metrics_server(host, port, self._metrics_state))
        if cfg.web.listen:
            from bot.web import console_server  # the console: only when asked for

            host, port = cfg.web.address()
            await stack.enter_async_context(console_server(self, host, port))
        await self.model.warm_up()  # in a thread; the channels are already listening
        await self.store.settled()  # a successful start: an upgrade's copy is not needed now

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
