"""`relaybot doctor`'s model checks: each configured model answers a tiny request with a tool,
and the context window relaybot plans with.

A model is asked in two steps, each with its own time limit: the model list (a quick answer
proves the server is up and knows the model), then one real request with a tool, through the
same provider class the daemon uses (so it is shaped, and its failures named, as the daemon's
are) and capped at a few tokens, since a small local model asked without a cap may ramble until
its window is full. Each kind of failure gets its own words: down (no connection), slow (the
list came back but the test request did not, in time), the key rejected, the model unknown, the
request refused (tools, chat template, options), a server error.
"""

from __future__ import annotations

import asyncio
import importlib
import time
from typing import Any

from bot._doctor_base import Check, Status
from bot._models import endpoint_model
from bot.config import Config, ModelEndpoint
from engine.context import ContextSettings, budget_for, discover_window
from engine.models import Message, ModelRequest, ToolSpec, with_v1
from tools.errors import (
    ContextOverflow,
    LLMError,
    ModelAuthError,
    ModelRateLimited,
    ModelRefused,
    ModelServerError,
    ModelTimedOut,
    ModelUnreachable,
    RelaybotError,
)

LIST_TIMEOUT_S = 10.0  # the model list: any live server answers it at once
PING_TIMEOUT_S = 30.0  # the test request: a few tokens, even on a CPU
PING_TOKENS = 48  # enough for a call of the ping tool, too few to ramble
SLOW_S = 10.0  # a test request slower than this keeps users waiting: warned about

# The tiny request: one tool the model is asked to call.
PING_TOOL = ToolSpec(
    "ping", "Answer relaybot's health check.", {"type": "object", "properties": {}}
)
PING_ASK = "Health check: call the ping tool, nothing else."


async def check_models(config: Config) -> list[Check]:
    """One check per configured model: [llm] and each [[llm.fallback]] entry."""
    return list(await asyncio.gather(*(check_llm(w, e) for w, e in config.llm.endpoints())))


async def check_llm(where: str, cfg: ModelEndpoint) -> Check:
    section = _section(where)
    try:
        key = cfg.resolve_api_key(where)
    except RelaybotError as exc:
        return Check(
            where, Status.FAILED, str(exc), f"export the variable, or set {section} api_key"
        )
    started = time.monotonic()
    listed = await _list_models(where, cfg, key)
    if listed is not None:
        return listed
    list_s = time.monotonic() - started
    test = cfg.model_copy(update={"request_timeout_s": PING_TIMEOUT_S, "max_retries": 0})
    model = endpoint_model(test, where, strict_tools=False)
    request = ModelRequest("", [Message.user(PING_ASK)], [PING_TOOL], max_output_tokens=PING_TOKENS)
    started = time.monotonic()
    try:
        reply = await model.complete(request)
    except LLMError as exc:
        return _failed(where, cfg, exc, list_s)
    finally:
        await model.aclose()
    seconds = time.monotonic() - started
    url = cfg.base_url
    if seconds > SLOW_S:
        return Check(
            where,
            Status.WARNING,
            f"slow: {url} took {seconds:.1f} s for a test answer of at most {PING_TOKENS} tokens",
            _slow_fix(section, cfg),
        )
    if not reply.tool_calls:
        return Check(
            where,
            Status.WARNING,
            f"model {cfg.model} answered but did not call the test tool",
            "tools may be ignored: a model trained for tool calling works better",
        )
    return Check(where, Status.OK, f"{url} answers; model {cfg.model} calls tools")


async def _list_models(where: str, cfg: ModelEndpoint, key: str) -> Check | None:
    """The model list, asked briefly: None when the server answered and knows the model."""
    section = _section(where)
    url = cfg.base_url
    sdk: Any = importlib.import_module(cfg.provider)  # the SDKs share their error classes' names
    maker = sdk.AsyncAnthropic if cfg.provider == "anthropic" else sdk.AsyncOpenAI
    client = maker(base_url=url, api_key=key or "not-needed", timeout=LIST_TIMEOUT_S, max_retries=0)
    try:
        ids = [m.id async for m in client.models.list()]
    except sdk.AuthenticationError:
        return _key_rejected(where, url)
    except sdk.APIStatusError as exc:
        if exc.status_code == 404:  # no list here: under /v1, or a server without a list
            fixed = await with_v1(url, key, cfg.provider)
            if fixed is None:  # the test request tells
                return None
            return Check(
                where,
                Status.FAILED,
                f"base_url is missing /v1: {url} answers 404, {fixed} is the API",
                f'set {section} base_url = "{fixed}"',
            )
        return Check(
            where,
            Status.FAILED,
            f"{url} answered {exc.status_code} to the model list: {_message(exc)}",
            f"check {section} base_url (for openai it usually ends in /v1)",
        )
    except sdk.APIConnectionError as exc:
        timed_out = isinstance(exc, sdk.APITimeoutError) and _timed_out(exc)
        if timed_out:
            return Check(
                where,
                Status.FAILED,
                f"{url} took the connection but did not list its models within "
                f"{LIST_TIMEOUT_S:g} s",
                "the server is stuck or overloaded: look at its log, or restart it",
            )
        return Check(
            where,
            Status.FAILED,
            f"cannot reach {url}: {_cause(exc)}",
            f"is the server running? check {section} base_url",
        )
    finally:
        await client.close()
    if ids and cfg.model not in ids:
        shown = ", ".join(sorted(ids)[:10])
        return Check(
            where,
            Status.FAILED,
            f"model {cfg.model!r} not offered at {url}",
            f"set {section} model to one of: {shown}",
        )
    return None


