"""Store URLs: which ones name PostgreSQL, and how one is shown without its password."""

from __future__ import annotations

import re

SCHEMES = ("postgresql://", "postgres://")


def is_postgres(url: str | None) -> bool:
    return bool(url) and str(url).startswith(SCHEMES)


def redact(url: str) -> str:
    """`url` without its password (``postgresql://bot:***@db/relaybot``)."""
    return re.sub(r"(://[^:/@]+):[^@/]*@", r"\1:***@", url)
