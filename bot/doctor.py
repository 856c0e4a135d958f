# Left whole: relaybot doctor's own checks and the two lists that order them (every check, and
# the quick ones that need no network); each check with a room of its own is in a _doctor_*.
"""`relaybot doctor`: check what a running daemon depends on, and say how to fix each failure.

Each check ends OK, WARNING (it starts, but will not work as you probably mean) or FAILED.
The config is judged by the same `validate` as `run` and `check-config`; the LLM check
(bot/_doctor_llm.py) makes one tiny real request with a tool to each configured model ([llm]
and every [[llm.fallback]]), in its provider's own API, because listing models proves neither
the key nor that the model accepts tools. How updates reach the instance (webhook, shards) is
checked in bot/_doctor_receiving.py, run_command's sandbox in bot/_doctor_sandbox.py, the MCP
servers in bot/_doctor_mcp.py; what a check returns is in bot/_doctor_base.py.

`relaybot doctor --quick` runs only the checks that need no network and take a moment (the
config with its secrets set, not tried; the store; plugins and skills; media; prices; the
sandbox): what `relaybot upgrade` asks of a new version once it says it is ready.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable

import httpx

from bot._checks import CHAT_ONLY, configured_skills, tool_problems, validate
from bot._config_secrets import hide_secrets
from bot._doctor_base import Check, Status, get
from bot._doctor_llm import check_context, check_models
from bot._doctor_mcp import check_mcp
from bot._doctor_receiving import check_discord_shards, check_telegram_receiving
from bot._doctor_sandbox import check_sandbox
from bot._lock import holder
from bot._media import prices
from bot.config import Config
from engine.store import SqliteStore, open_store, redact
from tools.builtins import SearchFailed, WebSearch
from tools.errors import ConfigError, RelaybotError


def _config(config: Config, *, secrets: bool = False) -> list[Check]:
    try:
        # the llm and channel checks resolve the secrets (`secrets`: here, the quick checks
        # make no request); a chat-only config is one (noted)
        warnings = validate(config, need_channel=False, resolve_secrets=secrets)
    except ConfigError as exc:
        return [Check("config", Status.FAILED, str(exc))]  # the message says what to change
    chat_only = not (config.telegram.enabled or config.discord.enabled)
    return [
        Check("config", Status.OK, "valid"),
        *([Check("config", Status.OK, CHAT_ONLY)] if chat_only else []),
        *(Check("config", Status.WARNING, w) for w in warnings),
    ]


_SKILL_FIX = "correct the SKILL.md, or move the folder away; `relaybot skills` lists them"


def _plugins(config: Config) -> list[Check]:
    try:
        report = tool_problems(config)  # imports the plugins: run in a thread
    except ConfigError:
        return []  # already reported by the config check
    checks = [
        Check("mcp" if p.startswith("MCP server") else "plugins", Status.FAILED, p)
        for p in report.problems
    ]
    checks += [Check("tools", Status.WARNING, w) for w in report.unknown]
    if report.plugin_tools and not report.problems:
        names = ", ".join(report.plugin_tools)
        checks.insert(0, Check("plugins", Status.OK, f"loaded {names}"))
    skills = configured_skills(config)
    checks += [Check("skills", Status.WARNING, str(p), _SKILL_FIX) for p in skills.problems]
    if skills:
        ready = [s.name for s in skills.skills.values() if not s.unmet]
        idle = [f"{s.name} ({'; '.join(s.unmet)})" for s in skills.skills.values() if s.unmet]
        left = f"; not offered here: {', '.join(idle)}" if idle else ""
        checks.append(Check("skills", Status.OK, f"found {', '.join(ready)}{left}"))
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
    made = [
        f"answers to voice spoken by {media.speech_model} ({media.speech_voice})"
        if media.speech_model
        else "",
        f"pictures made by {media.image_model}" if media.image_model else "",
    ]
    extra = "".join(f"; {m}" for m in made if m)
    return Check(
        "media", Status.OK, f"{images}; text files up to {media.max_text_kb} KB; {voice}{extra}"
    )


def _prices(config: Config) -> list[Check]:
    """Whether each model the config names has a price (the built-in table or [pricing])."""
    llm, media = config.llm, config.media
    names = [e.model for _, e in llm.endpoints()] + list(llm.models_allowed)
    names += [m for m in (media.transcription_model, media.speech_model, media.image_model) if m]
    table = prices(config)
    priced: list[str] = []
    unpriced: list[str] = []
    for name in dict.fromkeys(names):
        (priced if table.of(name) is not None else unpriced).append(name)
    # Without a price the bot works, counting tokens only; usd_per_day then misses requests.
    status = Status.WARNING if config.limits.usd_per_day else Status.OK
    checks = [
        Check(
            "pricing",
            status,
            f"{name} has no price: its requests are counted in tokens only"
            + (", and [limits] usd_per_day does not see them" if config.limits.usd_per_day else "")
            + f' (set [pricing."{name}"] to see its cost)',
            f'add [pricing."{name}"] with input_per_mtok and output_per_mtok (0 for a free '
            "local model)",
        )
        for name in unpriced
    ]
    if priced:
        checks.insert(0, Check("pricing", Status.OK, f"priced: {', '.join(priced)}"))
    return checks


async def _check_telegram(config: Config) -> Check:
    cfg = config.telegram
    try:
        token = cfg.resolve_token()
        resp = await get(f"{cfg.api_base_url}{token}/getMe")
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
        resp = await get(f"{cfg.api_base_url}/users/@me", {"Authorization": f"Bot {token}"})
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


async def doctor_checks(config: Config) -> list[Check]:
    """Every check, in the order `relaybot doctor` prints them (the web console runs them too)."""
    checks: list[Callable[[Config], Awaitable[Check]]] = [_check_store, check_context]
    if config.telegram.enabled:
        checks += [_check_telegram, check_telegram_receiving]
    if config.discord.enabled:
        checks += [_check_discord, check_discord_shards]
    if config.tools.web_search.backend is not None:
        checks.append(_check_search)
    plugins = asyncio.create_task(asyncio.to_thread(_plugins, config))
    models = asyncio.create_task(check_models(config))
    sandbox = asyncio.create_task(check_sandbox(config))
    mcp = asyncio.create_task(check_mcp(config))
    results = [
        *_config(config),
        *await asyncio.gather(*(c(config) for c in checks)),
        *await models,
        _media(config),
        *_prices(config),
        *await plugins,
        *await sandbox,
        *await mcp,
    ]
    return results


async def quick_checks(config: Config) -> list[Check]:
    """The checks that need no network (`relaybot doctor --quick`), in doctor's order."""
    plugins = asyncio.create_task(asyncio.to_thread(_plugins, config))
    return [
        *_config(config, secrets=True),
        await _check_store(config),
        _media(config),
        *_prices(config),
        *await plugins,
        *await check_sandbox(config),
    ]


async def run_doctor(config: Config, *, quick: bool = False) -> int:
    results = await (quick_checks if quick else doctor_checks)(config)
    for r in results:
        print(hide_secrets(f"{r.name}: {r.status} - {r.detail}"))
        if r.status is not Status.OK and r.fix:
            print(hide_secrets(f"  fix: {r.fix}"))
    failed = [r.name for r in results if r.status is Status.FAILED]
    if failed:
        print(f"{len(failed)} problem(s): {', '.join(failed)}", file=sys.stderr)
        return 1
    warned = sum(r.status is Status.WARNING for r in results)
    print(f"all good, {warned} warning(s)" if warned else "all good")
    return 0
