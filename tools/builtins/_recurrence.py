"""When a scheduled task runs: a cron expression read in a time zone, or a fixed interval.

Cron expressions are parsed and stepped by cronsim (the parser behind Healthchecks.io): no
dependencies of its own, a documented answer for the hours a daylight-saving change skips or
repeats, errors that say which field is wrong, and `explain()` for a sentence a person reads.
Only the classic five fields (minute hour day month weekday) are taken: a task runs at most once
a minute. An interval is stepped from the schedule's own due times, so it never drifts.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

CRON = "cron"
INTERVAL = "interval"
_SAMPLE = 100  # occurrences looked at to find a cron expression's shortest gap
_COUNT_CAP = 10_000  # missed occurrences counted one by one, at most


class BadRecurrence(ValueError):
    """The expression, interval or time zone cannot be used; the message says why."""


@dataclass(frozen=True, slots=True)
class Step:
    """Where a schedule stands at some moment, from a due time at or before it."""

    latest: float  # the last due time at or before the moment
    missed: int  # due times before `latest` that passed too (at least; counting stops at a cap)
    following: float  # the first due time after the moment


@dataclass(frozen=True, slots=True)
class Recurrence:
    kind: str  # CRON or INTERVAL
    spec: str  # the cron expression, or the interval in whole seconds
    timezone: str = "UTC"

    @classmethod
    def cron(cls, expression: str, timezone: str) -> Recurrence:
        expression = " ".join(expression.split())
        if len(expression.split(" ")) != 5:
            raise BadRecurrence(
                f"{expression!r} is not a five-field cron expression (minute hour day month "
                "weekday), e.g. '0 8 * * 1-5' for weekdays at 8:00"
            )
        made = cls(CRON, expression, zone(timezone).key)
        try:
            CronSim(expression, made._local(0))
        except CronSimError as exc:
            raise BadRecurrence(f"cannot read the cron expression {expression!r}: {exc}") from None
        return made

    @classmethod
    def daily(cls, at: str, weekdays: list[int], timezone: str) -> Recurrence:
        """At `at` ("HH:MM") on `weekdays` (0 = Sunday ... 6 = Saturday; empty: every day)."""
        hour, _, minute = at.partition(":")
        if not (hour.isdigit() and minute.isdigit() and int(hour) < 24 and int(minute) < 60):
            raise BadRecurrence(f"{at!r} is not a time of day; use HH:MM, e.g. '07:30'")
        days = ",".join(str(d) for d in sorted(set(weekdays))) or "*"
        return cls.cron(f"{int(minute)} {int(hour)} * * {days}", timezone)

    @classmethod
    def every(cls, seconds: float, timezone: str = "UTC") -> Recurrence:
        if seconds < 1:
            raise BadRecurrence("an interval must be at least one second")
        return cls(INTERVAL, str(round(seconds)), zone(timezone).key)

    # -- stepping -------------------------------------------------------------------------

    def first_after(self, t: float) -> float:
        """The first due time after `t` (for an interval: `t` plus the interval)."""
        if self.kind == INTERVAL:
            return t + self._seconds
        return next(CronSim(self.spec, self._local(t))).timestamp()

    def step(self, due: float, now: float) -> Step:
        """From a due time `due` <= `now`: the latest due time at or before `now`, how many
        passed before it, and the next one after `now`."""
        if self.kind == INTERVAL:
            n = math.floor((now - due) / self._seconds)
            latest = due + n * self._seconds
            return Step(latest, n, latest + self._seconds)
        latest = next(CronSim(self.spec, self._local(now + 0.001), reverse=True)).timestamp()
        missed = 0
        if latest > due:
            missed = 1  # `due` itself, then those between it and `latest`
            for t in CronSim(self.spec, self._local(due)):
                if t.timestamp() >= latest or missed >= _COUNT_CAP:
                    break
                missed += 1
        return Step(latest, missed, self.first_after(now))

    def shortest_gap(self, after: float) -> float:
        """The shortest time between two runs (for a cron expression: among the next ones)."""
        if self.kind == INTERVAL:
            return self._seconds
        times = CronSim(self.spec, self._local(after))
        stamps = [next(times).timestamp() for _ in range(_SAMPLE)]
        return min(b - a for a, b in itertools.pairwise(stamps))

    # -- words ----------------------------------------------------------------------------

    def describe(self) -> str:
        """ "Every 5 minutes", "At 08:00 on Monday through Friday (Europe/Paris)"."""
        if self.kind == INTERVAL:
            return f"Every {duration(self._seconds)}"
        try:
            said = CronSim(self.spec, self._local(0)).explain()
        except Exception:  # explain() does not cover every expression cronsim runs
            said = f"cron {self.spec}"
        return f"{said} ({self.timezone})"

    def local_time(self, t: float) -> str:
        """`t` as the schedule's people read it: "Mon 2026-03-02 08:00 CET"."""
        return f"{self._local(t):%a %Y-%m-%d %H:%M %Z}"

    @property
    def _seconds(self) -> float:
        return float(self.spec)

    def _local(self, t: float) -> datetime:
        return datetime.fromtimestamp(t, ZoneInfo(self.timezone))


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError):
        raise BadRecurrence(
            f"unknown time zone {name!r}; use an IANA name such as 'Europe/Berlin', "
            "'America/New_York' or 'UTC'"
        ) from None


def duration(seconds: float) -> str:
    """A span in the largest whole unit: "5 minutes", "2 hours", "90 seconds"."""
    s = round(seconds)
    for unit, size in (("day", 86_400), ("hour", 3600), ("minute", 60)):
        if s >= size and s % size == 0:
            n = s // size
            return f"{n} {unit}" if n == 1 else f"{n} {unit}s"
    return f"{s} seconds" if s != 1 else "1 second"
