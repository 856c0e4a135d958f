"""`relaybot doctor`: check what a running daemon depends on, and say how to fix each failure.

Each check ends OK, WARNING (it starts, but will not work as you probably mean) or FAILED.
The config is judged by the same `validate` as `run` and `check-config`; the LLM check makes
one tiny real request with a tool, because listing models proves neither the key nor that the
model accepts tools.
"""

from __future__ import annotations

import asyncio
import enum
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx
import openai

from bot._checks import tool_problems, validate
from bot._lock import holder
from bot.config import Config
from engine import SqliteStore
from tools import ConfigError, RelaybotError
from tools.builtins._search import SearchFailed, WebSearch


class Status(enum.StrEnum):
    OK = "OK"
    WARNING = "WARNING"
    FAILED = "FAILED"


@dataclass(slots=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""


def _config(config: Config) -> list[Check]:
    try:
        warnings = validate(config, resolve_secrets=False)  # the llm and channel checks do those
    except ConfigError as exc:
        return [Check("config", Status.FAILED, str(exc))]  # the message says what to change
    return [
        Check("config", Status.OK, "valid"),
        *(Check("config", Status.WARNING, w) for w in warnings),
    ]


def _plugins(config: Config) -> list[Check]:
    try:
        report = tool_problems(config)  # imports the plugins: run in a thread
    except ConfigError:
        return []  # already reported by the config check
    checks = [Check("plugins", Status.FAILED, problem) for problem in report.problems]
    checks += [Check("tools", Status.WARNING, w) for w in report.unknown]
    if report.plugin_tools and not report.problems:
        names = ", ".join(report.plugin_tools)
        checks.insert(0, Check("plugins", Status.OK, f"loaded {names}"))
    return checks


async def _check_store(config: Config) -> Check:
    path = config.storage.resolved_path()
    try:
        async with SqliteStore(path) as store:
            async with store.transaction():  # proves we can take the write lock
                version = await store.schema_version()
    except RelaybotError as exc:
        return Check(
            "store", Status.FAILED, str(exc), f"make {path.parent} writable, or set [storage] path"
        )
    pid = holder(path)
    running = f"; in use by relaybot pid {pid}" if pid is not None else ""
    return Check("store", Status.OK, f"{path} (schema v{version}, writable{running})")


# The tiny request: one tool the model is asked to call.
_PING = {
    "type": "function",
    "function": {
        "name": "ping",
        "description": "Answer relaybot's health check.",
        "parameters": {"type": "object", "properties": {}},
    },
}
_PING_ASK = [{"role": "user", "content": "Health check: call the ping tool, nothing else."}]


async def _check_llm(config: Config) -> Check:
    cfg = config.llm
    try:
        key = cfg.resolve_api_key()
    except RelaybotError as exc:
        return Check("llm", Status.FAILED, str(exc), "export the variable, or set [llm] api_key")
    client = openai.AsyncOpenAI(
        base_url=cfg.base_url, api_key=key or "not-needed", timeout=30, max_retries=0
    )
    where = cfg.base_url
    try:
        ids = [m.id async for m in client.models.list()]
        if ids and cfg.model not in ids:
            shown = ", ".join(sorted(ids)[:10])
            return Check(
                "llm",
                Status.FAILED,
                f"model {cfg.model!r} not offered at {where}",
                f"set [llm] model to one of: {shown}",
            )
        reply = await client.chat.completions.create(
            model=cfg.model, messages=_PING_ASK, tools=[_PING], **cfg.request_options()
        )
    except openai.AuthenticationError:
        return Check(
            "llm",
            Status.FAILED,
            f"{where} rejected the API key",
            "check the key: the variable [llm] api_key_env names, or [llm] api_key",
        )
    except openai.BadRequestError as exc:
        message = _message(exc)
        if "tool" in message.lower() or "function" in message.lower():
            return Check(
                "llm",
                Status.FAILED,
                f"model {cfg.model} refused a request with a tool: {message}",
                "choose a model with tool (function) calling; a vLLM server needs "
                "--enable-auto-tool-choice and --tool-call-parser",
            )
        return Check(
            "llm",
            Status.FAILED,
            f"a chat request was refused: {message}",
            "check [llm] model, temperature, max_tokens and options",
        )
    except openai.APIStatusError as exc:
        return Check(
            "llm",
            Status.FAILED,
            f"{where} answered {exc.status_code}: {_message(exc)}",
            "check [llm] base_url (it usually ends in /v1) and model",
        )
    except openai.APIConnectionError as exc:
        return Check(
            "llm",
            Status.FAILED,
            f"cannot reach {where}: {exc.__cause__ or exc}",
            "is the server running? check [llm] base_url",
        )
    finally:
        await client.close()
    called = bool(reply.choices and reply.choices[0].message.tool_calls)
    if not called:
        return Check(
            "llm",
            Status.WARNING,
            f"model {cfg.model} answered but did not call the test tool",
            "tools may be ignored: a model trained for tool calling works better",
        )
    return Check("llm", Status.OK, f"{where} answers; model {cfg.model} calls tools")


def _message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:300]
    return str(exc.message)[:300]


