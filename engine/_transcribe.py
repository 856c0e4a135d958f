"""Voice to text: the OpenAI-compatible ``/audio/transcriptions`` endpoint, through the SDK.

OpenAI (``whisper-1``, ``gpt-4o-mini-transcribe``), a vLLM or LocalAI server with a Whisper
model, and LiteLLM all answer it. It is reached with the ``[llm]`` endpoint and key; the model is
``[media] transcription_model``. The SDK is imported in a worker thread on first use, as the
chat provider does (engine/_openai.py), so the event loop never waits for it.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import TYPE_CHECKING, Any, Protocol

from engine._openai import _status_error
from tools import LLMError, ModelUnavailable

if TYPE_CHECKING:
    import openai


class Transcriber(Protocol):
    """Turns a voice note into text; raises tools.LLMError when the endpoint fails."""

    model: str

    async def transcribe(self, name: str, data: bytes, mime_type: str) -> str: ...


class OpenAITranscriber:
    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str,
        model: str,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        http_client: Any = None,
    ) -> None:
        self.model = model
        self._settings = {
            "base_url": base_url,
            "api_key": api_key or "not-needed",
            "timeout": timeout_s,
            "max_retries": max_retries,
            "http_client": http_client,
        }
        self._sdk: openai.AsyncOpenAI | None = None

    async def transcribe(self, name: str, data: bytes, mime_type: str) -> str:
        openai = await asyncio.to_thread(importlib.import_module, "openai")
        if self._sdk is None:
            self._sdk = openai.AsyncOpenAI(**self._settings)
        try:
            result = await self._sdk.audio.transcriptions.create(
                model=self.model,
                file=(name, data, mime_type or "application/octet-stream"),
                response_format="json",
            )
        except openai.APIStatusError as exc:
            raise _status_error(exc) from exc
        except openai.APIConnectionError as exc:  # a timeout is one
            raise ModelUnavailable(f"the transcription endpoint is unreachable ({exc})") from exc
        except openai.OpenAIError as exc:
            raise LLMError(f"the transcription request failed: {exc}") from exc
        return str(getattr(result, "text", result))

    async def aclose(self) -> None:
        if self._sdk is not None:
            await self._sdk.close()
