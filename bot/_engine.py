"""The composition root: which parts make the engine, built in the order they need each other.

Every part takes what it uses in its constructor, fully built; nothing is injected afterwards.
The settings live in one :class:`engine.chat.Live`: the parts that hold settings are given it,
or a function reading their own share of it, so a reload (bot/_reload.py) swaps them all at
once by replacing the one object. The model and tools a turn runs with are one
:class:`engine.chat.Tooling` in it (a tool loop over them): :func:`retool` builds a new one for a
reload, the same way build_engine builds the first.
The few things that are needed only once the engine runs are given then: the chat queues get
their handler when they open, the cluster its events when it joins (both by the dispatcher).
"""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Sequence

from engine import Channel, Clock, Model, SystemClock
from engine.chat import (
    Background,
    ChatSettings,
    Commands,
    Confirmations,
    Delegate,
    Dispatcher,
    ForgetMe,
    Housekeeping,
    Intake,
    Limits,
    Live,
    LoopOptions,
    MediaIntake,
    Meter,
    Notices,
    Pairing,
    Parts,
    Permissions,
    Policy,
    PromptPart,
    Questions,
    Remembered,
    Schedules,
    Settings,
    Tooling,
    TurnRunner,
    TurnSettings,
    VoiceAnswers,
)
from engine.context import ContextBudget, ImageCache, RecentImages
from engine.loop import ToolLoop
from engine.models import Speaker, Transcriber
from engine.store import Store
from engine.work import ChatQueues, Cluster, InstanceSettings, Tasks
from tools.registry import ToolRegistry


def turn_settings(s: Settings) -> TurnSettings:
    """What a turn reads of the settings in force, when it starts."""
    return TurnSettings(
        s.system_prompt or "",
        s.history_limit,
        s.stream,
        s.dm_only,
        s.tool_calls_per_turn,
        tool_progress=s.tool_progress,
    )


