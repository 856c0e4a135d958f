"""Folding old turns into the running summary, for the context budget (context/_budget.py).

When a request would carry more than the budget (or the loaded history is at
``history_limit``), the budget asks :meth:`Folder.fold_for` to fold the oldest whole turns
until what is left takes at most :data:`LOW_WATER` of the budget, so a fold buys room for many
turns instead of one. Turns are folded a chunk at a time, each chunk one summary request that
fits the window (context/_compaction.py words it), and each new summary is stored at once.

A summary request has its own output budget, sized for the words it asks for: the model's
configured ``max_tokens`` is meant for answers (a local setup may cap them at 150 tokens while
a summary may run to 200 words). A summary cut by that limit is asked again for half the words;
one still cut is not stored: its turns stay as they are, sent cut down or refused as too long,
rather than remembered as a fragment.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.context._compaction import (
    SUMMARY_PROMPT,
    chunks,
    cut,
    summarise,
    transcript,
    turn_starts,
)
from engine.context._tokens import Ratios, message_tokens, text_tokens
from engine.models import FinishReason, Message, Model, Provenance, Trust, Usage
from engine.store import ContextStore, Summary
from tools.errors import ContextOverflow

log = logging.getLogger(__name__)

LOW_WATER = 0.6  # a fold leaves at most this share of the budget in use
MIN_RESULT_CHARS = 200  # how far a tool result may be cut
WORDS_PER_TOKEN = 0.6  # a summary of `cap` estimated tokens is asked for 0.6 * cap words
OUTPUT_PER_WORD = 2  # a summary's output budget: two tokens per word asked, plus a margin
OUTPUT_MARGIN = 64


@dataclass(slots=True)
class Window:
    """A conversation as one turn sees it: its summary, and the store ids of the messages loaded
    with it (the first ``len(ids)`` of the turn's history). ``conversation_id`` None: nothing is
    stored (a loop used without a store)."""

    conversation_id: int | None = None
    summary: Summary | None = None
    ids: list[int] = field(default_factory=list)


class SummaryCut(Exception):
    """The model's summary was cut by the length limit twice: it is not stored."""


def summary_cap(limit: float) -> int:
    """The summary's size in estimated tokens: an eighth of the budget, within bounds."""
    return int(min(1_500, max(150, limit / 8)))


def summary_output(words: int, ratio: float) -> int:
    """The output budget of a summary request asking for at most `words` words."""
    return int(words * OUTPUT_PER_WORD * max(1.0, ratio)) + OUTPUT_MARGIN


class Folder:
    """Folds turns into a conversation's summary (the store keeps it, and whatever copy of it
    it holds in memory: engine/store/_context.py)."""

    def __init__(
        self,
        store: ContextStore | None,
        ratios: Ratios,
        *,
        tool_result_chars: int,
        history_limit: int,
    ) -> None:
        self.store = store
        self.ratios = ratios
        self.tool_result_chars = tool_result_chars
        self.history_limit = history_limit
        self.summary_requests = 0

    async def fold_for(
        self,
        model: Model,
        window: Window,
        history: list[Message],
        shown: Sequence[Message],
        fixed: int,
        limit: float,
    ) -> Usage:
        """Fold the oldest turns until what is left takes at most LOW_WATER of the budget."""
        starts = turn_starts(history)
        if not starts:  # no user message: all of it is the current turn
            return Usage()
        foldable = len(history) if window.conversation_id is None else len(window.ids)
        bounds = [b for b in starts if 0 < b <= foldable]
        if not bounds:
            return Usage()
        target = LOW_WATER * limit - fixed - summary_cap(limit)
        count_target = LOW_WATER * self.history_limit
        sizes = [message_tokens(m) for m in shown]
        rest = sum(sizes)
        end = 0
        for bound in bounds:
            if end and rest <= target and len(history) - end <= count_target:
                break
            rest -= sum(sizes[end:bound])
            end = bound
        return await self.fold(model, window, history, end, limit)

    async def fold(
        self, model: Model, window: Window, history: list[Message], n: int, limit: float
    ) -> Usage:
        """Fold history[:n] (whole turns) into the summary, one request per chunk that fits;
        returns what the summary requests cost."""
        cap = summary_cap(limit)
        chunk_chars = int(max(2_000, (limit - text_tokens(SUMMARY_PROMPT) - 2 * cap) * 4))
        result_chars = max(MIN_RESULT_CHARS, self.tool_result_chars // 2)
        ids = window.ids
        folded = 0
        spent = Usage()
        try:
            for start, end in chunks(history[:n], chunk_chars, result_chars):
                part = cut(transcript(history[start:end], result_chars), chunk_chars)
                try:
                    text, usage = await self._summarise(model, window, part, cap)
                except SummaryCut as exc:
                    spent += exc.args[0]
                    break
                spent += usage
                first = window.summary.first_id if window.summary else _id(ids, start)
                sources = _sources(window.summary, history[start:end])
                last = _id(ids, end - 1)
                summary = Summary(window.conversation_id or 0, text, first, last, sources)
                if self.store is not None and window.conversation_id is not None:
                    await self.store.save_summary(summary)
                window.summary = summary
                folded = end
        finally:  # what was folded leaves the turn's history, even if a later chunk failed
            del history[:folded]
            del ids[:folded]
            if folded:
                log.info(
                    "folded %d messages of conversation %s into its summary",
                    folded,
                    window.conversation_id,
                )
        return spent

    async def _summarise(
        self, model: Model, window: Window, part: str, cap: int
    ) -> tuple[str, Usage]:
        """The new summary and what asking cost; SummaryCut when it comes back cut twice."""
        previous = window.summary.text if window.summary else None
        ratio = (await self.ratios.get(model.name)).ratio
        words = int(cap * WORDS_PER_TOKEN)
        spent = Usage()
        for attempt in range(2):
            output = summary_output(words, ratio)
            try:
                text, request, reply = await summarise(
                    model, previous, part, words=words, max_chars=cap * 4, max_tokens=output
                )
            except ContextOverflow as exc:  # our estimate of the part was short: learn, halve it
                estimate = text_tokens(part) + text_tokens(SUMMARY_PROMPT)
                await self.ratios.overflowed(model.name, estimate, str(exc))
                part = cut(part, len(part) // 2)
                text, request, reply = await summarise(
                    model, previous, part, words=words, max_chars=cap * 4, max_tokens=output
                )
            self.summary_requests += 1
            spent += reply.usage
            if reply.usage.prompt_tokens > 0:
                estimate = text_tokens(request.system) + sum(
                    message_tokens(m) for m in request.messages
                )
                await self.ratios.learn(model.name, estimate, reply.usage.prompt_tokens)
            if reply.finish_reason is not FinishReason.LENGTH:
                return text, spent
            log.warning(
                "the summary of conversation %s was cut by the length limit (%d tokens)%s",
                window.conversation_id,
                output,
                "; asking for a shorter one" if attempt == 0 else "; it is not stored",
            )
            words = max(30, words // 2)
        raise SummaryCut(spent)


def _id(ids: list[int], i: int) -> int:
    """The store id of the i-th loaded message (0 for one the store does not have)."""
    return ids[i] if 0 <= i < len(ids) else 0


def _sources(summary: Summary | None, folded: Sequence[Message]) -> tuple[Provenance, ...]:
    """What a new summary is made of, but the trusted: a summary of untrusted text is untrusted
    (and of a member's words, theirs), so its taint survives compaction."""
    sources = dict.fromkeys(summary.sources if summary is not None else ())
    kept = [m.provenance for m in folded if m.provenance.trust is not Trust.TRUSTED]
    sources.update(dict.fromkeys(kept))
    return tuple(sources)
