"""An aiohttp application served on the daemon's own event loop (`/metrics`, the console).

An address that cannot be listened on is a config error naming the key that set it, said before
the daemon reports itself ready; the server stops when the block ends.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import AsyncIterator

from aiohttp import web

from tools.errors import ConfigError


@contextlib.asynccontextmanager
async def serving(app: web.Application, host: str, port: int, key: str) -> AsyncIterator[None]:
    """Serve `app` on host:port until the block exits (`key`: the config key of the address)."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError as exc:
        await runner.cleanup()
        reason = "the address is in use" if exc.errno == errno.EADDRINUSE else exc.strerror
        raise ConfigError(key, f"cannot listen on {host}:{port}: {reason}") from None
    try:
        yield
    finally:
        await runner.cleanup()
