"""`relaybot doctor`: check what a running daemon depends on, and say how to fix each failure.

Each check ends OK, WARNING (it starts, but will not work as you probably mean) or FAILED.
The config is judged by the same `validate` as `run` and `check-config`; the LLM check makes
one tiny real request with a tool to each configured model ([llm] and every [[llm.fallback]]),
in its provider's own API, because listing models proves neither the key nor that the model
accepts tools. How updates reach the instance (webhook, shards) is checked in _doctor_receiving.
"""

from __future__ import annotations

import asyncio
import enum
import importlib
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from bot._checks import configured_skills, tool_problems, validate
from bot._lock import holder
from bot.config import Config, ModelEndpoint
from engine.context import ContextSettings, budget_for, discover_window
from engine.store import SqliteStore, open_store, redact
from tools.builtins import SearchFailed, WebSearch
from tools.errors import ConfigError, RelaybotError


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


_SKILL_FIX = "correct the SKILL.md, or move the folder away; `relaybot skills` lists them"


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
    skills = configured_skills(config)
    checks += [Check("skills", Status.WARNING, str(p), _SKILL_FIX) for p in skills.problems]
    if skills:
        checks.append(Check("skills", Status.OK, f"found {', '.join(skills.skills)}"))
    return checks


async def _check_store(config: Config) -> Check:
    url = config.storage.resolved_url()
    if url is not None:
        return await _check_shared_store(url)
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


_SLOW_ROUND_TRIP_S = 0.05  # every turn makes a few dozen statements


async def _check_shared_store(url: str) -> Check:
    """PostgreSQL: the server answers, the schema is current (migrating it if it is older), a
    write commits, and how long a round trip takes."""
    where = redact(url)
    try:
        async with open_store(url, "") as store:
            async with store.transaction():
                version = await store.schema_version()
            assert store.cluster is not None
            info = await store.cluster.server()
    except RelaybotError as exc:
        return Check(
            "store",
            Status.FAILED,
            str(exc),
            "check [storage] url (or the variable url_env names), that the server runs, and "
            "that the user may connect and create tables",
        )
    live = ", ".join(info.instances) or "none"
    detail = (
        f"{where} (PostgreSQL {info.version}, schema v{version}, round trip "
        f"{info.round_trip_s * 1000:.1f} ms; instances running: {live})"
    )
    if info.round_trip_s > _SLOW_ROUND_TRIP_S:
        return Check(
            "store",
            Status.WARNING,
            detail,
            "a turn makes dozens of statements: put the database closer to the instances",
        )
    return Check("store", Status.OK, detail)


# The tiny request: one tool the model is asked to call.
_PING_TOOL = ("ping", "Answer relaybot's health check.", {"type": "object", "properties": {}})
_PING_ASK = "Health check: call the ping tool, nothing else."


async def _check_models(config: Config) -> list[Check]:
    """One check per configured model: [llm] and each [[llm.fallback]] entry."""
    return list(await asyncio.gather(*(_check_llm(w, e) for w, e in config.llm.endpoints())))


