"""The SSRF guard for fetch_url: which addresses a fetch may reach.

An IPv6 address can carry an IPv4 one, and some of those forms reach it: IPv4-mapped
(::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d), IPv4-translated (::ffff:0:a.b.c.d), NAT64
(64:ff9b::a.b.c.d), 6to4 (2002:AABB:CCDD::) and Teredo (2001:0::, the client obfuscated). Each
carried address is judged as itself; NAT64 and 6to4 of a public IPv4 address are public (that
is how an IPv6-only host reaches IPv4), every other form is refused.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Any

import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_KINDS = (
    ("is_loopback", "a loopback"),
    ("is_link_local", "a link-local"),
    ("is_multicast", "a multicast"),
    ("is_unspecified", "an unspecified"),
    ("is_reserved", "a reserved"),
    ("is_private", "a private"),
)


class Refused(Exception):
    """The fetch would reach an address or scheme it must not."""


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_COMPATIBLE = ipaddress.IPv6Network("::/96")
_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")


def carried(ip: ipaddress.IPv6Address) -> tuple[str, list[ipaddress.IPv4Address]]:
    """The form name and the IPv4 addresses `ip` carries; ("", []) for none."""
    low32 = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour is not None:
        return "6to4", [ip.sixtofour]
    if ip.teredo is not None:
        return "Teredo", list(ip.teredo)
    if ip in _NAT64:
        return "NAT64", [low32]
    if ip in _TRANSLATED:
        return "IPv4-translated", [low32]
    if ip in _COMPATIBLE and int(ip) > 1:
        return "IPv4-compatible", [low32]
    return "", []


def refusal(ip: IPAddress) -> str | None:
    """Why `ip` must not be fetched ("a private address"), or None when it is public."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if isinstance(ip, ipaddress.IPv6Address):
        form, inner = carried(ip)
        for v4 in inner:
            reason = refusal(v4)
            if reason:
                return f"{reason} ({v4}) in {form} form"
        if form in ("NAT64", "6to4"):
            return None
        if form:
            return f"an {form} address" if form[0] in "IA" else f"a {form} address"
    for attr, kind in _KINDS:
        if getattr(ip, attr):
            return f"{kind} address"
    return None if ip.is_global else "a non-public address"


async def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address `host` resolves to (literal IPs resolve to themselves)."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise Refused(f"Cannot resolve host {host!r}: {exc.strerror or exc}") from None
    found: dict[IPAddress, None] = {}
    for *_, sockaddr in infos:
        found[ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])] = None
    return list(found)


async def checked_addresses(host: str, port: int, *, trusted: bool = False) -> list[IPAddress]:
    """The addresses of `host`; unless `trusted`, Refused if any of them is not public (so a
    host cannot hide a private address behind a public one)."""
    addresses = await resolve(host, port)
    if not addresses:
        raise Refused(f"Cannot resolve host {host!r}.")
    for ip in [] if trusted else addresses:
        reason = refusal(ip)
        if reason:
            where = f"{host} is" if host.strip("[]") == str(ip) else f"{host} resolves to {ip},"
            raise Refused(
                f"Refused: {where} {reason}. Only public internet addresses can be fetched."
            )
    return addresses


async def pinned_send(
    client: httpx.AsyncClient,
    method: str,
    url: httpx.URL,
    *,
    trusted: bool = False,
    stream: bool = False,
    **request: Any,
) -> httpx.Response:
    """Send one request to an address of `url`'s host checked by :func:`checked_addresses`,
    connecting to that address itself (the Host header and TLS SNI keep the name), so a second
    DNS answer cannot swap it (DNS rebinding). Tries at most three addresses."""
    port = url.port or (443 if url.scheme == "https" else 80)
    addresses = await checked_addresses(url.host, port, trusted=trusted)
    extensions = {"sni_hostname": url.host} if url.scheme == "https" else {}
    headers = {**request.pop("headers", {}), "Host": url.netloc.decode("ascii")}
    error: httpx.ConnectError | None = None
    for ip in addresses[:3]:
        built = client.build_request(
            method,
            url.copy_with(host=str(ip)),
            headers=headers,
            extensions=extensions,
            **request,
        )
        try:
            return await client.send(built, stream=stream)
        except httpx.ConnectError as exc:
            error = exc
    assert error is not None
    raise error
