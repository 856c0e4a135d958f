"""The model layer: what the loop sends a model and gets back, and the providers that speak it.

``_types`` is the provider-neutral contract (messages, requests, responses); ``_openai`` (Chat
Completions), ``_responses`` (OpenAI's Responses API) and ``_anthropic`` map it to each SDK (the
SDKs imported only when a model of theirs is built; ``_anthropic`` itself, ``_scripted``, and
``_openai`` and ``_probe`` with the aiohttp they load, on first use of their names), ``_probe``
asks an endpoint what it serves, ``_failover`` makes one model of several, ``_scripted`` answers
in-process for tests, ``_transcribe`` turns voice into text through the same endpoint
(``_speech`` text into voice, ``_images`` words into pictures), ``_pricing`` says what each
request costs and whom it is charged to.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from engine.models._failover import FailoverModel
from engine.models._images import OpenAIPainter
from engine.models._pricing import (
    BUILTIN_PRICES,
    CHARGE,
    NANO,
    Amount,
    Charge,
    Price,
    Prices,
    dollars,
    spend,
)
from engine.models._provenance import TRUSTED, Provenance, Trust, member, untrusted
from engine.models._responses import ResponsesModel
from engine.models._speech import OGG_OPUS, OpenAISpeaker, Speaker
from engine.models._transcribe import OpenAITranscriber, Transcriber
from engine.models._types import (
    FinishReason,
    Image,
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    OnText,
    Part,
    Reasoning,
    Role,
    Text,
    ToolCall,
    ToolOutput,
    ToolSpec,
    Usage,
    sanitised,
)

if TYPE_CHECKING:
    from engine.models._anthropic import DEFAULT_MAX_TOKENS, AnthropicModel
    from engine.models._openai import OpenAIModel
    from engine.models._probe import Probe, explain_404, list_models, ping, with_v1
    from engine.models._scripted import ScriptedModel, reply

_LATER = {  # imported on first use: a daemon on an OpenAI-compatible endpoint never uses some,
    # and the others load aiohttp (~0.1 s of CPU), which commands that only read the types, the
    # config or the store (check-config, status, users ...) never need
    "AnthropicModel": "_anthropic",
    "DEFAULT_MAX_TOKENS": "_anthropic",
    "OpenAIModel": "_openai",
    "Probe": "_probe",
    "ScriptedModel": "_scripted",
    "explain_404": "_probe",
    "list_models": "_probe",
    "ping": "_probe",
    "reply": "_scripted",
    "with_v1": "_probe",
}


def __getattr__(name: str) -> Any:
    if name not in _LATER:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_LATER[name]}"), name)


__all__ = [
    "BUILTIN_PRICES",
    "CHARGE",
    "DEFAULT_MAX_TOKENS",
    "NANO",
    "OGG_OPUS",
    "TRUSTED",
    "Amount",
    "AnthropicModel",
    "Charge",
    "FailoverModel",
    "FinishReason",
    "Image",
    "Message",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "OnText",
    "OpenAIModel",
    "OpenAIPainter",
    "OpenAISpeaker",
    "OpenAITranscriber",
    "Part",
    "Price",
    "Prices",
    "Probe",
    "Provenance",
    "Reasoning",
    "ResponsesModel",
    "Role",
    "ScriptedModel",
    "Speaker",
    "Text",
    "ToolCall",
    "ToolOutput",
    "ToolSpec",
    "Transcriber",
    "Trust",
    "Usage",
    "dollars",
    "explain_404",
    "list_models",
    "member",
    "ping",
    "reply",
    "sanitised",
    "spend",
    "untrusted",
    "with_v1",
]