def build_engine(
    store: Store,
    model: Model,
    registry: ToolRegistry,
    settings: Settings | None = None,
    loop_options: LoopOptions | None = None,
    transcriber: Transcriber | None = None,
    *,
    clock: Clock | None = None,
    instance: InstanceSettings | None = None,
    parts: Sequence[PromptPart] = (),
    speaker: Speaker | None = None,
    source: object = None,
) -> Dispatcher:
    """The engine (its dispatcher, as adapters see it) over `store`, `model` and `registry`;
    `parts` add to each turn's system prompt after what is remembered (the skills offered);
    `source` is what the settings were made from (the App's config: engine.chat.Live)."""
    s = settings or Settings()
    live = Live(s, source)  # what a reload swaps (bot/_reload.py); the parts below read it there
    channels: dict[str, Channel] = {}  # filled as the channels are added
    tasks = Tasks()
    queues = ChatQueues()
    cluster = None
    if store.cluster is not None:  # several instances share the store
        name = f"{socket.gethostname()}:{os.getpid()}"
        cluster = Cluster(store.cluster, queues, channels, instance or InstanceSettings(name))
    notices = Notices(channels, cluster.may_send) if cluster is not None else Notices(channels)
    policy = Policy(live)
    permissions = Permissions(store, policy)
    chat_settings = ChatSettings(
        store,
        channels,
        policy,
        lambda: list(live.settings.models),
        lambda: live.tooling.loop.model.name,
        changed=cluster.settings_changed if cluster is not None else None,
        language=lambda: live.settings.language,
        speaks=speaker is not None,
    )
    languages = chat_settings.languages  # the language of relaybot's own words in a chat
    limits = Limits(store, lambda: live.settings.limits, policy)
    pairing = Pairing(store, live, policy, channels, notices, tasks, languages)
    confirmations = Confirmations(
        store, channels, queues, tasks, pairing.allowed, permissions, languages
    )
    meter = Meter(store, lambda: live.settings.prices)
    background = Background(store, registry, queues, notices.sender)
    loop = _tool_loop(
        store,
        background,
        confirmations,
        permissions,
        model,
        registry,
        s,
        loop_options or LoopOptions(),
    )
    live.tooling = Tooling(loop, parts)
    voice = None
    if speaker is not None:
        voice = VoiceAnswers(speaker, lambda: live.settings.media.max_speech_chars, chat_settings)
    cache = ImageCache()
    remembered = Remembered(store.memory, policy, lambda: live.settings.memory)
    turns = TurnRunner(
        store,
        lambda: live.tooling,
        channels,
        confirmations,
        permissions,
        lambda: turn_settings(live.settings),
        notices,
        images=RecentImages(
            channels,
            cache,
            vision=lambda: live.settings.media.vision,
            max_bytes=lambda: live.settings.media.max_image_bytes,
        ),
        chat_settings=chat_settings,
        meter=meter,
        voice=voice,
        parts=(remembered,),
        tasks=tasks,
    )
    schedules = Schedules(
        store, queues, turns, lambda: live.settings.schedules, clock or SystemClock()
    )
    media_settings = lambda: live.settings.media  # noqa: E731
    media = MediaIntake(store, channels, media_settings, cache, notices.say, transcriber, meter)
    intake = Intake(store, queues, notices, tasks, chat_settings, media, limits, pairing, live)
    forget = ForgetMe(store, background.runner, chat_settings, cluster, tasks)
    housekeeping = Housekeeping(store, lambda: live.settings.retention, lambda: queues.busy)
    questions = Questions(channels, languages.of)
    commands = Commands(
        store=store,
        queues=queues,
        turns=turns,
        confirmations=confirmations,
        permissions=permissions,
        chat_settings=chat_settings,
        schedules=schedules,
        limits=limits,
        pairing=pairing,
        cluster=cluster,
        forget=forget,
        memory=remembered,
        questions=questions,
    )
    return Dispatcher(
        Parts(
            store=store,
            live=live,
            channels=channels,
            tasks=tasks,
            queues=queues,
            notices=notices,
            confirmations=confirmations,
            background=background,
            loop=loop,
            chat_settings=chat_settings,
            turns=turns,
            schedules=schedules,
            media=media,
            intake=intake,
            housekeeping=housekeeping,
            forget=forget,
            commands=commands,
            limits=limits,
            pairing=pairing,
            cluster=cluster,
            questions=questions,
        )
    )


def _tool_loop(
    store: Store,
    background: Background,
    confirmations: Confirmations,
    permissions: Permissions,
    model: Model,
    registry: ToolRegistry,
    s: Settings,
    options: LoopOptions,
) -> ToolLoop:
    """The tool loop over `model` and `registry` (given the delegate tool when configured)."""
    if s.delegate is not None:
        registry.register(
            Delegate(
                model,
                registry,
                store,
                confirmations,
                permissions,
                s.delegate,
                dm_only=s.dm_only,
                confirmation_timeout_s=options.confirmation_timeout_s,
            )
        )
    context = None
    if s.context is not None:
        context = ContextBudget(model, store.context, s.context)
    return ToolLoop(
        model,
        registry,
        jobs=background.runner,
        stream=s.stream,
        models=s.models,
        context=context,
        **dataclasses.asdict(options),
    )


def retool(
    engine: Dispatcher,
    model: Model,
    registry: ToolRegistry,
    settings: Settings,
    options: LoopOptions,
    parts: Sequence[PromptPart] = (),
) -> Tooling:
    """A new tooling for `engine` (a reload's model and tools), built as build_engine builds
    the first; `engine.reload(settings, tooling)` puts it in force."""
    e = engine
    loop = _tool_loop(
        e.store,
        e.background,
        e.confirmations,
        e.turns.permissions,
        model,
        registry,
        settings,
        options,
    )
    return Tooling(loop, parts)
