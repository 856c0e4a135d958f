"""`[metrics] listen`: /metrics in Prometheus' text format, served from the daemon's event loop.

aiohttp (already installed for discord.py) serves it rather than prometheus_client's own thread
server, so the gauges of state are set on the event loop as each scrape arrives
(`refresh`: queue depths and busy chats from memory, confirmations and jobs from the store),
never read from another thread while the loop changes them. Only GET /metrics answers; nothing
else is served on that port.
"""

from __future__ import annotations

import contextlib
import errno
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from tools.errors import ConfigError

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
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError as exc:
        await runner.cleanup()
        reason = "the address is in use" if exc.errno == errno.EADDRINUSE else exc.strerror
        raise ConfigError("metrics.listen", f"cannot listen on {host}:{port}: {reason}") from None
    log.info("metrics: serving http://%s:%d/metrics", host, port)
    try:
        yield
    finally:
        await runner.cleanup()
