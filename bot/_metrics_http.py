"""`[metrics] listen`: /metrics in Prometheus' text format, served from the daemon's event loop.

aiohttp (already installed for discord.py) serves it rather than prometheus_client's own thread
server, so the gauges of state are set on the event loop as each scrape arrives
(`refresh`: queue depths and busy chats from memory, confirmations and jobs from the store),
never read from another thread while the loop changes them. Only GET /metrics answers; nothing
else is served on that port.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from bot._serving import serving

log = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def metrics_server(
    host: str, port: int, refresh: Callable[[], Awaitable[None]]
) -> AsyncIterator[None]:
    """Serve /metrics on host:port until the block exits."""

    async def scrape(request: web.Request) -> web.Response:
        try:
            await refresh()
        except Exception:  # the counters are still worth serving
            log.exception("metrics: could not read the current state")
        return web.Response(
            body=generate_latest(REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    app = web.Application()
    app.router.add_get("/metrics", scrape)
    async with serving(app, host, port, "metrics.listen"):
        log.info("metrics: serving http://%s:%d/metrics", host, port)
        yield
