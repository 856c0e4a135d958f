"""`relaybot doctor`: check what a running daemon depends on, and say how to fix each failure."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx
import openai

from bot.config import Config
from engine import Store
from tools import RelaybotError


@dataclass(slots=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


async def _check_store(config: Config) -> Check:
    path = config.storage.resolved_path()
    try:
        async with Store(path) as store:
            await store.db.execute("BEGIN IMMEDIATE")  # proves we can take the write lock
            await store.db.execute("ROLLBACK")
            version = await store.schema_version()
    except RelaybotError as exc:
        return Check(
            "store", False, str(exc), f"make {path.parent} writable, or set [storage] path"
        )
    return Check("store", True, f"{path} (schema v{version}, writable)")


async def _check_llm(config: Config) -> Check:
    cfg = config.llm
    try:
        key = cfg.resolve_api_key()
    except RelaybotError as exc:
        return Check("llm", False, str(exc), "export the variable, or set [llm] api_key")
    client = openai.AsyncOpenAI(
        base_url=cfg.base_url, api_key=key or "not-needed", timeout=10, max_retries=0
    )
    try:
        ids = [m.id async for m in client.models.list()]
    except openai.AuthenticationError:
        return Check("llm", False, f"{cfg.base_url} rejected the API key", "check [llm] api_key")
    except openai.APIStatusError as exc:
        return Check(
            "llm",
            False,
            f"{cfg.base_url} answered {exc.status_code}",
            "check [llm] base_url (it usually ends in /v1)",
        )
    except openai.APIConnectionError as exc:
        return Check(
            "llm",
            False,
            f"cannot reach {cfg.base_url}: {exc.__cause__ or exc}",
            "is the server running? check [llm] base_url",
        )
    finally:
        await client.close()
    if ids and cfg.model not in ids:
        shown = ", ".join(sorted(ids)[:10])
        return Check(
            "llm",
            False,
            f"model {cfg.model!r} not offered at {cfg.base_url}",
            f"set [llm] model to one of: {shown}",
        )
    return Check("llm", True, f"{cfg.base_url} answers; model {cfg.model} is available")


async def _get(url: str, headers: dict[str, str] | None = None) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as http:
        return await http.get(url, headers=headers)


async def _check_telegram(config: Config) -> Check:
    cfg = config.telegram
    try:
        token = cfg.resolve_token()
        resp = await _get(f"{cfg.api_base_url}{token}/getMe")
    except RelaybotError as exc:
        return Check("telegram", False, str(exc), "export the token variable or set token")
    except httpx.HTTPError as exc:
        return Check(
            "telegram",
            False,
            f"cannot reach the Bot API: {type(exc).__name__}",
            "check network access and [telegram] api_base_url",
        )
    if resp.status_code in (401, 404):
        return Check(
            "telegram",
            False,
            "the bot token was rejected",
            "copy the token again from @BotFather (/token)",
        )
    if resp.status_code != 200:
        return Check("telegram", False, f"getMe answered {resp.status_code}", "retry later")
    return Check("telegram", True, f"token accepted: @{resp.json()['result'].get('username')}")


async def _check_discord(config: Config) -> Check:
    cfg = config.discord
    try:
        token = cfg.resolve_token()
        resp = await _get(f"{cfg.api_base_url}/users/@me", {"Authorization": f"Bot {token}"})
    except RelaybotError as exc:
        return Check("discord", False, str(exc), "export the token variable or set token")
    except httpx.HTTPError as exc:
        return Check(
            "discord",
            False,
            f"cannot reach Discord: {type(exc).__name__}",
            "check network access and [discord] api_base_url",
        )
    if resp.status_code == 401:
        return Check(
            "discord",
            False,
            "the bot token was rejected",
            "reset the token in the developer portal (Bot → Reset Token)",
        )
    if resp.status_code != 200:
        return Check("discord", False, f"users/@me answered {resp.status_code}", "retry later")
    return Check("discord", True, f"token accepted: {resp.json().get('username')}")


async def run_doctor(config: Config) -> int:
    checks: list[Callable[[Config], Awaitable[Check]]] = [_check_store, _check_llm]
    if config.telegram.enabled:
        checks.append(_check_telegram)
    if config.discord.enabled:
        checks.append(_check_discord)
    results = await asyncio.gather(*(c(config) for c in checks))
    print("config: OK")
    for r in results:
        print(f"{r.name}: {'OK' if r.ok else 'FAILED'} - {r.detail}")
        if not r.ok and r.fix:
            print(f"  fix: {r.fix}")
    failed = [r.name for r in results if not r.ok]
    if failed:
        print(f"{len(failed)} problem(s): {', '.join(failed)}", file=sys.stderr)
        return 1
    print("all good")
    return 0
