"""The context budget: every request fits the model's window, however old the chat.

Before each request the loop asks :meth:`ContextBudget.fit` for what to send. The system prompt,
the tool definitions and the running summary count first; then the turns, newest first: the
last ``keep_recent_turns`` whole, older ones with their tool results cut to
``tool_result_chars``, or to a sixtieth of the budget when that is less (in a small window an
older result at 2,000 characters would fill it in a few turns and make every other turn a
fold). When that is over the budget (or the loaded history is at ``history_limit``), the oldest
turns are folded into the summary (context/_folding.py). A turn whose own tool results outgrow
the budget has its earlier results cut, the oldest first. Before anything is folded, the recent
turns' results are cut too: cutting costs nothing, a fold costs a request. Only what is sent
changes: every message stays in the store. The request carries the room kept for the answer
(``output_room``), the cap of a model configured without one.

Sizes are estimates (engine/context/_tokens.py) times the ratio learned for the model from the
provider's own counts, compared with the budget in the provider's tokens. When the provider
still refuses a request as too long, the loop calls :meth:`ContextBudget.overflowed` (take the
count and window its error states) and fits again with ``harder=True`` (a smaller budget, no
recent turns spared), once. A window that could not be asked at start-up (the server was down)
is asked again once the server answers.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Sequence

from engine.context._compaction import cut_result, turn_starts, with_summary
from engine.context._folding import MIN_RESULT_CHARS, Folder, Window
from engine.context._prompt import for_model
from engine.context._sizes import Compacted, ContextSettings, Fitted, budget_for, output_for
from engine.context._tokens import (
    Ratios,
    SpecTokens,
    message_tokens,
    overflow_facts,
    text_tokens,
)
from engine.context._window import DEFAULT_WINDOW, WindowInfo, WindowSource
from engine.models import Message, Model, ModelRequest, Role, ToolSpec, Usage
from engine.store import ContextStore
from tools.errors import ContextOverflow, PromptTooLarge

log = logging.getLogger(__name__)

HARDER = 0.8  # the share of the budget a retry after an overflow plans with
RESULT_SHARE = 60  # an older turn's tool result takes at most 1/60 of the budget


class ContextBudget:
    def __init__(
        self,
        model: Model,
        store: ContextStore | None,
        settings: ContextSettings,
    ):
        self.model = model
        self.store = store
        self.settings = settings
        self.ratios = Ratios(store)
        self.specs = SpecTokens()
        self.folder = Folder(
            store,
            self.ratios,
            tool_result_chars=settings.tool_result_chars,
            history_limit=settings.history_limit,
        )
        self._windows: dict[str, asyncio.Future[WindowInfo]] = {}
        self._warned: set[frozenset[str]] = set()
        self._counted: set[str] = set()  # models whose last overflow stated its count

    @property
    def summary_requests(self) -> int:
        return self.folder.summary_requests

    # -- the window and the budget --------------------------------------------------------

    def discover_soon(self, model: str | None = None) -> None:
        """Start finding a model's window now, so the first turn does not wait for it."""
        name = model or self.model.name
        if name not in self._windows:
            self._windows[name] = asyncio.ensure_future(self._discover(name))

    async def window(self, model: str | None = None) -> WindowInfo:
        name = model or self.model.name
        self.discover_soon(name)
        return await asyncio.shield(self._windows[name])

    async def _discover(self, model: str) -> WindowInfo:
        s = self.settings
        if s.window is not None and model == self.model.name:
            info = WindowInfo(s.window, WindowSource.CONFIG, "set in [llm] context_window")
        elif s.discover is not None:
            info = await s.discover(model)
        else:
            info = WindowInfo(DEFAULT_WINDOW, WindowSource.DEFAULT, "nothing configured")
        log.info(
            "context window of %s: %s tokens (%s); budget %s tokens per request",
            model,
            f"{info.tokens:,}",
            info.why,
            f"{budget_for(info.tokens, s):,}",
        )
        return info

    def _server_back(self, model: str) -> None:
        """The server answered: a window it could not be asked for is asked again."""
        found = self._windows.get(model)
        if found is not None and found.done() and not found.cancelled():
            if found.exception() is None and not found.result().reached:
                log.info("the model endpoint answers again: asking it for %s's window", model)
                del self._windows[model]

    async def _tokens(self, model: str) -> int:
        """The window planned with: discovered, or the smaller one an overflow revealed."""
        info = await self.window(model)
        learned = (await self.ratios.get(model)).window
        return min(info.tokens, learned or info.tokens)

    async def budget(self, model: str | None = None) -> int:
        return budget_for(await self._tokens(model or self.model.name), self.settings)

    # -- loading, fitting, learning -------------------------------------------------------

    async def load(self, conversation_id: int) -> tuple[Window, list[Message]]:
        """The conversation's summary and the messages after it. Up to twice history_limit are
        loaded, so messages past the limit are folded into the summary, not silently dropped."""
        assert self.store is not None
        summary = await self.store.summary(conversation_id)  # kept in memory by the store
        after = summary.last_id if summary is not None else 0
        limit = 2 * self.settings.history_limit
        rows = await self.store.messages_after(conversation_id, after, limit)
        return Window(conversation_id, summary, [i for i, _ in rows]), [m for _, m in rows]

    async def fit(
        self,
        window: Window,
        history: list[Message],
        system: str,
        tools: Sequence[ToolSpec],
        *,
        model: Model | None = None,
        stream: bool = False,
        harder: bool = False,
    ) -> Fitted:
        """The request to send to `model` (the default one when None), within its budget. Folds
        old turns into the summary when needed (with `model`'s help): `history` and `window`
        then lose the folded messages (they stay in the store)."""
        model = model or self.model
        window_tokens = await self._tokens(model.name)
        budget = budget_for(window_tokens, self.settings)
        if harder and model.name not in self._counted:  # an error that stated its count: exact
            budget = int(budget * HARDER)
        ratio = (await self.ratios.get(model.name)).ratio
        limit = budget / ratio  # the budget in estimated tokens
        tools_size = self.specs.total(tools)
        fixed = text_tokens(system) + tools_size
        if fixed > limit:
            raise PromptTooLarge(
                f"the system prompt and {len(tools)} tool definitions take about "
                f"{math.ceil(fixed * ratio):,} tokens, more than the budget of {budget:,}"
            )
        self._warn_tools(tools, tools_size, limit)
        keep = 1 if harder else max(1, self.settings.keep_recent_turns)  # the current turn
        shown, size = self._arrange(window, history, fixed, keep, limit)
        spent = Usage()
        if size > limit or len(history) > self.settings.history_limit:
            spent = await self.folder.fold_for(model, window, history, shown, fixed, limit)
            shown, size = self._arrange(window, history, fixed, keep, limit)
        if size > limit:
            size = self._cut_current(shown, size, limit)
        if size > limit:
            raise ContextOverflow(
                f"the current message and its tool results need about {math.ceil(size * ratio):,} "
                f"tokens even cut down, more than the budget of {budget:,}"
            )
        summary = window.summary.text if window.summary else None
        request = ModelRequest(
            with_summary(system, summary),
            for_model(shown),
            tools,
            stream,
            output_room=output_for(window_tokens, self.settings),
        )
        return Fitted(request, size, model.name, spent)

    async def learn(self, fitted: Fitted, usage: Usage) -> None:
        """A reply's usage: the provider's count of what we estimated."""
        self._server_back(fitted.model)
        if usage.prompt_tokens > 0:
            await self.ratios.learn(fitted.model, fitted.estimate, usage.prompt_tokens)

    async def overflowed(self, fitted: Fitted, exc: ContextOverflow) -> None:
        """The provider refused `fitted` as too long: learn what its error states. When it
        states its count, the ratio is exact and the retry plans with the whole budget."""
        self._server_back(fitted.model)
        await self.ratios.overflowed(fitted.model, fitted.estimate, str(exc))
        if overflow_facts(str(exc)).prompt_tokens:
            self._counted.add(fitted.model)
        else:
            self._counted.discard(fitted.model)

    # -- what is sent ---------------------------------------------------------------------

    def _arrange(
        self, window: Window, history: list[Message], fixed: int, keep: int, limit: float
    ) -> tuple[list[Message], int]:
        """The recent turns whole if that fits, else every earlier turn's results cut (cutting
        costs no request, folding does); with the size of what is sent."""
        chars = min(
            self.settings.tool_result_chars, max(MIN_RESULT_CHARS, int(limit * 4 / RESULT_SHARE))
        )
        shown = self._shown(history, keep, chars)
        size = fixed + self._history_size(window, shown)
        if size > limit and keep > 1:
            shown = self._shown(history, 1, chars)
            size = fixed + self._history_size(window, shown)
        return shown, size

    def _shown(self, history: list[Message], keep: int, chars: int) -> list[Message]:
        """The history with tool results cut in turns older than the last `keep`."""
        starts = turn_starts(history)
        if len(starts) <= keep:
            return list(history)
        recent = starts[-keep] if keep > 0 else len(history)
        out = list(history)
        for i in range(recent):
            out[i] = cut_result(out[i], chars)
        return out

    @staticmethod
    def _history_size(window: Window, shown: Sequence[Message]) -> int:
        summary = text_tokens(window.summary.text) + 30 if window.summary else 0
        return summary + sum(message_tokens(m) for m in shown)

    def _cut_current(self, shown: list[Message], size: int, limit: float) -> int:
        """Cut the current turn's tool results, earlier ones first, until it fits."""
        starts = turn_starts(shown)
        first = starts[-1] if starts else 0
        results = [i for i in range(first, len(shown)) if shown[i].role is Role.TOOL]
        if not results:
            return size
        for chars in (self.settings.tool_result_chars, MIN_RESULT_CHARS):
            for i in results[:-1]:
                if size <= limit:
                    return size
                size += self._replace(shown, i, cut_result(shown[i], chars))
        last = results[-1]
        if size > limit:
            text = shown[last].text or ""
            over_chars = int((size - limit) * 4) + 64
            keep = max(MIN_RESULT_CHARS, len(text) - over_chars)
            size += self._replace(shown, last, cut_result(shown[last], keep))
        return size

    @staticmethod
    def _replace(shown: list[Message], i: int, msg: Message) -> int:
        before = message_tokens(shown[i])
        shown[i] = msg
        return message_tokens(msg) - before

    async def compact(self, conversation_id: int) -> Compacted:
        """Fold every turn but the last into the summary now (/compact). The last stays whole,
        so /retry and /undo still act on it. The sizes are of the history as it is sent."""
        window, history = await self.load(conversation_id)
        ratio = (await self.ratios.get(self.model.name)).ratio
        limit = await self.budget(self.model.name) / ratio
        keep = self.settings.keep_recent_turns
        before = self._arrange(window, history, 0, keep, limit)[1]
        starts = [s for s in turn_starts(history) if s <= len(window.ids)]
        end = starts[-1] if starts else 0
        loaded = len(history)
        if end > 0:
            await self.folder.fold(self.model, window, history, end, limit)
        after = self._arrange(window, history, 0, keep, limit)[1]
        return Compacted(loaded - len(history), round(before * ratio), round(after * ratio), end)

    def _warn_tools(self, tools: Sequence[ToolSpec], size: int, limit: float) -> None:
        names = frozenset(t.name for t in tools)
        if size <= limit / 2 or names in self._warned:
            return
        self._warned.add(names)
        biggest = sorted(tools, key=self.specs, reverse=True)[:5]
        log.warning(
            "the tool definitions take %d%% of the context budget (%d tools); the biggest: %s. "
            "Offer fewer tools (e.g. [tools] builtins, fewer MCP servers) or a larger window",
            round(size / limit * 100),
            len(tools),
            ", ".join(f"{t.name} (~{self.specs(t):,} tokens)" for t in biggest),
        )
