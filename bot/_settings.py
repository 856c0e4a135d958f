"""What the engine is told by the config: its settings, built the same way at start-up and by a
live reload (bot/_reload.py)."""

from __future__ import annotations

from bot._media import prices
from bot._models import context_settings
from bot.config import Config
from engine import Model
from engine.chat import (
    BotSettings,
    DelegateSettings,
    LimitSettings,
    MediaSettings,
    MemorySettings,
    PairingSettings,
    Retention,
    ScheduleSettings,
    Settings,
)

# [media] keys that choose models (bot/_media.py), not MediaSettings
MEDIA_MODELS = {"transcription_model", "speech_model", "speech_voice", "image_model", "image_size"}


def engine_settings(cfg: Config, models: dict[str, Model]) -> Settings:
    """What the engine is told by `cfg` (at start-up, and by a reload: bot/_reload.py)."""
    allowed = {
        "telegram": set(cfg.telegram.allowed_users),
        "discord": set(cfg.discord.allowed_users),
        "console": set(cfg.console.allowed_users),
    }
    return Settings(
        system_prompt=cfg.llm.system_prompt,
        allowed_users=allowed,
        dm_only=set(cfg.tools.dm_only),
        history_limit=cfg.engine.history_limit,
        shutdown_grace_s=cfg.engine.shutdown_grace_s,
        stream=cfg.llm.stream,
        max_message_chars=cfg.access.max_message_chars,
        max_quote_chars=cfg.engine.max_quote_chars,
        tool_progress=cfg.engine.tool_progress,
        language=cfg.engine.language,
        admins=set(cfg.access.admins),
        always_ask=set(cfg.tools.always_ask),
        limits=LimitSettings(
            messages_per_minute=cfg.limits.messages_per_minute,
            tokens_per_day=cfg.limits.tokens_per_day,
            usd_per_day=cfg.limits.usd_per_day,
            images_per_day=cfg.limits.images_per_day,
        ),
        tool_calls_per_turn=cfg.limits.tool_calls_per_turn,
        media=MediaSettings(
            vision=cfg.llm.vision,
            **cfg.media.model_dump(exclude=MEDIA_MODELS),
        ),
        schedules=ScheduleSettings(catch_up_s=cfg.schedules.catch_up_s),
        models=models,
        context=context_settings(cfg),
        retention=Retention(cfg.storage.retention_days, cfg.storage.keep_days),
        pairing=PairingSettings(enabled=cfg.access.pairing),
        bots=BotSettings(
            allowed=frozenset(entry.lower() for entry in cfg.access.bots),
            per_minute=cfg.access.bot_turns_per_minute,
            chain=cfg.access.bot_chain,
            cooldown_s=cfg.access.bot_cooldown_s,
        ),
        console_url=cfg.web.base_url(),
        console_link_s=cfg.web.link_minutes * 60,
        memory=MemorySettings(cfg.memory.max_tokens),
        delegate=DelegateSettings(cfg.tools.delegate_max_iterations, cfg.tools.delegate_max_tokens)
        if "delegate" in cfg.tools.builtins
        else None,
        prices=prices(cfg),
    )
