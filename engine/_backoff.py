"""Exponential backoff for every retry loop that waits on something outside the process.

One small class instead of a ``delay = min(delay * 2, ...)`` in each loop, so that the numbers
live in one place and each loop reads as "try; on failure ``await backoff.sleep()``; on success
``backoff.reset()``". It is a class rather than an async iterator because the loops it serves
decide for themselves when a failure counts (a 429 waits its own ``retry_after``, a success
resets) and what to log before waiting: they ask for the next delay, log it, then sleep.

Jitter is off by default: relaybot is one process talking to one platform, so there is no herd
to spread. A caller that restarts many clients at once can pass ``jitter=0.1`` (each delay is
then drawn from ±10 % around its nominal value, never above ``max_s``).
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

INITIAL_S = 1.0  # the first pause
FACTOR = 2.0  # each pause is this many times the one before
MAX_S = 30.0  # no pause is longer: a platform that comes back is noticed within this


@dataclass(slots=True)
class Backoff:
    """Pauses of `initial_s`, then `factor` times longer each, capped at `max_s`."""

    initial_s: float = INITIAL_S
    factor: float = FACTOR
    max_s: float = MAX_S
    jitter: float = 0.0  # fraction of each pause drawn at random, 0 ≤ jitter < 1
    waited_s: float = field(default=0.0, init=False)  # total slept since the last reset
    _next_s: float = field(default=0.0, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.initial_s < 0 or self.factor < 1 or self.max_s < self.initial_s:
            raise ValueError("need 0 <= initial_s <= max_s and factor >= 1")
        if not 0 <= self.jitter < 1:
            raise ValueError("jitter is a fraction: 0 <= jitter < 1")
        self._next_s = self.initial_s

    @property
    def upcoming_s(self) -> float:
        """The nominal length of the next pause (what to put in a "retrying in" log line)."""
        return self._next_s

    def delay(self) -> float:
        """The next pause, in seconds; the one after it grows."""
        nominal = self._next_s
        self._next_s = min(self._next_s * self.factor, self.max_s)
        if not self.jitter:
            return nominal
        spread = nominal * self.jitter
        return min(random.uniform(nominal - spread, nominal + spread), self.max_s)

    async def sleep(self) -> float:
        """Wait for the next pause; returns how long it was."""
        pause = self.delay()
        await asyncio.sleep(pause)
        self.waited_s += pause
        return pause

    def reset(self) -> None:
        """Start again from `initial_s` (call it after a success)."""
        self._next_s = self.initial_s
        self.waited_s = 0.0
