"""Who pays for a request: the user a turn, a transcription or a /compact is for.

:meth:`Meter.charging` puts that user (and chat) in place for the running task
(``engine.models.CHARGE``); every request made meanwhile, in the task or the tool calls and jobs
it starts, is priced (``engine.models.Prices``) and added to the store's ``spend`` rows for the
day (UTC), and to the Prometheus cost counter. A model without a price adds its figures and no
cost; the log says so once per model (INFO: a local model is not a fault, and `relaybot chat`
shows only warnings). Nothing here ever fails a turn: a charge that cannot be
stored is logged.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass

from engine import metrics
from engine.chat._access._limits import today
from engine.models import CHARGE, NANO, Amount, Prices
from engine.store import Spent, Store
from tools.builtins import Painter, PictureRefused

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Payer:
    channel: str
    chat_id: str
    user_id: str


class Meter:
    def __init__(self, store: Store, prices: Callable[[], Prices]) -> None:
        self.store = store
        self.prices = prices  # those in force (a reload may change [pricing])
        self._unpriced: set[str] = set()

    @contextlib.contextmanager
    def charging(self, channel: str, chat_id: str, user_id: str) -> Iterator[None]:
        """Charge the requests made inside the block (and in what it starts) to `user_id`."""
        token = CHARGE.set(_Bill(self, Payer(channel, chat_id, user_id)))
        try:
            yield
        finally:
            CHARGE.reset(token)

    async def add(self, payer: Payer, model: str, amount: Amount) -> None:
        nano = self.prices().cost(model, amount)
        if nano is None and model not in self._unpriced:
            self._unpriced.add(model)
            log.info(  # not a fault (a local model costs nothing); once per model and process
                "model %s has no price ([pricing.%r] in the config): its requests are counted "
                "in tokens only, and /usage says 'not priced'",
                model,
                model,
            )
        u = amount.usage
        spent = Spent(
            model,
            1,
            u.prompt_tokens,
            u.completion_tokens,
            amount.images,
            amount.chars,
            amount.seconds,
            nano or 0,
            u.reasoning_tokens,
        )
        metrics.cost_added(model, (nano or 0) / NANO)
        try:
            await self.store.spend.add(
                payer.channel, payer.chat_id, payer.user_id, today(), model, spent
            )
        except Exception as exc:  # the answer matters more than its bill
            log.error("could not record what a request of %s cost: %s", model, exc)


def charging(
    meter: Meter | None, channel: str, chat_id: str, user_id: str
) -> contextlib.AbstractContextManager[None]:
    """`meter.charging(...)`, or nothing to charge with (no meter)."""
    if meter is None:
        return contextlib.nullcontext()
    return meter.charging(channel, chat_id, user_id)


def charged() -> Payer | None:
    """Whom the running task's requests are charged to (None: nobody)."""
    bill = CHARGE.get()
    return bill.payer if isinstance(bill, _Bill) else None


class DailyPictures:
    """A painter that keeps to `[limits] images_per_day` for whoever is charged (admins and
    work charged to nobody are not limited)."""

    def __init__(
        self,
        painter: Painter,
        store: Store,
        per_day: Callable[[], int | None],
        admins: Callable[[], Collection[str]],
    ) -> None:
        self.painter = painter
        self.store = store
        self.per_day = per_day  # the limit and the admins in force, read at each picture (a
        self.admins = admins  # reload changes them)

    async def paint(self, prompt: str, size: str) -> bytes:
        payer = charged()
        per_day = self.per_day()
        if (
            per_day is not None
            and payer is not None
            and f"{payer.channel}:{payer.user_id}" not in self.admins()
        ):
            made = (await self.store.spend.of_user(payer.channel, payer.user_id, today())).images
            if made >= per_day:
                log.info("limit: user %s is past images_per_day (%d)", payer.user_id, made)
                raise PictureRefused(
                    f"The user has had today's {per_day} pictures (the limit resets at "
                    "00:00 UTC); tell them so, and do not try again today."
                )
        return await self.painter.paint(prompt, size)


@dataclass(frozen=True, slots=True)
class _Bill:
    """The charge in place for a task: the meter and whom it charges."""

    meter: Meter
    payer: Payer

    async def __call__(self, model: str, amount: Amount) -> None:
        await self.meter.add(self.payer, model, amount)
