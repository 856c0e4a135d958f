"""The SSRF guard for fetch_url: which addresses a fetch may reach."""

from __future__ import annotations

import asyncio
import ipaddress
import socket

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


def refusal(ip: IPAddress) -> str | None:
    """Why `ip` must not be fetched ("a private address"), or None when it is public."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
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
