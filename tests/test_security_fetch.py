"""Attacks through fetch_url by an injected model: loopback and private addresses in every IPv6
disguise, and a gzip bomb against the daemon's memory."""

from __future__ import annotations

import gzip
import ipaddress
import tracemalloc

import pytest
from aiohttp import web

from tools.builtins import FetchUrl, refusal

DISGUISES = [
    ("2002:7f00:1::", "a loopback address (127.0.0.1) in 6to4 form"),
    ("2002:a9fe:a9fe::", "a link-local address (169.254.169.254) in 6to4 form"),
    ("64:ff9b::7f00:1", "a loopback address (127.0.0.1) in NAT64 form"),
    ("64:ff9b::a00:1", "a private address (10.0.0.1) in NAT64 form"),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "a loopback address (127.0.0.1) in Teredo form"),
    ("::127.0.0.1", "a loopback address (127.0.0.1) in IPv4-compatible form"),
    ("::ffff:0:127.0.0.1", "a loopback address (127.0.0.1) in IPv4-translated form"),
    ("::ffff:127.0.0.1", "a loopback address"),
    ("::ffff:192.168.1.1", "a private address"),
]


@pytest.mark.parametrize(("address", "reason"), DISGUISES)
async def test_ipv4_in_ipv6_disguise_is_refused(address, reason):
    result = await FetchUrl().execute({"url": f"http://[{address}]:8080/admin"})
    assert result.is_error and result.for_llm.startswith("Refused: ")
    assert result.for_llm.endswith(f" {reason}. Only public internet addresses can be fetched.")


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("2002:5db8:d822::", None),  # 6to4 of a public address: public
        ("64:ff9b::5db8:d822", None),  # NAT64 of a public address: how IPv6-only hosts go out
        ("2001:0:5db8:d822:0:0:a2ff:fffe", "a Teredo address"),  # tunnels are not fetched
        ("::5db8:d822", "an IPv4-compatible address"),  # deprecated form
        ("64:ff9b:1::7f00:1", "a reserved address"),  # local-use NAT64
    ],
)
def test_carried_public_addresses(address, reason):
    assert refusal(ipaddress.ip_address(address)) == reason


@pytest.fixture
async def bomb_site():
    """Serves 64 MiB of zeros as 64 KiB of gzip (the header says so; nothing else does)."""
    bomb = gzip.compress(b"\0" * (64 << 20), compresslevel=9)

    async def handler(request: web.Request) -> web.Response:
        return web.Response(
            body=bomb, headers={"Content-Type": "text/plain", "Content-Encoding": "gzip"}
        )

    async def brotli(request: web.Request) -> web.Response:
        return web.Response(body=b"??", headers={"Content-Encoding": "br"})

    app = web.Application()
    app.router.add_get("/bomb", handler)
    app.router.add_get("/br", brotli)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}", len(bomb)
    await runner.cleanup()


async def test_a_gzip_bomb_is_cut_by_its_decompressed_size(bomb_site):
    base, compressed = bomb_site
    assert compressed < 100_000
    tool = FetchUrl(allow_private=True, max_bytes=200_000)
    tracemalloc.start()
    try:
        result = await tool.execute({"url": f"{base}/bomb"})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not result.is_error
    assert result.for_llm.endswith("[… download stopped at 200000 bytes]")
    assert peak < 8 << 20  # never the whole 64 MiB, nor one inflated 64 KiB network chunk


async def test_an_encoding_it_cannot_bound_is_refused(bomb_site):
    base, _ = bomb_site
    result = await FetchUrl(allow_private=True).execute({"url": f"{base}/br"})
    assert result.is_error and "unsupported Content-Encoding 'br'" in result.for_llm
