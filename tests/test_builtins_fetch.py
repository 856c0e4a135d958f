"""fetch_url against real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from tools.builtins import FetchUrl, refusal

PAGE = """<!doctype html><html><head><title>The  Test Page</title>
<style>body { color: red }</style><script>alert("no")</script></head>
<body><h1>Hello</h1><p>First <b>bold</b> paragraph.</p><ul><li>one</li><li>two</li></ul>
<noscript>enable js</noscript></body></html>"""


@pytest.fixture
async def server():
    """A site on 127.0.0.1; yields its base URL. /hang is held until the test ends."""
    release = asyncio.Event()

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/html")

    async def latin1(request: web.Request) -> web.Response:
        body = '<meta charset="iso-8859-1"><p>café</p>'.encode("latin-1")
        return web.Response(body=body, content_type="text/html")

    async def big(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        for _ in range(64):  # 4 MiB in all, far more than the cap
            await response.write(b"x" * 65536)
        return response

    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound(request.query["to"])

    async def hang(request: web.Request) -> web.Response:
        await release.wait()
        return web.Response(text="too late")

    async def missing(request: web.Request) -> web.Response:
        return web.Response(status=404, text="<p>No such page</p>", content_type="text/html")

    async def binary(request: web.Request) -> web.Response:
        return web.Response(body=b"\x89PNG\r\n", content_type="image/png")

    app = web.Application()
    app.router.add_get("/", page)
    app.router.add_get("/latin1", latin1)
    app.router.add_get("/big", big)
    app.router.add_get("/redirect", redirect)
    app.router.add_get("/hang", hang)
    app.router.add_get("/missing", missing)
    app.router.add_get("/image", binary)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}"
    release.set()
    await runner.cleanup()


def fetcher(**options) -> FetchUrl:
    return FetchUrl(**{"allow_private": True, **options})


async def fetch(tool: FetchUrl, url: str):
    return await tool.execute(tool.validate({"url": url}))


async def test_html_becomes_readable_text(server):
    result = await fetch(fetcher(), server + "/")
    assert not result.is_error
    lines = result.for_llm.splitlines()
    assert lines[0] == f"{server}/ (HTTP 200, text/html)"
    assert lines[1] == "Title: The Test Page"
    assert lines[2:] == ["Hello", "First bold paragraph.", "one", "two"]
    assert "alert" not in result.for_llm and "color" not in result.for_llm
    assert "enable js" not in result.for_llm


async def test_charset_from_the_page(server):
    result = await fetch(fetcher(), server + "/latin1")
    assert result.for_llm.endswith("café")


async def test_redirects_are_followed(server):
    result = await fetch(fetcher(), f"{server}/redirect?to=/")
    assert result.for_llm.startswith(f"{server}/ (HTTP 200")


async def test_private_addresses_are_refused_by_default(server):
    result = await fetch(FetchUrl(), server + "/")
    assert result.is_error
    assert "127.0.0.1 is a loopback address" in result.for_llm


async def test_redirect_to_a_private_address_is_refused(server):
    # 127.0.0.1 itself is allowed by name; the redirect goes to a name that resolves to a
    # loopback address, and to the cloud metadata address: both checked after DNS, refused.
    tool = FetchUrl(allow_hosts=["127.0.0.1"])
    assert (await fetch(tool, server + "/")).for_llm.startswith(f"{server}/ (HTTP 200")
    port = server.rsplit(":", 1)[1]
    result = await fetch(tool, f"{server}/redirect?to=http://localhost:{port}/")
    assert result.is_error and "localhost resolves to" in result.for_llm
    assert "loopback address" in result.for_llm
    result = await fetch(tool, f"{server}/redirect?to=http://169.254.169.254/latest/meta-data")
    assert result.is_error and "169.254.169.254 is a link-local address" in result.for_llm


async def test_redirect_to_another_scheme_is_refused(server):
    result = await fetch(fetcher(), f"{server}/redirect?to=file:///etc/passwd")
    assert result.is_error and "only http and https" in result.for_llm


async def test_oversized_body_is_cut(server):
    result = await fetch(fetcher(max_bytes=10_000, max_chars=5_000), server + "/big")
    assert not result.is_error
    assert "[… truncated: 5000 more characters not shown]" in result.for_llm
    assert result.for_llm.endswith("[… download stopped at 10000 bytes]")
    assert len(result.for_llm) < 5_300


async def test_timeout(server):
    tool = fetcher(timeout_s=0.5)
    start = asyncio.get_running_loop().time()
    result = await fetch(tool, server + "/hang")
    assert asyncio.get_running_loop().time() - start < 5
    assert result.is_error and "timed out after 0.5 s" in result.for_llm


async def test_http_errors_and_binary_content(server):
    missing = await fetch(fetcher(), server + "/missing")
    assert missing.is_error and missing.for_llm.startswith("HTTP 404 Not Found")
    assert "No such page" in missing.for_llm
    image = await fetch(fetcher(), server + "/image")
    assert "binary content of type image/png" in image.for_llm


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/x", "example.com", ""])
async def test_only_http_urls(url):
    from tools.registry import ToolRegistry

    registry = ToolRegistry()
    registry.register(FetchUrl())
    result = await registry.execute("fetch_url", {"url": url})
    assert result.is_error and result.retryable
    assert "http:// or https://" in result.for_llm


async def test_connection_refused_is_an_error_result():
    result = await fetch(fetcher(), "http://127.0.0.1:1/")
    assert result.is_error and "Could not fetch" in result.for_llm


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("10.1.2.3", "a private"),
        ("192.168.0.1", "a private"),
        ("100.64.0.1", "a non-public"),
        ("::ffff:127.0.0.1", "a loopback"),
        ("fe80::1", "a link-local"),
        ("fd00::1", "a private"),
        ("224.0.0.1", "a multicast"),
        ("0.0.0.0", "an unspecified"),
    ],
)
def test_non_public_addresses(address, kind):
    import ipaddress

    assert refusal(ipaddress.ip_address(address)) == f"{kind} address"
    assert refusal(ipaddress.ip_address("93.184.216.34")) is None
