"""Text to voice: the OpenAI-compatible ``/audio/speech`` endpoint, through the SDK.

OpenAI (``tts-1``, ``tts-1-hd``, ``gpt-4o-mini-tts``), LocalAI, Kokoro-FastAPI and LiteLLM answer
it. It is reached like transcription (models/_transcribe.py): with the ``[llm]`` endpoint and
key, on the chat provider's own client; the model is ``[media] speech_model``, the voice
``[media] speech_voice``. The audio is asked for as Opus in an Ogg container, which Telegram
plays as a voice note and Discord as an audio file. Each request is charged by its characters.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from engine.models._openai_shapes import sdk_status_error
from engine.models._pricing import Amount, spend
from tools.errors import LLMError, ModelUnavailable

if TYPE_CHECKING:
    import openai

OGG_OPUS = "audio/ogg"


class Speaker(Protocol):
    """Speaks text; raises tools.LLMError when the endpoint fails."""

    model: str

    async def speak(self, text: str) -> bytes:
        """`text` as Ogg/Opus audio."""
        ...


class OpenAISpeaker:
    """Speech on an SDK client made by `client` (the chat provider's)."""

    def __init__(self, client: Callable[[], openai.AsyncOpenAI], model: str, voice: str) -> None:
        self.model = model
        self.voice = voice
        self._client = client

    async def speak(self, text: str) -> bytes:
        openai = await asyncio.to_thread(importlib.import_module, "openai")
        try:
            reply = await self._client().audio.speech.create(
                model=self.model, voice=self.voice, input=text, response_format="opus"
            )
        except openai.APIStatusError as exc:
            raise sdk_status_error(exc) from exc
        except openai.APIConnectionError as exc:  # a timeout is one
            raise ModelUnavailable(f"the speech endpoint is unreachable ({exc})") from exc
        except openai.OpenAIError as exc:
            raise LLMError(f"the speech request failed: {exc}") from exc
        audio = reply.content
        await spend(self.model, Amount(chars=len(text)))
        if not audio.startswith(b"OggS"):
            raise LLMError("the speech endpoint answered with something other than Ogg/Opus audio")
        return audio
