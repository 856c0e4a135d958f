"""The composition root: which parts make the engine, built in the order they need each other.

Every part takes what it uses in its constructor, fully built; nothing is injected afterwards.
The few things that are needed only once the engine runs are given then: the chat queues get
their handler when they open, the cluster its events when it joins (both by the dispatcher).
"""

from __future__ import annotations

import dataclasses
import os
import socket

from engine import Channel, Clock, Model, SystemClock
from engine.chat import (
    Background,
    ChatSettings,
    Commands,
    Confirmations,
    Dispatcher,
    ForgetMe,
    Housekeeping,
    Intake,
    Limits,
    LoopOptions,
    MediaIntake,
    Meter,
    Notices,
    Parts,
    Permissions,
    Policy,
    Schedules,
    Settings,
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
    speaker: Speaker | None = None,
) -> Dispatcher:
    """The engine (its dispatcher, as adapters see it) over `store`, `model` and `registry`."""
    s = settings or Settings()
    channels: dict[str, Channel] = {}  # filled as the channels are added
    tasks = Tasks()
    queues = ChatQueues()
    cluster = None
    if store.cluster is not None:  # several instances share the store
        name = f"{socket.gethostname()}:{os.getpid()}"
        cluster = Cluster(store.cluster, queues, channels, instance or InstanceSettings(name))
    notices = Notices(channels, cluster.may_send) if cluster is not None else Notices(channels)
    policy = Policy(s.admins, s.always_ask)
    permissions = Permissions(store, policy)
    limits = Limits(store, s.limits, policy)
    meter = Meter(store, s.prices)
    confirmations = Confirmations(store, channels, queues, tasks, s.allowed, permissions)
    background = Background(store, registry, queues, notices.sender)
    context = None
    if s.context is not None:
        context = ContextBudget(model, store.context, s.context, shared=cluster is not None)
    loop = ToolLoop(
        model,
        registry,
        jobs=background.runner,
        stream=s.stream,
        models=s.models,
        context=context,
        **dataclasses.asdict(loop_options or LoopOptions()),
    )
    chat_settings = ChatSettings(
        store,
        channels,
        policy,
        list(s.models),
        model.name,
        changed=cluster.settings_changed if cluster is not None else None,
        speaks=speaker is not None,
    )
    voice = None
    if speaker is not None:
        voice = VoiceAnswers(speaker, s.media.max_speech_chars, chat_settings)
    cache = ImageCache()
    turns = TurnRunner(
        store,
        loop,
        channels,
        confirmations,
        permissions,
        TurnSettings(
            s.system_prompt or "",
            s.history_limit,
            s.stream,
            set(s.dm_only),
            s.tool_calls_per_turn,
            tool_progress=s.tool_progress,
        ),
        notices,
        images=RecentImages(
            channels, cache, vision=s.media.vision, max_bytes=s.media.max_image_bytes
        ),
        chat_settings=chat_settings,
        meter=meter,
        voice=voice,
    )
    schedules = Schedules(store, queues, turns, s.schedules, clock or SystemClock())
    media = MediaIntake(store, channels, s.media, cache, notices.say, transcriber, meter)
    intake = Intake(
        store,
        queues,
        notices,
        tasks,
        chat_settings,
        media,
        limits,
        s.allowed,
        s.max_message_chars,
        s.max_quote_chars,
    )
    forget = ForgetMe(store, background.runner, chat_settings, context, cluster)
    housekeeping = Housekeeping(
        store, s.retention, lambda: queues.busy, trimmed=forget.drop_cached_summaries
    )
    commands = Commands(
        store=store,
        registry=registry,
        queues=queues,
        turns=turns,
        confirmations=confirmations,
        permissions=permissions,
        chat_settings=chat_settings,
        schedules=schedules,
        limits=limits,
        allowed=s.allowed,
        cluster=cluster,
        forget=forget,
    )
    return Dispatcher(
        Parts(
            store=store,
            settings=s,
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
            cluster=cluster,
        )
    )
