"""Token counts without a tokenizer: an estimate from the text, corrected by what the provider
reports.

Nothing is downloaded and no tokenizer file is needed: a message costs about one token per four
bytes of UTF-8 plus a few for its framing, an image a flat amount. That estimate is wrong by a
model-dependent factor (code, numbers and non-Latin scripts cost more per byte), so every reply's
``usage.prompt_tokens`` teaches :class:`Ratios` the provider's tokens per estimated token, per
model, and the ratio is kept in the store so a restart does not forget it. An overflow error
that states the true count (OpenAI, vLLM, llama.cpp word it so) sets the ratio at once.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

from engine.models import Image, Message, Reasoning, ToolCall, ToolSpec
from engine.store import ContextStore, TokenRatio

log = logging.getLogger(__name__)

BYTES_PER_TOKEN = 4
MESSAGE_OVERHEAD = 4  # role and framing, as chat templates add them
IMAGE_TOKENS = 1_000  # a flat price: providers charge ~85 to ~1,500 depending on size and detail
_RATIO_RANGE = (0.25, 4.0)
_SAVE_CHANGE = 0.05  # persist a ratio that moved this much since it was saved ...
_SAVE_SAMPLES = 100  # ... or after this many samples


def text_tokens(text: str) -> int:
    size = len(text) if text.isascii() else len(text.encode())
    return (size + BYTES_PER_TOKEN - 1) // BYTES_PER_TOKEN


def message_tokens(msg: Message) -> int:
    n = MESSAGE_OVERHEAD
    for part in msg.parts:
        if isinstance(part, Image):
            n += IMAGE_TOKENS
        elif isinstance(part, ToolCall):
            n += MESSAGE_OVERHEAD + text_tokens(part.name) + text_tokens(part.arguments)
        elif isinstance(part, Reasoning):  # its thoughts (an encrypted item costs about as much)
            n += text_tokens(part.summary)
        else:
            n += text_tokens(part.text)
    return n


class SpecTokens:
    """Tool definitions' estimates, computed once per definition (schemas do not change)."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[ToolSpec, int]] = {}

    def __call__(self, spec: ToolSpec) -> int:
        cached = self._cache.get(spec.name)
        if cached is None or cached[0] is not spec:
            size = text_tokens(spec.name) + text_tokens(spec.description)
            size += text_tokens(json.dumps(spec.parameters, separators=(",", ":")))
            cached = self._cache[spec.name] = (spec, size + MESSAGE_OVERHEAD)
        return cached[1]

    def total(self, specs: Sequence[ToolSpec]) -> int:
        return sum(self(s) for s in specs)


# How providers state the numbers in an overflow error.
_WINDOW_RE = re.compile(
    r"maximum context length is (\d+)|context size \((\d+) tokens\)|n_ctx\D{0,4}(\d+)"
    r"|tokens > (\d+) maximum",  # Anthropic: "prompt is too long: 210000 tokens > 200000 maximum"
    re.I,
)
_PROMPT_RE = re.compile(
    r"resulted in (\d+) tokens|\((\d+) in the messages|request \((\d+) tokens\)"
    r"|n_prompt_tokens\D{0,4}(\d+)|too long: (\d+) tokens",
    re.I,
)


@dataclass(frozen=True, slots=True)
class OverflowFacts:
    """What an overflow error revealed: the provider's window and its count of the prompt."""

    window: int | None
    prompt_tokens: int | None


def overflow_facts(message: str) -> OverflowFacts:
    return OverflowFacts(_number(_WINDOW_RE, message), _number(_PROMPT_RE, message))


def _number(pattern: re.Pattern[str], text: str) -> int | None:
    m = pattern.search(text)
    if m is None:
        return None
    return int(next(g for g in m.groups() if g is not None))


class Ratios:
    """The provider's tokens per estimated token, per model, learned and persisted."""

    def __init__(self, store: ContextStore | None) -> None:
        self.store = store
        self._known: dict[str, TokenRatio] = {}
        self._saved: dict[str, TokenRatio] = {}

    async def get(self, model: str) -> TokenRatio:
        known = self._known.get(model)
        if known is None:
            stored = await self.store.token_ratio(model) if self.store is not None else None
            known = stored or TokenRatio(model, 1.0, 0)
            self._known[model] = known
            self._saved[model] = known
        return known

    async def learn(self, model: str, estimate: int, actual: int) -> TokenRatio:
        """One reply's count: move the ratio towards actual/estimate (at once at first)."""
        current = await self.get(model)
        if estimate <= 0 or actual <= 0:
            return current
        sample = _clamp(actual / estimate)
        weight = max(0.15, 1 / (current.samples + 1))
        ratio = current.ratio + (sample - current.ratio) * weight
        updated = TokenRatio(model, ratio, current.samples + 1, current.window)
        await self._keep(updated)
        return updated

    async def overflowed(self, model: str, estimate: int, message: str) -> TokenRatio:
        """The provider refused a prompt we thought fitted: take what its error says (its count
        of this prompt gives the ratio exactly: inflating it further would refuse prompts that
        fit), or, when it states no count, assume our estimate was a fifth short."""
        current = await self.get(model)
        facts = overflow_facts(message)
        if facts.prompt_tokens and estimate > 0:
            ratio = facts.prompt_tokens / estimate
        else:
            ratio = current.ratio * 1.2
        window = current.window
        if facts.window and (window is None or facts.window < window):
            window = facts.window
        updated = TokenRatio(model, _clamp(ratio), current.samples + 1, window)
        log.warning(
            "the model %s refused a request as too long: token ratio %.2f -> %.2f%s",
            model,
            current.ratio,
            updated.ratio,
            f", window {window:,} tokens" if window else "",
        )
        await self._keep(updated, force=True)
        return updated

    async def _keep(self, ratio: TokenRatio, *, force: bool = False) -> None:
        self._known[ratio.model] = ratio
        saved = self._saved.get(ratio.model)
        due = (
            force
            or saved is None
            or saved.window != ratio.window
            or abs(ratio.ratio - saved.ratio) > _SAVE_CHANGE * saved.ratio
            or ratio.samples - saved.samples >= _SAVE_SAMPLES
        )
        if due and self.store is not None:
            self._saved[ratio.model] = ratio
            await self.store.save_token_ratio(ratio)


def _clamp(ratio: float) -> float:
    low, high = _RATIO_RANGE
    return min(high, max(low, ratio))
