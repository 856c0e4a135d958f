"""The engine's clocks: every part reads time here, never from `time` itself, so which clock a
figure follows is said where it is read (tests/test_layout.py holds it): :func:`wall` (unix
time), :func:`monotonic`, and :func:`perf` (a short duration, for the metrics). Wall-clock time
for what is due at a wall-clock time (scheduled tasks) comes injectable, as a :class:`Clock`.

Which clock for what: what is due at a moment of the calendar (a scheduled task, a reminder
whose time the user was told, a stored row's age) follows the wall clock (unix time); a length
of time measured inside the process (a confirmation's timeout, a lease, a backoff, a watchdog)
follows the monotonic clock, which no NTP correction or suspended laptop moves.

The sleep is cut into naps so that a jump of the wall clock is noticed within a minute, and
sooner: :meth:`Clock.jumped`, asked every few seconds by the daemon's expiry watch, compares
the two clocks, wakes whoever sleeps until a wall time, and the watch says so in one log line
(:func:`noticed_jump`). Tests pass their own :class:`Clock` and move it instead of waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Protocol

log = logging.getLogger(__name__)


def wall() -> float:
    """Unix time: what is due at a calendar moment, a stored row's age."""
    return time.time()


def monotonic() -> float:
    """A length of time inside the process: timeouts, leases, backoffs, a turn's duration."""
    return time.monotonic()


def perf() -> float:
    """A short duration measured for the metrics (a store call)."""
    return time.perf_counter()


MAX_NAP_S = 60.0
JUMP_S = 2.0  # the wall clock moved this far apart from the monotonic one: a jump, not a drift


class Clock(Protocol):
    def now(self) -> float:
        """Unix time."""
        ...

    async def sleep_until(self, t: float) -> None:
        """Return at unix time `t`, or earlier: callers look at :meth:`now` again."""
        ...

    def jumped(self) -> float:
        """How far the wall clock jumped since the last call (seconds, negative: back; 0.0:
        no jump); a jump wakes whoever sleeps until a wall time."""
        ...


class SystemClock:
    def __init__(self) -> None:
        self._offset = time.time() - time.monotonic()
        self._wake = asyncio.Event()

    def now(self) -> float:
        return time.time()

    async def sleep_until(self, t: float) -> None:
        wake = self._wake
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), min(max(t - time.time(), 0.0), MAX_NAP_S))

    def jumped(self) -> float:
        offset = time.time() - time.monotonic()
        jump, self._offset = offset - self._offset, offset  # a slow drift is followed quietly
        if abs(jump) < JUMP_S:
            return 0.0
        self._wake.set()
        self._wake = asyncio.Event()
        return jump


def noticed_jump(clock: Clock) -> float:
    """Ask `clock` whether the wall clock jumped; say so once per jump (the jump, or 0.0)."""
    jump = clock.jumped()
    if jump:
        log.warning(
            "the wall clock jumped %s by %.0f s: scheduled tasks and reminders follow it (each "
            "runs once), confirmation timeouts and leases keep their length",
            "forward" if jump > 0 else "back",
            abs(jump),
        )
    return jump
