"""The model and tools a config describes, as one generation: the model (failover over its
fallbacks) and the models chats may choose, the skills, and the tool registry (built-ins,
plugins, use_skill, MCP servers' tools). The App builds the first at start-up; a reload
(bot/_reload.py) builds the next from the new file and puts it in force with the settings
(:func:`put_in_force`). A turn keeps the generation it started with (engine.chat.Tooling); a
replaced one is closed (its MCP servers stopped, its model clients closed) once its last turn
has ended, or when the App stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from bot._checks import configured_skills
from bot._engine import retool
from bot._mcp_client import mcp_client
from bot._models import build_model, chat_models
from bot._settings import engine_settings
from bot.config import Config
from engine import Model
from engine.chat import LoopOptions, PromptPart, Tooling
from tools import Tool
from tools.builtins import MemoryAccess, ScheduleAccess, WallClock, builtin_tools
from tools.config import apply_policy
from tools.plugins import load_plugins
from tools.registry import ToolRegistry
from tools.skills import Skills, skill_tools

if TYPE_CHECKING:
    from bot._mcp_oauth import SignIns
    from engine import Channel, Clock
    from engine.chat import Dispatcher
    from engine.store import Store
    from tools.mcp import McpManager

log = logging.getLogger(__name__)


class Host(Protocol):
    """What a generation is built for and put in force in: the daemon (bot.app.App is one)."""

    generation: Generation  # the one in force
    retiring: set[asyncio.Task[None]]  # replaced ones, closing once their turns have ended

    @property
    def store(self) -> Store: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def dispatcher(self) -> Dispatcher: ...

    @property
    def extra_tools(self) -> Sequence[Tool]: ...

    @property
    def pictures(self) -> Sequence[Tool]: ...

    @property
    def config(self) -> Config: ...

    @property
    def channels(self) -> Sequence[Channel]: ...

    @property
    def signins(self) -> SignIns: ...

    def is_admin(self, channel: str, user_id: str) -> bool: ...


@contextlib.asynccontextmanager
async def open_tools(
    config: Config,
    *,
    memory: MemoryAccess | None = None,
    schedules: ScheduleAccess | None = None,
    extra: Sequence[Tool] = (),
    clock: WallClock | None = None,
    skills: Skills | None = None,
    app: Host | None = None,
) -> AsyncIterator[tuple[ToolRegistry, McpManager | None]]:
    """The registry with built-ins, plugins, `extra` tools and MCP servers' tools (and
    use_skill, and find_skill when many, when there are `skills`); the servers may sample
    relaybot's model only in the daemon (`app`)."""
    registry = ToolRegistry(default_timeout_s=config.tools.default_timeout_s)
    search_key = config.search_key()
    for tool in builtin_tools(
        config.tools,
        memory=memory,
        schedules=schedules,
        search_key=search_key,
        clock=clock,
        kept=config.skill_dirs()[0],
    ):
        registry.register(tool)
    for tool in skill_tools(skills) if skills else []:
        registry.register(tool)
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

            client = mcp_client(config, app)
            mcp = McpManager(  # a server that starts late: `confirm` applies to its tools too
                config.mcp.servers,
                registry,
                client=client,
                on_change=lambda: apply_policy(registry, config.tools),
            )
            await stack.enter_async_context(mcp)
        for warning in apply_policy(registry, config.tools):
            log.warning("%s", warning)
        yield registry, mcp


@dataclass(slots=True)
class Generation:
    model: Model
    models: dict[str, Model]  # [llm] models_allowed, by name
    registry: ToolRegistry
    mcp: McpManager | None
    skills: Skills
    stack: contextlib.AsyncExitStack  # closes its MCP servers and model clients

    def parts(self) -> list[PromptPart]:
        """What the system prompt carries with these tools: the skills offered, and what the
        MCP servers say about using theirs."""
        parts: list[PromptPart] = [self.skills] if self.skills else []
        return parts + ([self.mcp] if self.mcp is not None else [])


def loop_options(cfg: Config) -> LoopOptions:
    return LoopOptions(
        max_iterations=cfg.llm.max_iterations,
        max_output_chars=cfg.engine.max_tool_output_chars,
        retry_budget=cfg.engine.retry_budget,
        confirmation_timeout_s=cfg.tools.confirmation_timeout_s,
        max_parallel_tools=cfg.engine.max_parallel_tools,
        trusted_sources=tuple(cfg.tools.trusted_sources),
    )


async def open_generation(app: Host, cfg: Config, *, model: Model | None = None) -> Generation:
    """The model and tools `cfg` describes, for `app`; `model` (the App's first, which the
    media parts use too) is used as it is, and left open when the generation closes."""
    stack = contextlib.AsyncExitStack()
    try:
        skills = await asyncio.to_thread(configured_skills, cfg)
        for problem in skills.problems:
            log.warning("skill %s", problem)
        schedules = ScheduleAccess(
            app.store.schedules,
            cfg.schedules.max_per_chat,
            cfg.schedules.min_interval_s,
            app.clock.now,
        )
        registry, mcp = await stack.enter_async_context(
            open_tools(
                cfg,
                memory=MemoryAccess(app.store.memory, app.is_admin),
                schedules=schedules,
                extra=(*app.extra_tools, *app.pictures),
                clock=app.clock,
                skills=skills,
                app=app,
            )
        )
        if model is None:
            model = build_model(cfg)
            stack.push_async_callback(model.aclose)
        models = chat_models(cfg, model)
        for other in models.values():
            if other is not model:
                stack.push_async_callback(other.aclose)
    except BaseException:
        await stack.aclose()
        raise
    return Generation(model, models, registry, mcp, skills, stack)


async def put_in_force(app: Host, cfg: Config) -> None:
    """Build `cfg`'s generation and put it and `cfg`'s settings in force, in one step, for what
    starts from now on; the one it replaces is closed once its turns have ended. Raises (and
    changes nothing) when the generation cannot be built: a fallback's key missing, say."""
    generation = await open_generation(app, cfg)
    engine = app.dispatcher
    settings = engine_settings(cfg, generation.models)
    tooling = retool(
        engine,
        generation.model,
        generation.registry,
        settings,
        loop_options(cfg),
        generation.parts(),
    )
    old, replaced = engine.live.tooling, app.generation
    engine.reload(settings, tooling, cfg)  # no await between building and this: one step
    app.generation = generation
    task = asyncio.create_task(_close_after(old, replaced), name="retire-tools")
    app.retiring.add(task)
    task.add_done_callback(app.retiring.discard)
    if generation.model.name != old.loop.model.name:
        log.info("model: %s (was %s)", generation.model.name, old.loop.model.name)


async def _close_after(tooling: Tooling, generation: Generation) -> None:
    """Close `generation` once the last turn running with it (with `tooling`) has ended."""
    await tooling.idle()
    try:
        await generation.stack.aclose()
    except Exception:
        log.exception("closing the tools a reload replaced failed")


async def close_generations(app: Host) -> None:
    """At exit, once the turns have ended: every generation still open."""
    await asyncio.gather(*app.retiring, return_exceptions=True)
    await app.generation.stack.aclose()
