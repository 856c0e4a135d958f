"""A fake SearXNG and a fake Brave Web Search API on 127.0.0.1, for web_search tests.

    async with FakeSearch() as search:
        search.results = [("Paris", "https://en.wikipedia.org/wiki/Paris", "Paris is the capital")]
        ...  # [tools.web_search] url = search.searxng_url (or search.brave_url)
        assert search.requests[0].query["q"] == "capital of France"

SearXNG answers ``GET /search?format=json`` with ``{"results": [{title, url, content}]}`` and
403 when the format is not json (as an instance without the JSON format does). Brave answers
``GET /res/v1/web/search`` with ``{"web": {"results": [{title, url, description}]}}`` (matches in
<strong>, as Brave marks them), 401 unless ``X-Subscription-Token`` is ``brave_key``.
``status`` forces an HTTP status for every answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from aiohttp import web


@dataclass(frozen=True, slots=True)
class Request:
    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str] = field(repr=False)


class FakeSearch:
    def __init__(self, brave_key: str = "brave-test-key") -> None:
        self.brave_key = brave_key
        self.results: list[tuple[str, str, str]] = []  # (title, url, snippet)
        self.requests: list[Request] = []
        self.status: int | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def searxng_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/searx"

    @property
    def brave_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/res/v1/web/search"

    async def __aenter__(self) -> FakeSearch:
        app = web.Application()
        app.router.add_get("/searx/search", self._searxng)
        app.router.add_get("/res/v1/web/search", self._brave)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def _record(self, request: web.Request) -> web.Response | None:
        self.requests.append(Request(request.path, dict(request.query), dict(request.headers)))
        if self.status is not None:
            return web.json_response({"error": "forced"}, status=self.status)
        return None

    async def _searxng(self, request: web.Request) -> web.Response:
        if (forced := self._record(request)) is not None:
            return forced
        if request.query.get("format") != "json":
            return web.Response(status=403, text="403 Forbidden")
        results = [
            {"title": t, "url": u, "content": s, "engine": "fake"} for t, u, s in self.results
        ]
        return web.json_response({"query": request.query.get("q"), "results": results})

    async def _brave(self, request: web.Request) -> web.Response:
        if (forced := self._record(request)) is not None:
            return forced
        if request.headers.get("X-Subscription-Token") != self.brave_key:
            return web.json_response({"type": "ErrorResponse"}, status=401)
        count = int(request.query.get("count", "20"))
        results = [
            {"title": t, "url": u, "description": s.replace("capital", "<strong>capital</strong>")}
            for t, u, s in self.results[:count]
        ]
        return web.json_response({"type": "search", "web": {"type": "search", "results": results}})
