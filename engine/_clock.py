"""Wall-clock time for what is due at a wall-clock time (scheduled tasks), injectable.

Scheduled tasks are due at moments of the calendar, so they follow the wall clock (unix time),
not the event loop's monotonic one; the sleep is cut into naps so that a jump of the wall clock
(a suspended laptop, an NTP correction) is noticed within a minute. Tests pass their own
:class:`Clock` and move it forward instead of waiting.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

MAX_NAP_S = 60.0


class Clock(Protocol):
    def now(self) -> float:
        """Unix time."""
        ...

    async def sleep_until(self, t: float) -> None:
        """Return at unix time `t`, or earlier: callers look at :meth:`now` again."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    async def sleep_until(self, t: float) -> None:
        await asyncio.sleep(min(max(t - time.time(), 0.0), MAX_NAP_S))