async def _check_llm(where: str, cfg: ModelEndpoint) -> Check:
    section = _section(where)
    try:
        key = cfg.resolve_api_key(where)
    except RelaybotError as exc:
        return Check(
            where, Status.FAILED, str(exc), f"export the variable, or set {section} api_key"
        )
    sdk: Any = importlib.import_module(cfg.provider)  # the SDKs share their error classes' names
    where_url = cfg.base_url
    if cfg.provider == "anthropic":
        client: Any = sdk.AsyncAnthropic(
            base_url=cfg.base_url, api_key=key or "not-needed", timeout=30, max_retries=0
        )
    else:
        client = sdk.AsyncOpenAI(
            base_url=cfg.base_url, api_key=key or "not-needed", timeout=30, max_retries=0
        )
    try:
        ids = [m.id async for m in client.models.list()]
        if ids and cfg.model not in ids:
            shown = ", ".join(sorted(ids)[:10])
            return Check(
                where,
                Status.FAILED,
                f"model {cfg.model!r} not offered at {where_url}",
                f"set {section} model to one of: {shown}",
            )
        called = await _ping(client, cfg)
    except sdk.AuthenticationError:
        return Check(
            where,
            Status.FAILED,
            f"{where_url} rejected the API key",
            f"check the key: the variable {section} api_key_env names, or {section} api_key",
        )
    except sdk.BadRequestError as exc:
        message = _message(exc)
        if "tool" in message.lower() or "function" in message.lower():
            return Check(
                where,
                Status.FAILED,
                f"model {cfg.model} refused a request with a tool: {message}",
                "choose a model with tool (function) calling; a vLLM server needs "
                "--enable-auto-tool-choice and --tool-call-parser",
            )
        return Check(
            where,
            Status.FAILED,
            f"a chat request was refused: {message}",
            f"check {section} model, temperature, max_tokens and options",
        )
    except sdk.APIStatusError as exc:
        return Check(
            where,
            Status.FAILED,
            f"{where_url} answered {exc.status_code}: {_message(exc)}",
            f"check {section} base_url (for openai it usually ends in /v1) and model",
        )
    except sdk.APIConnectionError as exc:
        return Check(
            where,
            Status.FAILED,
            f"cannot reach {where_url}: {exc.__cause__ or exc}",
            f"is the server running? check {section} base_url",
        )
    finally:
        await client.close()
    if not called:
        return Check(
            where,
            Status.WARNING,
            f"model {cfg.model} answered but did not call the test tool",
            "tools may be ignored: a model trained for tool calling works better",
        )
    return Check(where, Status.OK, f"{where_url} answers; model {cfg.model} calls tools")


async def _check_context(config: Config) -> Check:
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


async def _ping(client: Any, cfg: ModelEndpoint) -> bool:
    """Ask the model to call the ping tool, in its provider's shape; True if it did."""
    name, description, schema = _PING_TOOL
    options = cfg.request_options()
    if cfg.provider == "anthropic":
        max_tokens = options.pop("max_tokens", 1024)
        reply = await client.messages.create(
            model=cfg.model,
            max_tokens=max_tokens,
            messages=[{"role": "user", "content": _PING_ASK}],
            tools=[{"name": name, "description": description, "input_schema": schema}],
            extra_body=options or None,
        )
        return any(block.type == "tool_use" for block in reply.content)
    function = {"name": name, "description": description, "parameters": schema}
    tool = {"type": "function", "function": function}
    reply = await client.chat.completions.create(
        model=cfg.model, messages=[{"role": "user", "content": _PING_ASK}], tools=[tool], **options
    )
    return bool(reply.choices and reply.choices[0].message.tool_calls)


def _message(exc: Any) -> str:
    """The API's own message (both providers nest it as ``{"error": {"message": ...}}``)."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:300]
    return str(exc.message)[:300]


async def _get(url: str, headers: dict[str, str] | None = None) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as http:
        return await http.get(url, headers=headers)


def _media(config: Config) -> Check:
    """What users may send besides text, as configured (no request is made)."""
    media = config.media
    if config.llm.vision:
        images = f"pictures on, up to {media.max_image_mb:g} MB, {media.max_images_per_turn} a turn"
    else:
        images = "pictures off ([llm] vision = false: the model is not shown images)"
    voice = (
        f"voice transcribed by {media.transcription_model} (up to {media.max_audio_s} s)"
        if media.transcription_model
        else "voice off (set [media] transcription_model, e.g. whisper-1)"
    )
    return Check("media", Status.OK, f"{images}; text files up to {media.max_text_kb} KB; {voice}")


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
    from bot._doctor_receiving import check_discord_shards, check_telegram_receiving

    checks: list[Callable[[Config], Awaitable[Check]]] = [_check_store, _check_context]
    if config.telegram.enabled:
        checks += [_check_telegram, check_telegram_receiving]
    if config.discord.enabled:
        checks += [_check_discord, check_discord_shards]
    if config.tools.web_search.backend is not None:
        checks.append(_check_search)
    plugins = asyncio.create_task(asyncio.to_thread(_plugins, config))
    models = asyncio.create_task(_check_models(config))
    results = [
        *_config(config),
        *await asyncio.gather(*(c(config) for c in checks)),
        *await models,
        _media(config),
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
