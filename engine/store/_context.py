"""The context budget's part of the store, for every backend: summaries and token ratios.

A conversation has at most one summary row, replaced each time it is updated (the messages it
covers stay in ``messages``); a chat's turns run on one instance at a time
(engine/work/_cluster.py), so a summary has one writer at a time. Token ratios are one row per
model.
"""

from __future__ import annotations

import time

from engine.models import Message, Role
from engine.store._cache import Caches, Recent
from engine.store._db import Db
from engine.store._history import Histories
from engine.store._message_rows import (
    MESSAGE_COLS,
    dump_sources,
    load_sources,
    message_from_row,
)
from engine.store._rows import Summary, TokenRatio

_SUMMARIES = 4096  # conversations whose summary is kept in memory


class Context:
    """What a turn's context is read from. Its caches, when this process alone writes the store:
    each conversation's latest messages (_history.py; the conversations part writes them as it
    stores messages) and its summary (or that it has none), written only by its own turns, one
    at a time."""

    def __init__(self, db: Db, caches: Caches) -> None:
        self.db = db
        self.histories = Histories() if caches.enabled else None
        self.summaries = Recent[int, tuple[Summary | None]](_SUMMARIES) if caches.enabled else None
        caches.enroll(self._drop)

    def _drop(self) -> None:
        if self.histories is not None:
            self.histories.clear()
        if self.summaries is not None:
            self.summaries.clear()

    async def summary(self, conversation_id: int) -> Summary | None:
        if self.summaries is not None and (known := self.summaries.use(conversation_id)):
            return known[0]
        row = await self.db.fetchrow(
            "SELECT text, first_id, last_id, sources FROM summaries WHERE conversation_id=?",
            conversation_id,
        )
        found = None
        if row is not None:
            text, first, last = row["text"], row["first_id"], row["last_id"]
            found = Summary(conversation_id, text, first, last, load_sources(row["sources"]))
        if self.summaries is not None:
            self.summaries[conversation_id] = (found,)
        return found

    async def save_summary(self, summary: Summary) -> None:
        await self.db.execute(
            "INSERT INTO summaries(conversation_id, text, first_id, last_id, updated_at, sources) "
            "VALUES (?,?,?,?,?,?) ON CONFLICT (conversation_id) DO UPDATE SET text=excluded.text, "
            "first_id=excluded.first_id, last_id=excluded.last_id, "
            "updated_at=excluded.updated_at, sources=excluded.sources",
            summary.conversation_id,
            summary.text,
            summary.first_id,
            summary.last_id,
            time.time(),
            dump_sources(summary.sources),
        )
        if self.summaries is not None:
            self.summaries[summary.conversation_id] = (summary,)

    async def messages_after(
        self, conversation_id: int, after_id: int, limit: int
    ) -> list[tuple[int, Message]]:
        cache = self.histories
        if cache is not None:
            known = cache.after(conversation_id, after_id, limit)
            if known is not None:
                return known
        mark = cache.guard.reading(conversation_id) if cache is not None else 0
        out: list[tuple[int, Message]] | None = None
        try:
            # after `after_id`, or from the last user message on (NULL when there is none); a
            # turn the user stopped is never sent, nor folded into the summary
            rows = await self.db.fetch(
                f"SELECT id, {MESSAGE_COLS} FROM messages WHERE conversation_id=? AND (id > ? "
                "OR id >= (SELECT MAX(id) FROM messages WHERE conversation_id=? AND role='user' "
                "AND stopped_at IS NULL)) AND stopped_at IS NULL ORDER BY id DESC LIMIT ?",
                conversation_id,
                after_id,
                conversation_id,
                limit,
            )
            out = [(r["id"], message_from_row(r)) for r in reversed(rows)]
        finally:
            if cache is not None:
                cache.loaded(conversation_id, mark, after_id, limit, out)  # a copy, if kept
        if len(rows) == limit:  # cut at a user message so no tool result loses its call
            while out and out[0][1].role is not Role.USER:
                out.pop(0)
        return out

    async def token_ratio(self, model: str) -> TokenRatio | None:
        row = await self.db.fetchrow(
            "SELECT ratio, samples, max_window FROM token_ratios WHERE model=?", model
        )
        if row is None:
            return None
        return TokenRatio(model, row["ratio"], row["samples"], row["max_window"])

    async def save_token_ratio(self, ratio: TokenRatio) -> None:
        await self.db.execute(
            "INSERT INTO token_ratios(model, ratio, samples, max_window, updated_at) "
            "VALUES (?,?,?,?,?) ON CONFLICT (model) DO UPDATE SET ratio=excluded.ratio, "
            "samples=excluded.samples, max_window=excluded.max_window, "
            "updated_at=excluded.updated_at",
            ratio.model,
            ratio.ratio,
            ratio.samples,
            ratio.window,
            time.time(),
        )
