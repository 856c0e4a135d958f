"""web_search: a few results (title, URL, snippet) from the configured search backend.

Backends: a SearXNG instance (its JSON API: free, self-hosted), Brave's Web Search API and
Tavily's, the last two with a key from the environment. Each backend is one small function that
turns its JSON into :class:`Hit`s; the tool asks only the configured endpoint and never fetches
a result (fetch_url reads one in full, through its own guard).

The operator's own `url` is trusted: a SearXNG on a private address is how it is usually run.
The public APIs' default endpoints are reached through fetch_url's SSRF guard, pinned to the
checked address.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from tools._base import Tool
from tools._result import ToolResult
from tools.builtins._html import html_to_text
from tools.builtins._netguard import Refused, pinned_send
from tools.builtins._text import clip
from tools.config import WebSearchConfig

USER_AGENT = "relaybot/0.1 (+web_search)"
SNIPPET_CHARS = 300
_SEARXNG_SAFE = {"off": "0", "moderate": "1", "strict": "2"}


@dataclass(frozen=True, slots=True)
class Hit:
    title: str
    url: str
    snippet: str


@dataclass(frozen=True, slots=True)
class _Ask:
    """One backend's request."""

    method: str
    url: httpx.URL
    params: dict[str, str]
    headers: dict[str, str]
    json: dict[str, Any] | None = None


class SearchFailed(Exception):
    """The backend did not answer with results; the message says why, without secrets."""


class WebSearch(Tool):
    name = "web_search"
    description = (
        "Search the web; returns the top results (title, URL and a snippet each). Use it for "
        "current events, facts you are not sure of, or to find a page; then read a promising "
        "result in full with fetch_url. Say which results your answer comes from."
    )

    def __init__(self, config: WebSearchConfig, api_key: str = "") -> None:
        assert config.backend is not None
        self.config = config
        self.api_key = api_key
        self.trusted = config.url is not None  # the operator's own endpoint
        self.timeout_s = config.timeout_s + 5  # the registry's limit; ours fires first
        self.parameters: dict[str, Any] = {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 400,
                    "description": "What to search for, as you would type it into a search box.",
                },
                "max_results": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": config.max_results,
                    "description": f"How many results (at most {config.max_results}).",
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        }

    async def execute(self, args: dict[str, Any]) -> ToolResult:
        query = " ".join(str(args["query"]).split())
        wanted = int(args.get("max_results") or self.config.max_results)
        try:
            hits = await self.search(query, wanted)
        except SearchFailed as exc:
            return ToolResult.fail(f"The search failed: {exc}")
        if not hits:
            return ToolResult.ok(f"No results for {query!r}.")
        lines = [f"Results for {query!r}:"]
        for n, hit in enumerate(hits, 1):
            lines.append(f"{n}. {hit.title}\n   {hit.url}\n   {hit.snippet}".rstrip())
        return ToolResult.ok("\n".join(lines))

    async def search(self, query: str, wanted: int) -> list[Hit]:
        """At most `wanted` results; SearchFailed when the backend gives none."""
        backend = self.config.backend
        assert backend is not None
        ask, read = _BACKENDS[backend](self, query, wanted)
        try:
            async with asyncio.timeout(self.config.timeout_s):
                data = await self._request(ask)
        except TimeoutError:
            waited = f"{self.config.timeout_s:g} s"
            raise SearchFailed(f"{backend} did not answer within {waited}") from None
        except Refused as exc:
            raise SearchFailed(str(exc)) from None
        except httpx.HTTPError as exc:
            raise SearchFailed(f"cannot reach {backend}: {type(exc).__name__}") from None
        try:
            hits = read(data)
        except (KeyError, TypeError, AttributeError):
            raise SearchFailed(f"{backend} answered in an unexpected shape") from None
        return [h for h in hits if h.url.startswith(("http://", "https://"))][:wanted]

    async def _request(self, ask: _Ask) -> Any:
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json", **ask.headers}
        async with httpx.AsyncClient(timeout=self.config.timeout_s, trust_env=False) as client:
            url = ask.url.copy_merge_params(ask.params)
            if self.trusted:
                response = await client.request(ask.method, url, headers=headers, json=ask.json)
            else:
                response = await pinned_send(
                    client, ask.method, url, trusted=False, headers=headers, json=ask.json
                )
        if response.status_code in (401, 403):
            raise SearchFailed(_refused(self.config.backend, response.status_code))
        if response.is_error:
            raise SearchFailed(f"{self.config.backend} answered HTTP {response.status_code}")
        try:
            return response.json()
        except ValueError:
            raise SearchFailed(f"{self.config.backend} did not answer with JSON") from None


def _refused(backend: str | None, status: int) -> str:
    if backend == "searxng":
        return (
            f"SearXNG refused the request (HTTP {status}); its JSON format may be off: add json "
            "to search.formats in its settings.yml"
        )
    return f"{backend} refused the API key (HTTP {status})"


def _text(value: Any) -> str:
    """A snippet as plain text (Brave marks matches up with <strong>)."""
    raw = str(value or "")
    plain = html_to_text(raw)[1] if "<" in raw else raw
    return clip(" ".join(plain.split()), SNIPPET_CHARS)


def _searxng(tool: WebSearch, query: str, wanted: int) -> tuple[_Ask, Callable[[Any], list[Hit]]]:
    base = httpx.URL(tool.config.endpoint.rstrip("/") + "/search")
    params = {"q": query, "format": "json", "safesearch": _SEARXNG_SAFE[tool.config.safe_search]}

    def read(data: Any) -> list[Hit]:
        return [
            Hit(_text(r.get("title")) or r["url"], r["url"], _text(r.get("content")))
            for r in data["results"]
        ]

    return _Ask("GET", base, params, {}), read


def _brave(tool: WebSearch, query: str, wanted: int) -> tuple[_Ask, Callable[[Any], list[Hit]]]:
    params = {"q": query, "count": str(wanted), "safesearch": tool.config.safe_search}
    headers = {"X-Subscription-Token": tool.api_key}

    def read(data: Any) -> list[Hit]:
        results = (data.get("web") or {}).get("results") or []
        return [
            Hit(_text(r.get("title")) or r["url"], r["url"], _text(r.get("description")))
            for r in results
        ]

    return _Ask("GET", httpx.URL(tool.config.endpoint), params, headers), read


def _tavily(tool: WebSearch, query: str, wanted: int) -> tuple[_Ask, Callable[[Any], list[Hit]]]:
    body = {"query": query, "max_results": wanted, "search_depth": "basic"}
    headers = {"Authorization": f"Bearer {tool.api_key}"}

    def read(data: Any) -> list[Hit]:
        return [
            Hit(_text(r.get("title")) or r["url"], r["url"], _text(r.get("content")))
            for r in data["results"]
        ]

    return _Ask("POST", httpx.URL(tool.config.endpoint), {}, headers, body), read


_BACKENDS = {"searxng": _searxng, "brave": _brave, "tavily": _tavily}
