"""fetch_url: read a web page as text, with size and time limits and an SSRF guard."""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Iterable
from typing import Any

import httpx

from tools._base import Tool
from tools._result import ToolResult
from tools.builtins._html import decode, html_to_text
from tools.builtins._netguard import Refused, pinned_send
from tools.builtins._text import clip
from tools.errors import ToolRetry

MAX_REDIRECTS = 5
USER_AGENT = "relaybot/0.1 (+fetch_url)"
_HTML = ("text/html", "application/xhtml+xml")
_TEXT_TYPES = ("application/json", "application/xml", "application/javascript", "text/")


class FetchUrl(Tool):
    """GET a URL and give the model its readable text.

    Unless private addresses are allowed, every hop (the first URL and each redirect, followed
    here, not by httpx) is resolved first and refused if any address is not public (hosts in
    `allow_hosts` skip that check); the request then goes to the resolved address itself, so a
    second DNS answer cannot swap it (DNS rebinding).

    The body is capped at `max_bytes` after decompression, counted as it streams: only gzip or
    deflate is accepted, inflated here a bounded piece at a time (httpx would inflate each
    network chunk whole, ~64 MiB for 64 KiB of a gzip bomb), and Content-Length is not trusted.
    """

    name = "fetch_url"
    description = (
        "Download a web page or text file (http/https) and return its readable text; HTML is "
        "reduced to plain text and long pages are cut. Use it to read a link the user shares "
        "or a page you know holds the answer. It cannot run JavaScript, log in, or reach "
        "private network addresses."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "url": {"type": "string", "description": "An absolute http:// or https:// URL."}
        },
        "required": ["url"],
        "additionalProperties": False,
    }

    def __init__(
        self,
        *,
        max_bytes: int = 2_000_000,
        max_chars: int = 8_000,
        timeout_s: float = 20.0,
        allow_private: bool = False,
        allow_hosts: Iterable[str] = (),
    ) -> None:
        self.max_bytes = max_bytes
        self.max_chars = max_chars
        self.fetch_timeout_s = timeout_s
        self.timeout_s = timeout_s + 5  # the registry's limit; ours fires first, with detail
        self.allow_private = allow_private
        self.allow_hosts = frozenset(h.lower() for h in allow_hosts)

    async def execute(self, args: dict[str, Any]) -> ToolResult:
        url = _parse(args["url"])
        try:
            async with asyncio.timeout(self.fetch_timeout_s):
                return await self._fetch(url)
        except TimeoutError:
            return ToolResult.fail(f"Fetching {url} timed out after {self.fetch_timeout_s:g} s.")
        except Refused as exc:
            return ToolResult.fail(str(exc))
        except httpx.HTTPError as exc:
            return ToolResult.fail(f"Could not fetch {url}: {type(exc).__name__}: {exc}")

    async def _fetch(self, url: httpx.URL) -> ToolResult:
        headers = {
            "User-Agent": USER_AGENT,
            "Accept": "text/html,text/*;q=0.9,*/*;q=0.5",
            "Accept-Encoding": "gzip, deflate",
        }
        async with httpx.AsyncClient(
            headers=headers, timeout=self.fetch_timeout_s, trust_env=False
        ) as client:
            for _ in range(MAX_REDIRECTS + 1):
                response = await self._send(client, url)
                try:
                    location = response.headers.get("location")
                    if response.is_redirect and location:
                        url = _parse(str(url.join(location)), redirect=True)
                        continue
                    body, cut = await _read_capped(response, self.max_bytes)
                    return self._result(url, response, body, cut)
                finally:
                    await response.aclose()
        raise Refused(f"Too many redirects (more than {MAX_REDIRECTS}).")

    async def _send(self, client: httpx.AsyncClient, url: httpx.URL) -> httpx.Response:
        if self.allow_private:
            return await client.send(client.build_request("GET", url), stream=True)
        trusted = url.host.lower() in self.allow_hosts
        return await pinned_send(client, "GET", url, trusted=trusted, stream=True)

    def _result(
        self, url: httpx.URL, response: httpx.Response, body: bytes, cut: bool
    ) -> ToolResult:
        mime = response.headers.get("content-type", "").split(";")[0].strip().lower()
        title = ""
        if mime in _HTML or (not mime and body.lstrip()[:1] == b"<"):
            title, text = html_to_text(decode(body, response.charset_encoding, html=True))
        elif mime.startswith(_TEXT_TYPES) or mime.endswith(("+json", "+xml")) or not mime:
            text = decode(body, response.charset_encoding)
        else:
            text = f"(binary content of type {mime}, not shown)"
        if response.is_error:
            snippet = f" The page says: {clip(text, 300)}" if text.strip() else ""
            return ToolResult.fail(
                f"HTTP {response.status_code} {response.reason_phrase} from {url}.{snippet}"
            )
        lines = [f"{url} (HTTP {response.status_code}, {mime or 'unknown type'})"]
        if title:
            lines.append(f"Title: {title}")
        lines.append(clip(text.strip(), self.max_chars) or "(empty page)")
        if cut:
            lines.append(f"[… download stopped at {self.max_bytes} bytes]")
        return ToolResult.ok("\n".join(lines))


def _parse(raw: str, *, redirect: bool = False) -> httpx.URL:
    try:
        url = httpx.URL(raw.strip())
    except httpx.InvalidURL as exc:
        raise ToolRetry(f"Invalid URL {raw!r}: {exc}.") from None
    if url.scheme not in ("http", "https") or not url.host:
        if redirect:
            raise Refused(f"Refused a redirect to {raw!r}: only http and https URLs are fetched.")
        raise ToolRetry(f"Cannot fetch {raw!r}: give an absolute http:// or https:// URL.")
    return url


async def _read_capped(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """At most `limit` bytes of the decoded body, and whether more was left unread."""
    encoding = response.headers.get("content-encoding", "").strip().lower()
    if encoding in ("", "identity"):
        inflate = None
    elif encoding in ("gzip", "x-gzip", "deflate"):
        inflate = zlib.decompressobj(zlib.MAX_WBITS | 32)  # a gzip or zlib header
    else:
        raise httpx.DecodingError(f"unsupported Content-Encoding {encoding!r}")
    body = bytearray()
    async for raw in response.aiter_raw():
        chunk = raw
        while chunk:
            if inflate is None:
                piece, chunk = chunk, b""
            else:
                try:
                    piece = inflate.decompress(chunk, limit + 1 - len(body))
                except zlib.error as exc:
                    raise httpx.DecodingError(f"bad {encoding} data: {exc}") from None
                chunk = inflate.unconsumed_tail
            body += piece
            if len(body) > limit:
                return bytes(body[:limit]), True
    return bytes(body), False
