"""Pictures from words: the OpenAI-compatible ``/images/generations`` endpoint, through the SDK.

OpenAI (``dall-e-3``, ``gpt-image-1``), LocalAI and LiteLLM answer it. It is reached like
transcription (models/_transcribe.py), with the ``[llm]`` endpoint and key; the model is
``[media] image_model``. The picture comes back in the JSON body (base64), never from a URL this
process would have to fetch. Each picture made is charged.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engine.models._openai_shapes import sdk_status_error
from engine.models._pricing import Amount, spend
from tools.errors import LLMError, ModelUnavailable

if TYPE_CHECKING:
    import openai


class OpenAIPainter:
    """Picture generation on an SDK client made by `client` (the chat provider's)."""

    def __init__(self, client: Callable[[], openai.AsyncOpenAI], model: str) -> None:
        self.model = model
        self._client = client

    async def paint(self, prompt: str, size: str) -> bytes:
        """One picture of `prompt` at `size` ("1024x1024"); raises tools.LLMError."""
        openai = await asyncio.to_thread(importlib.import_module, "openai")
        options: dict[str, Any] = {}
        if not self.model.startswith("gpt-image"):  # those always answer in base64
            options["response_format"] = "b64_json"
        try:
            reply = await self._client().images.generate(
                model=self.model, prompt=prompt, size=size, n=1, **options
            )
        except openai.APIStatusError as exc:
            raise sdk_status_error(exc) from exc
        except openai.APIConnectionError as exc:
            raise ModelUnavailable(f"the image endpoint is unreachable ({exc})") from exc
        except openai.OpenAIError as exc:
            raise LLMError(f"the image request failed: {exc}") from exc
        await spend(self.model, Amount(images=1))
        encoded = reply.data[0].b64_json if reply.data else None
        if not encoded:
            raise LLMError("the image endpoint sent no picture (base64) in its answer")
        try:
            return base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise LLMError("the image endpoint sent a picture that is not valid base64") from exc
