"""What every `relaybot doctor` check returns (:class:`Check`, :class:`Status`) and the one HTTP
helper the platform checks share. A leaf: bot/doctor.py, bot/_doctor_llm.py and
bot/_doctor_receiving.py import it, and it imports none of them."""

from __future__ import annotations

import enum
from dataclasses import dataclass

import httpx


class Status(enum.StrEnum):
    OK = "OK"
    WARNING = "WARNING"
    FAILED = "FAILED"


@dataclass(slots=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""


async def get(url: str, headers: dict[str, str] | None = None) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as http:
        return await http.get(url, headers=headers)
