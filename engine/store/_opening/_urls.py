"""Store URLs: which ones name PostgreSQL, and how one is shown without its passwords."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit

SCHEMES = ("postgresql://", "postgres://")


def is_postgres(url: str | None) -> bool:
    return bool(url) and str(url).startswith(SCHEMES)


def passwords(url: str) -> list[str]:
    """The passwords `url` holds: after its user name, and as ``password=`` parameters (libpq
    takes both)."""
    parts = urlsplit(url)
    found = [parts.password] if parts.password else []
    return found + [v for k, v in parse_qsl(parts.query) if k == "password" and v]


def redact(url: str) -> str:
    """`url` without its passwords (``postgresql://bot:***@db/relaybot?password=***``)."""
    url = re.sub(r"(://[^:/@]+):[^@/]*@", r"\1:***@", url)
    return re.sub(r"([?&]password=)[^&#]*", r"\1***", url)
