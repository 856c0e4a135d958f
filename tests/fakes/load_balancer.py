"""A small HTTP load balancer on 127.0.0.1, standing in for nginx or Caddy in front of several
relaybot instances' webhooks:

    async with LoadBalancer(["http://127.0.0.1:8443", "http://127.0.0.1:8444"]) as lb:
        ...  # Telegram posts to lb.url + "/telegram"

Requests go round-robin to the upstreams with their path, body and headers, plus
X-Forwarded-For. An upstream that refuses the connection is skipped for the next one, as nginx's
``proxy_next_upstream error`` and Caddy's ``lb_try_duration`` do; an upstream that fails once it
has the request (it died while handling it) makes the answer 502, since the request may have
taken effect. ``forwarded`` records where each request went and how it was answered.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

_HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "host", "content-length"})


@dataclass(frozen=True, slots=True)
class Forwarded:
    upstream: str
    status: int | None  # None: the upstream refused the connection
    path: str


@dataclass(slots=True)
class LoadBalancer:
    upstreams: list[str]
    timeout_s: float = 60.0
    forwarded: list[Forwarded] = field(default_factory=list)
    _next: itertools.cycle[int] = field(init=False)
    _runner: web.AppRunner | None = None
    _http: aiohttp.ClientSession | None = None
    _port: int = 0

    def __post_init__(self) -> None:
        self._next = itertools.cycle(range(len(self.upstreams)))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    async def __aenter__(self) -> LoadBalancer:
        # One connection per request: a keep-alive connection to an instance that was killed
        # would fail as "reset", which looks like a request taken, not a refused connection.
        connector = aiohttp.TCPConnector(force_close=True)
        self._http = aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=self.timeout_s)
        )
        app = web.Application(client_max_size=8 << 20)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._http is not None:
            await self._http.close()

    async def _forward(self, request: web.Request) -> web.Response:
        assert self._http is not None
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        headers["X-Forwarded-For"] = request.remote or ""
        first = next(self._next)
        for i in range(len(self.upstreams)):
            upstream = self.upstreams[(first + i) % len(self.upstreams)]
            try:
                async with self._http.request(
                    request.method, upstream + request.path_qs, data=body, headers=headers
                ) as resp:
                    content = await resp.read()
            except aiohttp.ClientConnectorError:
                self.forwarded.append(Forwarded(upstream, None, request.path))
                continue  # not sent: the next one may take it
            except (aiohttp.ClientError, TimeoutError):
                self.forwarded.append(Forwarded(upstream, 502, request.path))
                return web.Response(status=502)
            self.forwarded.append(Forwarded(upstream, resp.status, request.path))
            return web.Response(status=resp.status, body=content)
        return web.Response(status=502)
