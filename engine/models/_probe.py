"""The model server asked what it serves: its model list, whether `base_url` lacks `/v1`, and
whether a key and a model pass one tiny request.

`relaybot init` asks these while the user answers, `relaybot doctor` and a chat ask
:func:`explain_404` when a chat request met 404: a server answers 404 both for a path it does not
serve (``http://localhost:11434`` without ``/v1``) and for a model it does not know, and the two
need different fixes. Plain aiohttp requests, not the SDKs: a probe is a single GET or a 1-token
POST with a short time limit, and its status is the answer (401: the key, 404: the path or the
model, no answer: the server).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import aiohttp

from tools.errors import ModelRefused

PROBE_TIMEOUT_S = 10.0
_ANTHROPIC_VERSION = "2023-06-01"


@dataclass(frozen=True, slots=True)
class Probe:
    """What one request got: its HTTP status (None: no answer, `error` says why), the models
    listed (for a list), the server's own words (for a refusal), and whether the answer is
    shaped as Anthropic's API shapes it (a list with ``has_more``, an error with ``"type":
    "error"``): its base_url is the host, without /v1."""

    status: int | None
    models: tuple[str, ...] = ()
    error: str = ""
    anthropic: bool = False

    @property
    def answered(self) -> bool:
        """The API is there: it listed, or wants a key first."""
        return self.status in (200, 401, 403)


def _headers(provider: str, key: str) -> dict[str, str]:
    if provider == "anthropic":
        return {"x-api-key": key, "anthropic-version": _ANTHROPIC_VERSION}
    return {"Authorization": f"Bearer {key}"} if key else {}


def _api(base_url: str, provider: str) -> str:
    """Where the API's paths start: Anthropic's base_url is the host, OpenAI's includes /v1."""
    base = base_url.rstrip("/")
    return f"{base}/v1" if provider == "anthropic" else base


async def _request(
    method: str, url: str, headers: dict[str, str], body: dict[str, Any] | None = None
) -> tuple[int | None, Any, str]:
    """(status, JSON or None, text); status None with the cause as text when nothing answered."""
    timeout = aiohttp.ClientTimeout(total=PROBE_TIMEOUT_S)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout, trust_env=True) as session,
            session.request(method, url, headers=headers, json=body) as resp,
        ):
            raw = await resp.text(errors="replace")
            status = resp.status
    except TimeoutError:
        return None, None, f"no answer within {PROBE_TIMEOUT_S:g} s"
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        return None, None, str(exc) or type(exc).__name__
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    return status, data, raw


def _words(data: Any, text: str) -> str:
    """The API's own message (``{"error": {"message": ...}}`` in both APIs), else the text."""
    inner = data.get("error", data) if isinstance(data, dict) else None
    if isinstance(inner, dict) and inner.get("message"):
        return str(inner["message"])[:200]
    if isinstance(inner, str):
        return inner[:200]
    return " ".join(text.split())[:200]


async def list_models(base_url: str, key: str, provider: str = "openai") -> Probe:
    """GET the model list (``/models`` under the API's path)."""
    url = f"{_api(base_url, provider)}/models"
    status, data, text = await _request("GET", url, _headers(provider, key))
    theirs = isinstance(data, dict) and (data.get("type") == "error" or "has_more" in data)
    if status != 200:
        return Probe(status, error=text if status is None else _words(data, text), anthropic=theirs)
    entries = data.get("data") if isinstance(data, dict) else None
    ids = [str(e["id"]) for e in entries or () if isinstance(e, dict) and e.get("id")]
    return Probe(200, tuple(ids), anthropic=theirs)


async def with_v1(base_url: str, key: str, provider: str = "openai") -> str | None:
    """`base_url` with ``/v1`` added, when the API answers there (an OpenAI-compatible server
    serves its paths under /v1); None when it already ends so, or nothing answers there."""
    base = base_url.rstrip("/")
    if provider != "openai" or base.endswith("/v1"):
        return None
    return f"{base}/v1" if (await list_models(f"{base}/v1", key)).answered else None


async def ping(base_url: str, key: str, model: str, provider: str = "openai") -> Probe:
    """One chat request for a single token: 200 when the key and the model work."""
    message = [{"role": "user", "content": "Hi"}]
    if provider == "anthropic":
        url = f"{_api(base_url, provider)}/messages"
        body: dict[str, Any] = {"model": model, "max_tokens": 1, "messages": message}
    else:
        url = f"{_api(base_url, provider)}/chat/completions"
        cap = "max_completion_tokens" if "api.openai.com" in base_url else "max_tokens"
        body = {"model": model, cap: 1, "messages": message}
    status, data, text = await _request("POST", url, _headers(provider, key), body)
    return Probe(status, error="" if status == 200 else _words(data, text) if status else text)


async def explain_404(
    exc: ModelRefused, base_url: str, key: str, model: str, provider: str = "openai"
) -> ModelRefused:
    """A chat request's 404 told apart: kind "path" when `base_url` lacks /v1, "model" with a
    few of the models the server offers when it does not list `model`; else `exc` as it was."""
    fixed = await with_v1(base_url, key, provider)
    if fixed is not None:
        return ModelRefused(
            f"base_url is missing /v1: {base_url} answers 404, {fixed} is the API", "path"
        )
    listing = await list_models(base_url, key, provider)
    if listing.models and model not in listing.models:
        offered = ", ".join(sorted(listing.models)[:8])
        return ModelRefused(f"{exc}; the server offers: {offered}", "model")
    return exc
