"""Failover: one :class:`Model` made of a primary and its fallbacks, tried in order.

A model that fails with something another model may not share (unreachable, timed out, 5xx or
overloaded: ModelUnavailable; rate limited past its own retries: ModelRateLimited) is set aside
for `cooldown_s` and the request goes to the next one, so the turn goes on without the user
noticing. After the cool-down the model is tried first again. Each model's own retries have
already run when it fails, so failover adds no retries of its own.

What would follow the request to any model is raised at once: a rejected key (the operator's
to fix) and a request too long for the window (the context budget's). So is a failure after a
streamed answer has begun to show, because the user would see a second beginning.

The log says once that a model is set aside, with the model taking over, and once that it
answers again; a model still failing when its cool-down ends stays quiet.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine._clock import monotonic
from engine.models._stream import emit
from engine.models._types import Model, ModelRequest, ModelResponse, OnText
from tools.errors import ModelRateLimited, ModelUnavailable

log = logging.getLogger(__name__)

FAILOVER = (ModelUnavailable, ModelRateLimited)


@dataclass(slots=True)
class _Entry:
    model: Model
    down_until: float = 0.0  # set aside until then (the clock's time)
    failing: bool = False  # failed its last request


class FailoverModel:
    """Tries `models` in order; a model that failed over is skipped for `cooldown_s`."""

    def __init__(
        self,
        models: Sequence[Model],
        *,
        cooldown_s: float = 300.0,
        clock: Callable[[], float] = monotonic,
    ) -> None:
        if not models:
            raise ValueError("FailoverModel needs at least one model")
        self._entries = [_Entry(m) for m in models]
        self.cooldown_s = cooldown_s
        self._clock = clock
        self.name = models[0].name

    @property
    def models(self) -> list[Model]:
        return [e.model for e in self._entries]

    async def warm_up(self) -> None:
        for entry in self._entries:
            await entry.model.warm_up()

    async def aclose(self) -> None:
        for entry in self._entries:
            await entry.model.aclose()

    async def complete(self, request: ModelRequest, on_text: OnText | None = None) -> ModelResponse:
        shown = False

        async def relay(delta: str) -> None:
            nonlocal shown
            shown = True
            await emit(on_text, delta)

        now = self._clock()
        ready = [e for e in self._entries if e.down_until <= now]
        candidates = ready or self._entries  # all set aside: better a try than no answer
        for i, entry in enumerate(candidates):
            try:
                reply = await entry.model.complete(request, relay if on_text else None)
            except FAILOVER as exc:
                last = i == len(candidates) - 1
                self._set_aside(entry, exc, None if last else candidates[i + 1].model)
                if last or shown:
                    raise
                continue
            if entry.failing:
                entry.failing = False
                log.info("model %s answers again", entry.model.name)
            entry.down_until = 0.0
            return reply
        raise AssertionError("unreachable")

    def _set_aside(self, entry: _Entry, exc: Exception, next_model: Model | None) -> None:
        entry.down_until = self._clock() + self.cooldown_s
        if entry.failing:
            log.debug("model %s still fails: %s", entry.model.name, exc)
            return
        entry.failing = True
        if next_model is None:
            log.warning("model %s failed: %s", entry.model.name, exc)
        else:
            log.warning(
                "model %s failed (%s); requests go to %s, %s is tried again in %.0f s",
                entry.model.name,
                exc,
                next_model.name,
                entry.model.name,
                self.cooldown_s,
            )
