"""discord.py's HTTP requests that failed, counted for the metrics and `relaybot status`: an
aiohttp trace on the client's session (the library waits out a 429 and retries a 5xx itself:
those count as retries too). A request is named by its route, never its ids or tokens."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import aiohttp

from engine.metrics import api_error, api_retry


def failures() -> aiohttp.TraceConfig:
    trace = aiohttp.TraceConfig()

    async def ended(_: Any, __: Any, params: aiohttp.TraceRequestEndParams) -> None:
        status = params.response.status
        if status >= 400:
            api_error("discord", f"{params.method} {_route(params.url)}: HTTP {status}")
            if status == 429 or status >= 500:
                api_retry("discord")

    async def failed(_: Any, __: Any, params: aiohttp.TraceRequestExceptionParams) -> None:
        exc = params.exception
        if not isinstance(exc, asyncio.CancelledError):
            where = f"{params.method} {_route(params.url)}"
            api_error("discord", f"{where}: {type(exc).__name__}: {exc}")

    trace.on_request_end.append(ended)
    trace.on_request_exception.append(failed)
    return trace


def _route(url: Any) -> str:
    """A request's path without ids or tokens (an interaction's URL carries its token)."""
    parts = [p for p in str(url.path).split("/") if p and not re.fullmatch(r"api|v\d+", p)]
    return "/".join("{id}" if p.isdigit() else "{token}" if len(p) > 24 else p for p in parts)
