"""Voice to text: the OpenAI-compatible ``/audio/transcriptions`` endpoint, through the SDK.

OpenAI (``whisper-1``, ``gpt-4o-mini-transcribe``), a vLLM or LocalAI server with a Whisper
model, and LiteLLM all answer it. It is reached with the ``[llm]`` endpoint and key, on the chat
provider's own client (models/_openai.py); the model is ``[media] transcription_model``. The SDK
is imported in a worker thread if the provider has not done so yet, so the loop never waits.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from engine.models._openai_shapes import sdk_status_error
from engine.models._pricing import Amount, spend
from engine.models._types import Usage
from tools.errors import LLMError, ModelUnavailable

if TYPE_CHECKING:
    import openai


class Transcriber(Protocol):
    """Turns a voice note into text; raises tools.LLMError when the endpoint fails."""

    model: str

    async def transcribe(
        self, name: str, data: bytes, mime_type: str, seconds: float | None = None
    ) -> str:
        """The words of the audio `data` (`seconds` long, as the platform says: its price)."""
        ...


class OpenAITranscriber:
    """Transcription on an SDK client made by `client` (the chat provider's, so the endpoint,
    key, timeout, retries and connection pool are the same)."""

    def __init__(self, client: Callable[[], openai.AsyncOpenAI], model: str) -> None:
        self.model = model
        self._client = client

    async def transcribe(
        self, name: str, data: bytes, mime_type: str, seconds: float | None = None
    ) -> str:
        openai = await asyncio.to_thread(importlib.import_module, "openai")
        try:
            result = await self._client().audio.transcriptions.create(
                model=self.model,
                file=(name, data, mime_type or "application/octet-stream"),
                response_format="json",
            )
        except openai.APIStatusError as exc:
            raise sdk_status_error(exc) from exc
        except openai.APIConnectionError as exc:  # a timeout is one
            raise ModelUnavailable(f"the transcription endpoint is unreachable ({exc})") from exc
        except openai.OpenAIError as exc:
            raise LLMError(f"the transcription request failed: {exc}") from exc
        await spend(self.model, _amount(getattr(result, "usage", None), seconds))
        return str(getattr(result, "text", result))


def _amount(usage: object, seconds: float | None) -> Amount:
    """What a transcription used: the seconds the server counted (else the platform's), or
    its tokens when the server counts those (gpt-4o-transcribe)."""
    counted = getattr(usage, "seconds", None)
    tokens = Usage(
        int(getattr(usage, "input_tokens", 0) or 0), int(getattr(usage, "output_tokens", 0) or 0)
    )
    heard = float(counted) if isinstance(counted, int | float) else float(seconds or 0)
    return Amount(tokens, seconds=heard)
