"""A plain chat-completions request's first attempt, sent without the SDK's per-request machinery.

The OpenAI SDK builds every request anew: its options model, merged and validated headers, an
httpx request parsed from a joined URL, the auth layer's checks, then the same again in its
aiohttp transport. Measured against the fake server, that is ~0.5 ms of CPU per request on top
of ~0.15 ms for the HTTP exchange itself: the largest single cost of a message in the daemon.
:class:`FirstAttempt` sends the JSON body to a URL and headers fixed once, over an aiohttp
session with the SDK's own limits (1,000 connections, certifi's CAs when present, the request
timeout applied to connecting and to each read) and the proxy the environment names for the URL,
looked up once (aiohttp's ``trust_env`` looks up the proxy and ~/.netrc in a worker thread on
every request: two thread hand-offs each).

Only the first attempt goes this way, and only its success is read here. What the SDK decides
after a failure stays the SDK's: :func:`retry_delay` says whether the SDK would try again (its
rules: ``x-should-retry``, 408, 409, 429, 5xx, a connection error) and after how long, and the
provider then hands the request to the SDK with the attempts that are left; a failure not to be
retried is read from the status and body as the SDK would have raised it.
"""

from __future__ import annotations

import json
import ssl
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

INITIAL_RETRY_S = 0.5  # the SDK's INITIAL_RETRY_DELAY
MAX_RETRY_AFTER_S = 60.0  # a longer Retry-After is not waited for (the SDK's rule)
CONNECTIONS = 1000  # the SDK's DEFAULT_CONNECTION_LIMITS.max_connections


@dataclass(frozen=True, slots=True)
class Answer:
    """An HTTP answer: its status, headers and body, read whole."""

    status: int
    headers: Mapping[str, str]
    body: bytes


class FirstAttempt:
    """POSTs of JSON to one URL with headers built once, over one aiohttp session (lazily)."""

    def __init__(self, url: str, headers: Mapping[str, str], timeout_s: float) -> None:
        self.url = url
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            **headers,
        }
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=timeout_s, sock_read=timeout_s
        )
        self._session: aiohttp.ClientSession | None = None
        self._proxy: str | None = None

    async def post(self, body: bytes) -> Answer:
        """The endpoint's answer; aiohttp.ClientError or TimeoutError when there is none."""
        session = self._session
        if session is None or session.closed:
            session = self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=CONNECTIONS, ssl=_tls()),
                timeout=self._timeout,
                skip_auto_headers=("User-Agent",),
            )
            self._proxy = _proxy_for(self.url)
        post = session.post(self.url, data=body, headers=self._headers, proxy=self._proxy)
        async with post as response:
            return Answer(response.status, response.headers, await response.read())

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def retry_delay(answer: Answer | None) -> float | None:
    """How long the SDK would wait before trying again after `answer` (None: no answer at all,
    a connection error or a timeout); None when it would not try again."""
    if answer is None:
        return INITIAL_RETRY_S
    should = answer.headers.get("x-should-retry")
    if should == "true":
        return _retry_after(answer.headers)
    if should == "false":
        return None
    if answer.status in (408, 409, 429) or answer.status >= 500:
        return _retry_after(answer.headers)
    return None


def _retry_after(headers: Mapping[str, str]) -> float:
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            seconds = float(headers.get(name, "")) / scale
        except ValueError:
            continue
        if 0 <= seconds <= MAX_RETRY_AFTER_S:
            return seconds
    return INITIAL_RETRY_S


def _proxy_for(url: str) -> str | None:
    """The proxy HTTPS_PROXY / HTTP_PROXY / NO_PROXY name for `url`, as httpx reads them."""
    parts = urllib.parse.urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return urllib.request.getproxies().get(parts.scheme)


def _tls() -> ssl.SSLContext | bool:
    """The CAs the SDK's httpx client trusts (certifi's), else the system's."""
    try:
        import certifi
    except ImportError:  # pragma: no cover - certifi comes with httpx
        return True
    return ssl.create_default_context(cafile=certifi.where())


def error_body(answer: Answer) -> tuple[Any, str]:
    """A refusal's body (its JSON when it is JSON, else its text) and its text."""
    text = answer.body.decode("utf-8", "replace").strip()
    try:
        return json.loads(text), text
    except ValueError:
        return text, text
