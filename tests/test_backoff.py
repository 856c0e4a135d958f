"""engine._backoff.Backoff: the pauses every retry loop takes (the loops themselves are tested
through the adapters: Bot API down at start-up, Discord unreachable, 401 and 409 while polling)."""

from __future__ import annotations

import itertools
import random

import pytest

from engine._backoff import Backoff


def test_pauses_double_up_to_the_cap_and_reset_after_a_success() -> None:
    backoff = Backoff(initial_s=1.0, factor=2.0, max_s=30.0)
    assert backoff.upcoming_s == 1.0  # what a "retrying in" log line says
    assert [backoff.delay() for _ in range(8)] == [1, 2, 4, 8, 16, 30, 30, 30]
    backoff.reset()
    assert backoff.delay() == 1.0


def test_defaults_are_the_projects_numbers() -> None:
    assert list(itertools.islice(iter(Backoff().delay, None), 7)) == [1, 2, 4, 8, 16, 30, 30]


def test_jitter_stays_within_its_fraction_and_under_the_cap() -> None:
    random.seed(7)
    backoff = Backoff(initial_s=10.0, factor=1.0, max_s=10.5, jitter=0.2)
    pauses = [backoff.delay() for _ in range(200)]
    assert all(8.0 <= p <= 10.5 for p in pauses)
    assert len(set(pauses)) > 100  # drawn, not fixed


async def test_sleep_waits_the_pause_and_counts_the_time_waited() -> None:
    backoff = Backoff(initial_s=0.001, factor=3.0, max_s=0.05)
    assert await backoff.sleep() == 0.001
    assert await backoff.sleep() == pytest.approx(0.003)
    assert backoff.waited_s == pytest.approx(0.004)
    backoff.reset()
    assert backoff.waited_s == 0.0 and backoff.upcoming_s == 0.001


@pytest.mark.parametrize(
    "kwargs",
    [{"initial_s": -1}, {"factor": 0.5}, {"initial_s": 5, "max_s": 1}, {"jitter": 1.0}],
)
def test_nonsense_is_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Backoff(**kwargs)
