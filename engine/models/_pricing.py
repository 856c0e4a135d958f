"""What a request costs: a price per model, and who is charged for the requests made now.

A :class:`Price` is in US dollars as providers list them: per million tokens (input, cached
input, cache writes, output), per picture made, per million characters spoken, per minute of
audio transcribed. :data:`BUILTIN_PRICES` holds the well-known models' published prices; the
``[pricing."MODEL"]`` tables of the config override or add to them (:class:`Prices`). A name a
server reports with a suffix (``gpt-4o-mini-2024-07-18``, ``claude-sonnet-4-5-20250929``) takes
the price of its longest listed prefix. A model without a price costs nothing here: its tokens
are still counted, and ``relaybot doctor`` says it has none.

Costs are integers of nano-dollars (10⁻⁹ USD), so sums are exact on every backend.

Whoever is charged is the :data:`CHARGE` of the running task (a context variable, so the tool
calls and background work a turn starts are charged to it too): the engine sets it for a turn, a
voice note's transcription, a /compact. Every request through the model layer calls
:func:`spend` with what it used; without a charge in place nothing is recorded.
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from engine.models._types import Usage

NANO = 1_000_000_000  # nano-dollars in a dollar
_SUFFIX_MARKS = "-:@/_."  # what may follow a listed name in a server's name for the model


@dataclass(frozen=True, slots=True)
class Price:
    """A model's prices in USD; None: the model is not charged for that (or not used for it)."""

    input_per_mtok: float | None = None
    output_per_mtok: float | None = None
    cached_input_per_mtok: float | None = None  # None: as input
    cache_write_per_mtok: float | None = None  # None: as input
    per_image: float | None = None
    per_mchar: float | None = None  # speech: per million characters
    per_minute: float | None = None  # transcription: per minute of audio


@dataclass(frozen=True, slots=True)
class Amount:
    """What one request used: tokens, pictures made, characters spoken, seconds heard."""

    usage: Usage = field(default_factory=Usage)
    images: int = 0
    chars: int = 0
    seconds: float = 0.0


def _tok(tokens: int, per_mtok: float | None) -> float:
    return tokens * (per_mtok or 0.0) * 1000  # per million tokens -> nano-dollars per token


def cost_nano(price: Price, amount: Amount) -> int:
    """What `amount` costs at `price`, in nano-dollars (rounded up to a whole one)."""
    u = amount.usage
    cached = min(u.cached_tokens, u.prompt_tokens)
    written = min(u.cache_write_tokens, u.prompt_tokens - cached)
    fresh = u.prompt_tokens - cached - written
    nano = (
        _tok(fresh, price.input_per_mtok)
        + _tok(cached, _or(price.cached_input_per_mtok, price.input_per_mtok))
        + _tok(written, _or(price.cache_write_per_mtok, price.input_per_mtok))
        + _tok(u.completion_tokens, price.output_per_mtok)
        + amount.images * (price.per_image or 0.0) * NANO
        + amount.chars * (price.per_mchar or 0.0) * 1000
        + amount.seconds / 60 * (price.per_minute or 0.0) * NANO
    )
    return math.ceil(nano - 1e-6)  # a float's last digit never adds a nano-dollar


def _or(value: float | None, default: float | None) -> float | None:
    return default if value is None else value


def dollars(nano: int) -> str:
    """A cost for people: "$0.0042", "$1.27"; tiny amounts keep two significant digits."""
    usd = nano / NANO
    if usd == 0:
        return "$0.00"
    if usd >= 0.1:
        return f"${usd:,.2f}"
    return f"${usd:.{max(2, 1 - math.floor(math.log10(usd)))}f}"


# Published prices (USD) of well-known models, as listed by their providers when this release was
# made. The config's [pricing."MODEL"] tables take precedence: check them against your bill.
BUILTIN_PRICES: Mapping[str, Price] = {
    # OpenAI chat models: per million tokens (input, cached input, output)
    "gpt-4o": Price(2.50, 10.00, 1.25),
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "gpt-4.1": Price(2.00, 8.00, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "gpt-5": Price(1.25, 10.00, 0.125),
    "gpt-5-mini": Price(0.25, 2.00, 0.025),
    "gpt-5-nano": Price(0.05, 0.40, 0.005),
    "o3": Price(2.00, 8.00, 0.50),
    "o4-mini": Price(1.10, 4.40, 0.275),
    # Anthropic: cache reads at a tenth of input, cache writes (5 minutes) at 1.25 times it
    "claude-opus-4-1": Price(15.00, 75.00, 1.50, 18.75),
    "claude-opus-4": Price(15.00, 75.00, 1.50, 18.75),
    "claude-sonnet-4-5": Price(3.00, 15.00, 0.30, 3.75),
    "claude-sonnet-4": Price(3.00, 15.00, 0.30, 3.75),
    "claude-haiku-4-5": Price(1.00, 5.00, 0.10, 1.25),
    "claude-3-5-haiku": Price(0.80, 4.00, 0.08, 1.00),
    # transcription, speech and pictures
    "whisper-1": Price(per_minute=0.006),
    "gpt-4o-transcribe": Price(per_minute=0.006),
    "gpt-4o-mini-transcribe": Price(per_minute=0.003),
    "tts-1": Price(per_mchar=15.00),
    "tts-1-hd": Price(per_mchar=30.00),
    "dall-e-2": Price(per_image=0.020),  # 1024x1024
    "dall-e-3": Price(per_image=0.040),  # 1024x1024, standard quality
    "gpt-image-1": Price(per_image=0.042),  # 1024x1024, medium quality
}


class Prices:
    """The built-in table with the config's prices over it."""

    def __init__(self, configured: Mapping[str, Price] | None = None, *, builtin: bool = True):
        self._table: dict[str, Price] = dict(BUILTIN_PRICES) if builtin else {}
        self._table.update(configured or {})

    def of(self, model: str) -> Price | None:
        """`model`'s price: its own, else its longest listed prefix's; None: it has none."""
        if (price := self._table.get(model)) is not None:
            return price
        best = ""
        for name in self._table:
            if (
                len(name) > len(best)
                and model.startswith(name)
                and model[len(name)] in _SUFFIX_MARKS
            ):
                best = name
        return self._table[best] if best else None

    def cost(self, model: str, amount: Amount) -> int | None:
        """What `amount` of `model` costs in nano-dollars; None when it has no price."""
        price = self.of(model)
        return None if price is None else cost_nano(price, amount)


class Charge(Protocol):
    """Records what a request used, for whoever the running task is charged to."""

    async def __call__(self, model: str, amount: Amount) -> None: ...


CHARGE: contextvars.ContextVar[Charge | None] = contextvars.ContextVar(
    "relaybot_charge", default=None
)


async def spend(model: str, amount: Amount) -> None:
    """Charge `amount` of `model` to whoever is charged now (nothing when nobody is)."""
    charge = CHARGE.get()
    if charge is not None:
        await charge(model, amount)
