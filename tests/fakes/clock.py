"""A wall clock that tests move by hand, for what is due at a time (scheduled tasks).

    clock = ManualClock()
    async with App(config, channels=[...], clock=clock) as app:
        ...
        await clock.advance(60)   # whatever was due within the minute wakes now

It implements engine.Clock: `sleep_until` returns once the clock has been moved to (or past) the
time asked for, so nothing waits for real minutes and no test sleeps to synchronise.
`naps` counts the calls of `sleep_until`; `await clock.napped(n)` returns once there were n,
so a test knows something is waiting for the clock before it moves it. `advance` is time passing
(both clocks move); `jump` moves the wall clock alone (an NTP correction), which `jumped` reports.
"""

from __future__ import annotations

import asyncio
import time


class ManualClock:
    def __init__(self, start: float | None = None) -> None:
        self.t = time.time() if start is None else start
        self._moved = asyncio.Condition()
        self.naps = 0
        self._jump = 0.0

    def now(self) -> float:
        return self.t

    async def sleep_until(self, t: float) -> None:
        async with self._moved:
            self.naps += 1
            self._moved.notify_all()
            await self._moved.wait_for(lambda: self.t >= t)

    async def napped(self, count: int, timeout: float = 5.0) -> None:
        """Return once `sleep_until` has been called `count` times in all."""
        async with asyncio.timeout(timeout), self._moved:
            await self._moved.wait_for(lambda: self.naps >= count)

    async def advance(self, seconds: float) -> None:
        self.t += seconds
        async with self._moved:
            self._moved.notify_all()

    async def jump(self, seconds: float) -> None:
        """The wall clock alone moves (forward or back): the next `jumped` reports it."""
        self._jump += seconds
        await self.advance(seconds)

    def jumped(self) -> float:
        jump, self._jump = self._jump, 0.0
        return jump
