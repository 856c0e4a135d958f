"""The media parts the config asks for: transcription, speech, pictures, and the price table.

Transcription, speech and pictures are requests to the OpenAI-compatible endpoint among the
configured models (its SDK client, so the key, timeout, retries and connection pool are the
chat's); with Anthropic models only, each is off and the log says why.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot._models import openai_compatible
from bot.config import Config
from engine import Model
from engine.chat import DailyPictures
from engine.models import (
    OpenAIPainter,
    OpenAISpeaker,
    OpenAITranscriber,
    Price,
    Prices,
    Speaker,
    Transcriber,
)
from engine.store import Store
from tools.builtins import GenerateImage

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MediaParts:
    transcriber: Transcriber | None = None
    speaker: Speaker | None = None
    picture_tool: GenerateImage | None = None


def media_parts(
    cfg: Config,
    model: Model,
    store: Store,
    live: Callable[[], Config] | None = None,
    model_now: Callable[[], Model] | None = None,
) -> MediaParts:
    """The parts `cfg` asks for. `live` gives the config in force and `model_now` the model
    (both the App's, which a reload replaces): a limit is read where it applies, and a request
    goes to the OpenAI-compatible endpoint in force then (`model`'s, when the model in force has
    none: every model of the new file Anthropic's, say; `model` stays open until the App exits)."""
    media = cfg.media
    now = live or (lambda: cfg)
    wanted = {
        "transcription_model": media.transcription_model,
        "speech_model": media.speech_model,
        "image_model": media.image_model,
    }
    endpoint = openai_compatible(model)
    if endpoint is None:
        for key, name in wanted.items():
            if name:
                log.warning("[media] %s needs an OpenAI-compatible [llm] endpoint; it is off", key)
        return MediaParts()
    first = endpoint  # bound once for `sdk` below, which reads a client when a request is made
    current = model_now or (lambda: model)

    def sdk() -> Any:
        return (openai_compatible(current()) or first).sdk

    transcriber = speaker = tool = None
    if media.transcription_model:
        transcriber = OpenAITranscriber(sdk, media.transcription_model)
    if media.speech_model:
        speaker = OpenAISpeaker(sdk, media.speech_model, media.speech_voice)
    if media.image_model:
        painter = DailyPictures(
            OpenAIPainter(sdk, media.image_model),
            store,
            lambda: now().limits.images_per_day,
            lambda: now().access.admins,
        )
        tool = GenerateImage(painter, media.image_size)
    return MediaParts(transcriber, speaker, tool)


def prices(cfg: Config) -> Prices:
    """The built-in prices with `[pricing."MODEL"]` over them."""
    return Prices({name: Price(**p.model_dump()) for name, p in cfg.pricing.items()})
