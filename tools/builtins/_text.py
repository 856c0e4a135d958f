"""Keeping tool results short: one truncation marker, the same everywhere."""

from __future__ import annotations


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[… truncated: {len(text) - limit} more characters not shown]"