def _failed(where: str, cfg: ModelEndpoint, exc: LLMError, list_s: float) -> Check:
    """The test request failed: in words for its kind."""
    section = _section(where)
    url = cfg.base_url
    if isinstance(exc, ModelAuthError):
        return _key_rejected(where, url)
    if isinstance(exc, ModelTimedOut):
        return Check(
            where,
            Status.WARNING,
            f"slow, not down: {url} listed its models in {list_s:.1f} s but did not answer a "
            f"test request of at most {PING_TOKENS} tokens within {PING_TIMEOUT_S:g} s",
            _slow_fix(section, cfg),
        )
    if isinstance(exc, ModelUnreachable):
        return Check(
            where,
            Status.FAILED,
            f"cannot reach {url}: {exc}",
            f"is the server running? check {section} base_url",
        )
    if isinstance(exc, ModelServerError):
        return Check(
            where,
            Status.FAILED,
            f"{url} failed on a test request (server error): {exc}",
            "look at the server's log; a server error is usually passing: retry later",
        )
    if isinstance(exc, ModelRateLimited):
        return Check(where, Status.WARNING, f"{url} is rate limiting: {exc}", "retry later")
    if isinstance(exc, ContextOverflow):
        return Check(
            where,
            Status.FAILED,
            f"even a tiny request does not fit model {cfg.model}'s window: {exc}",
            "give the server a larger context (llama.cpp -c, Ollama num_ctx, vLLM --max-model-len)",
        )
    if isinstance(exc, ModelRefused):
        return _refused(where, cfg, exc)
    return Check(where, Status.FAILED, f"the test request failed: {exc}", "retry later")


def _refused(where: str, cfg: ModelEndpoint, exc: ModelRefused) -> Check:
    section = _section(where)
    message = str(exc)
    if exc.kind == "path":  # engine/models/_probe.py: the API answers under /v1
        return Check(where, Status.FAILED, message, f"add /v1 to {section} base_url")
    if exc.kind == "model":
        return Check(
            where,
            Status.FAILED,
            f"{cfg.base_url} does not know model {cfg.model}: {message}",
            f"set {section} model to a model the server offers"
            + ("" if "it offers:" in message else f" (its list: {cfg.base_url}/models)"),
        )
    if exc.kind == "template":
        return Check(
            where,
            Status.FAILED,
            f"model {cfg.model}'s chat template refused a plain request: {message}",
            "llama.cpp: start llama-server with --jinja, or give it a working --chat-template",
        )
    if "tool" in message.lower() or "function" in message.lower():
        return Check(
            where,
            Status.FAILED,
            f"model {cfg.model} refused a request with a tool: {message}",
            "choose a model with tool (function) calling; a vLLM server needs "
            "--enable-auto-tool-choice and --tool-call-parser, llama.cpp --jinja",
        )
    return Check(
        where,
        Status.FAILED,
        f"a chat request was refused: {message}",
        f"check {section} model, temperature, max_tokens and options",
    )


def _key_rejected(where: str, url: str) -> Check:
    section = _section(where)
    return Check(
        where,
        Status.FAILED,
        f"{url} rejected the API key",
        f"check the key: the variable {section} api_key_env names, or {section} api_key",
    )


def _slow_fix(section: str, cfg: ModelEndpoint) -> str:
    return (
        "users will wait as long for each answer: a smaller or quantised model, a GPU, or a "
        f"less busy server helps; or raise {section} request_timeout_s (now "
        f"{cfg.request_timeout_s:g} s) and cap answers with max_tokens"
    )


async def check_context(config: Config) -> Check:
    """Which context window relaybot plans with, where it comes from, and the budget it gives."""
    cfg = config.llm
    probe = cfg.provider == "openai"
    try:
        key = cfg.resolve_api_key() if probe else ""
    except RelaybotError:
        key = ""  # the llm check reports it
    info = await discover_window(cfg.base_url, key, cfg.model, cfg.context_window, probe=probe)
    settings = ContextSettings(max_output_tokens=cfg.output_reserve(), budget=config.context.budget)
    detail = (
        f"window {info.tokens:,} tokens for {cfg.model} ({info.why}); each request may use "
        f"{budget_for(info.tokens, settings):,} prompt tokens"
    )
    return Check("context", Status.OK, detail)  # a wrong guess is learned from the first refusal


def _section(where: str) -> str:
    """How a fix names the model's section: [llm], or the n-th [[llm.fallback]]."""
    if where == "llm":
        return "[llm]"
    return f"[[llm.fallback]] number {int(where.rsplit('.', 1)[1]) + 1}"


def _timed_out(exc: BaseException) -> bool:
    """A timeout with a connection made: the SDKs' aiohttp client reports a refused connection
    as a connect timeout, so the causes are read."""
    current: BaseException | None = exc
    while current is not None:
        name = type(current).__name__
        if isinstance(current, ConnectionRefusedError) or "Connect" in name.removeprefix("API"):
            return False
        current = current.__cause__ or current.__context__
    return True


def _cause(exc: BaseException) -> str:
    """The innermost cause's words (the SDKs' own say only "Connection error.")."""
    current = exc
    while (inner := current.__cause__ or current.__context__) is not None:
        current = inner
    return str(current) or type(current).__name__


def _message(exc: Any) -> str:
    """The API's own message (both providers nest it as ``{"error": {"message": ...}}``)."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:300]
    return str(exc.message)[:300]
