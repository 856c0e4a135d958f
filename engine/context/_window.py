"""How many tokens the model accepts: the config, else the server, else a table, else 32,000.

OpenAI-compatible servers do not agree on where they say it: vLLM puts ``max_model_len`` in
``/v1/models``, llama.cpp's server ``n_ctx`` in ``/props``, Ollama the model's own length (and
any ``num_ctx`` set for it) in ``/api/show``. Each place is asked once, briefly (a server that
does not have it answers 404 at once); a hosted API says nothing, and a small table of
well-known model names fills in. The answer carries where it came from, so ``doctor`` and the
log can say which window is used and why.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import re
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    import aiohttp

log = logging.getLogger(__name__)

DEFAULT_WINDOW = 32_000
OLLAMA_DEFAULT_CTX = 4_096  # what Ollama runs a model with unless num_ctx says otherwise
_TIMEOUT_S = 3.0


class WindowSource(enum.StrEnum):
    CONFIG = "config"
    SERVER = "server"
    TABLE = "table"
    DEFAULT = "default"


@dataclass(frozen=True, slots=True)
class WindowInfo:
    tokens: int
    source: WindowSource
    why: str  # in words, for doctor and the log
    reached: bool = True  # False: the server did not answer, so it may yet say (asked again)


# Well-known model families, matched against the lower-cased name without its organisation
# (e.g. "meta-llama/Llama-3.1-8B-Instruct" -> "llama-3.1-8b-instruct"); first match wins.
_TABLE: tuple[tuple[str, int], ...] = (
    (r"gpt-4\.1", 1_047_576),
    (r"gpt-5", 400_000),
    (r"gpt-4o|gpt-4-turbo|o1|o3|o4", 128_000),
    (r"gpt-4", 8_192),
    (r"gpt-3\.5", 16_385),
    (r"claude", 200_000),
    (r"gemini", 1_048_576),
    (r"llama-?3\.[123]", 131_072),
    (r"llama-?3", 8_192),
    (r"qwen-?3", 40_960),
    (r"qwen-?2\.5", 32_768),
    (r"mistral-(small|large|medium)|mistral-nemo", 131_072),
    (r"mistral|mixtral", 32_768),
    (r"gemma-?3", 131_072),
    (r"gemma", 8_192),
    (r"deepseek", 65_536),
    (r"phi-?4", 16_384),
)


def known_window(model: str) -> int | None:
    name = model.lower().rsplit("/", 1)[-1]
    for pattern, tokens in _TABLE:
        if re.search(pattern, name):
            return tokens
    return None


async def discover_window(
    base_url: str,
    api_key: str,
    model: str,
    configured: int | None = None,
    *,
    probe: bool = True,
) -> WindowInfo:
    """The window to plan with, and why. Never raises: an unreachable server means no answer.
    `probe` False: an API that is not OpenAI-compatible, where only the table can tell."""
    if configured is not None:
        return WindowInfo(configured, WindowSource.CONFIG, "set in [llm] context_window")
    found: WindowInfo | None = None
    reached = not probe
    if probe:
        try:
            # aiohttp, as the SDKs here use: an httpx client would load a stack of its own.
            # Imported here: the commands that only read the store (status ...) never probe.
            import aiohttp

            headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
            timeout = aiohttp.ClientTimeout(total=_TIMEOUT_S)
            async with aiohttp.ClientSession(timeout=timeout, headers=headers) as client:
                found, reached = await _ask_server(client, base_url, model)
        except Exception as exc:  # a probe must never stop a turn
            log.debug("context window probe failed: %s", exc)
    if found is not None:
        return found
    down = "" if reached else "the server did not answer (asked again once it does); "
    tokens = known_window(model)
    if tokens is not None:
        why = f"{down or 'the server does not say; '}{model} is known to take it"
        return WindowInfo(tokens, WindowSource.TABLE, why, reached)
    return WindowInfo(
        DEFAULT_WINDOW,
        WindowSource.DEFAULT,
        f"{down}neither the server nor relaybot's table knows {model}; set [llm] context_window",
        reached,
    )


async def _ask_server(
    client: aiohttp.ClientSession, base_url: str, model: str
) -> tuple[WindowInfo | None, bool]:
    """The window the server states, and whether it answered at all."""
    base = base_url.rstrip("/")
    root = _root(base)
    answers = await asyncio.gather(
        _json(client.get(f"{base}/models")),
        _json(client.get(f"{root}/props")),
        _json(client.post(f"{root}/api/show", json={"model": model})),
    )
    reached = any(answer is not _NO_ANSWER for answer in answers)
    vllm, llama, ollama = (a if isinstance(a, dict) else None for a in answers)
    return _stated(vllm, llama, ollama, model), reached


def _stated(
    vllm: dict[str, Any] | None,
    llama: dict[str, Any] | None,
    ollama: dict[str, Any] | None,
    model: str,
) -> WindowInfo | None:
    for entry in (vllm or {}).get("data") or ():
        if isinstance(entry, dict) and entry.get("id") == model:
            if isinstance(entry.get("max_model_len"), int):
                why = "the server reports max_model_len in /v1/models (vLLM)"
                return WindowInfo(entry["max_model_len"], WindowSource.SERVER, why)
    settings = (llama or {}).get("default_generation_settings") or {}
    n_ctx = settings.get("n_ctx", (llama or {}).get("n_ctx"))
    if isinstance(n_ctx, int) and n_ctx > 0:
        why = "the server reports n_ctx in /props (llama.cpp)"
        return WindowInfo(n_ctx, WindowSource.SERVER, why)
    if ollama:
        return _ollama(ollama)
    return None


def _ollama(show: dict[str, Any]) -> WindowInfo | None:
    params = show.get("parameters") or ""
    m = re.search(r"^\s*num_ctx\s+(\d+)", params, re.M) if isinstance(params, str) else None
    if m:
        why = "the model's num_ctx in Ollama's /api/show"
        return WindowInfo(int(m[1]), WindowSource.SERVER, why)
    info = show.get("model_info") or {}
    trained = next(
        (v for k, v in info.items() if k.endswith(".context_length") and isinstance(v, int)), None
    )
    if trained is None:
        return None
    tokens = min(trained, OLLAMA_DEFAULT_CTX)
    why = (
        f"Ollama runs models with {OLLAMA_DEFAULT_CTX:,} tokens unless num_ctx or "
        f"OLLAMA_CONTEXT_LENGTH says more (this model takes up to {trained:,}); if you raised "
        "it, set [llm] context_window"
    )
    return WindowInfo(tokens, WindowSource.SERVER, why)


_NO_ANSWER = object()  # no HTTP answer at all (refused, timed out): the server may be down


async def _json(request: Awaitable[aiohttp.ClientResponse]) -> dict[str, Any] | object | None:
    """The JSON object answered; None for any other answer; _NO_ANSWER without one."""
    import aiohttp  # loaded already: the session that made `request` is aiohttp's

    try:
        async with await request as resp:
            if resp.status != 200:
                return None
            data = await resp.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError):
        return _NO_ANSWER
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _root(base: str) -> str:
    """The server's root: the base URL without its trailing /v1."""
    parts = urlsplit(base)
    path = re.sub(r"/v1$", "", parts.path)
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))