async def _get(url: str, headers: dict[str, str] | None = None) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as http:
        return await http.get(url, headers=headers)


async def _check_telegram(config: Config) -> Check:
    cfg = config.telegram
    try:
        token = cfg.resolve_token()
        resp = await _get(f"{cfg.api_base_url}{token}/getMe")
    except RelaybotError as exc:
        return Check("telegram", Status.FAILED, str(exc), "export the token variable or set token")
    except httpx.HTTPError as exc:
        return Check(
            "telegram",
            Status.FAILED,
            f"cannot reach the Bot API: {type(exc).__name__}",
            "check network access and [telegram] api_base_url",
        )
    if resp.status_code in (401, 404):
        return Check(
            "telegram",
            Status.FAILED,
            "the bot token was rejected",
            "copy the token again from @BotFather (/token)",
        )
    if resp.status_code != 200:
        return Check("telegram", Status.FAILED, f"getMe answered {resp.status_code}", "retry later")
    return Check("telegram", Status.OK, f"token accepted: @{resp.json()['result'].get('username')}")


async def _check_discord(config: Config) -> Check:
    cfg = config.discord
    try:
        token = cfg.resolve_token()
        resp = await _get(f"{cfg.api_base_url}/users/@me", {"Authorization": f"Bot {token}"})
    except RelaybotError as exc:
        return Check("discord", Status.FAILED, str(exc), "export the token variable or set token")
    except httpx.HTTPError as exc:
        return Check(
            "discord",
            Status.FAILED,
            f"cannot reach Discord: {type(exc).__name__}",
            "check network access and [discord] api_base_url",
        )
    if resp.status_code == 401:
        return Check(
            "discord",
            Status.FAILED,
            "the bot token was rejected",
            "reset the token in the developer portal (Bot → Reset Token)",
        )
    if resp.status_code != 200:
        return Check(
            "discord", Status.FAILED, f"users/@me answered {resp.status_code}", "retry later"
        )
    return Check("discord", Status.OK, f"token accepted: {resp.json().get('username')}")


async def _check_search(config: Config) -> Check:
    """One real search ("relaybot") against the configured backend."""
    search = config.tools.web_search
    where = f"{search.backend} at {search.endpoint}"
    try:
        tool = WebSearch(search, config.search_key())
    except RelaybotError as exc:
        fix = "export the variable, or set [tools.web_search] api_key"
        return Check("web_search", Status.FAILED, str(exc), fix)
    try:
        hits = await tool.search("relaybot", 3)
    except SearchFailed as exc:
        if search.backend == "searxng":
            fix = "check [tools.web_search] url, and json in the instance's search.formats"
        else:
            fix = "check the API key ([tools.web_search] api_key_env) and url"
        return Check("web_search", Status.FAILED, f"{where}: {exc}", fix)
    return Check("web_search", Status.OK, f"{where} answers ({len(hits)} results for a test)")


async def run_doctor(config: Config) -> int:
    checks: list[Callable[[Config], Awaitable[Check]]] = [_check_store, _check_llm]
    if config.telegram.enabled:
        checks.append(_check_telegram)
    if config.discord.enabled:
        checks.append(_check_discord)
    if config.tools.web_search.backend is not None:
        checks.append(_check_search)
    plugins = asyncio.create_task(asyncio.to_thread(_plugins, config))
    results = [
        *_config(config),
        *await asyncio.gather(*(c(config) for c in checks)),
        *await plugins,
    ]
    for r in results:
        print(f"{r.name}: {r.status} - {r.detail}")
        if r.status is not Status.OK and r.fix:
            print(f"  fix: {r.fix}")
    failed = [r.name for r in results if r.status is Status.FAILED]
    if failed:
        print(f"{len(failed)} problem(s): {', '.join(failed)}", file=sys.stderr)
        return 1
    warned = sum(r.status is Status.WARNING for r in results)
    print(f"all good, {warned} warning(s)" if warned else "all good")
    return 0
