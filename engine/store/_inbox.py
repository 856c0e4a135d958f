"""The inbox, for every backend: every inbound message, committed before anything else happens.

A message held back by the rate limit (`hold_until`) is taken once its time has come: the rule is
:meth:`InboxRow.ready`, the one the dispatcher uses too.

What came with a message (pictures, files, voice) is kept as its platform references in the
`media` column (JSON), so a message taken after a restart can be fetched again; never the bytes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from engine._channel import Attachment, InboundMessage, MediaKind
from engine.models import Message
from engine.store._cache import Arrivals, Caches, Guard
from engine.store._conversations import Conversations
from engine.store._db import Db, Row
from engine.store._rows import InboxRow
from engine.store._states import InboxState

PRIMED_S = 600.0  # the arrivals read at open: longer than any rate window in use
_ARRIVALS_KEPT = 4096  # users whose latest arrivals are kept in memory

_COLS = (
    "id, channel, chat_id, message_id, user_id, user_name, text, is_private, state, hold_until, "
    "media, quote, forwarded"
)


class Inbox:
    def __init__(self, db: Db, conversations: Conversations, caches: Caches) -> None:
        self.db = db
        self.conversations = conversations
        self.caches = caches
        # When each user's latest messages arrived (the rate limit's window), when only this
        # process writes the store: (from when on every arrival is known, the arrivals). Only
        # this process adds them: another's write (a forget) leaves them (one deleted elsewhere
        # only counts a while longer).
        self._arrivals = Arrivals(_ARRIVALS_KEPT) if caches.enabled else None
        self._guard = Guard[tuple[str, str]]()
        caches.enroll(self._drop, outside=False)

    def _drop(self) -> None:
        if self._arrivals is not None:
            self._arrivals.clear()
        self._guard.forget_all()

    async def accept(
        self, msg: InboundMessage, *, hold_until: float | None = None, quote: str | None = None
    ) -> bool:
        """Keep `msg` (once: a redelivery is refused); `quote` is what it replies to, as the
        model is to be shown it."""
        if self._arrivals is None:
            return await self._accept(msg, hold_until, quote, time.time())
        who, now = (msg.channel, msg.user_id), time.time()
        self._guard.writing(who)
        try:
            added = await self._accept(msg, hold_until, quote, now)
        except BaseException:  # whether it is stored is not known: read again next time
            self._arrivals.doubt(who, now)
            raise
        finally:
            self._guard.written(who)
        if added:
            if (known := self._arrivals.get(who)) is not None:
                known[1].append(now)
            elif self._arrivals.none_since(now):  # the first one since the store was opened
                self._arrivals[who] = (self._arrivals.known_from(), [now])
        return added

    async def prime(self) -> None:
        """Read once, at open, every arrival of the last PRIMED_S (one process writes every later
        one): a user absent from the cache then sent nothing, without asking the store."""
        if self._arrivals is None:
            return
        since = time.time() - PRIMED_S
        rows = await self.db.fetch(
            "SELECT channel, user_id, received_at FROM inbox WHERE received_at >= ? "
            "ORDER BY received_at",
            since,
        )
        known: dict[tuple[str, str], list[float]] = {}
        for r in rows:
            known.setdefault((r["channel"], r["user_id"]), []).append(r["received_at"])
        self._arrivals.clear()
        for who, times in known.items():
            self._arrivals[who] = (since, times)
        self._arrivals.complete_since = since

    async def _accept(
        self, msg: InboundMessage, hold_until: float | None, quote: str | None, now: float
    ) -> bool:
        added = await self.db.execute(
            "INSERT INTO inbox(channel, chat_id, message_id, user_id, user_name, text, "
            "is_private, media, received_at, hold_until, quote, forwarded) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?) "
            "ON CONFLICT (channel, chat_id, message_id) DO NOTHING",
            msg.channel,
            msg.chat_id,
            msg.message_id,
            msg.user_id,
            msg.user_name,
            msg.text,
            msg.is_private,
            _dump(msg.attachments),
            now,
            hold_until,
            quote,
            msg.forwarded_from,
        )
        return added == 1

    async def ready(self, channel: str, chat_id: str) -> list[InboxRow]:
        """The chat's queued messages that may be taken now (not held by the rate limit)."""
        now = time.time()
        queued = await self.rows(InboxState.QUEUED, channel, chat_id)
        return [r for r in queued if r.ready(now)]

    async def take_queued(self, channel: str, chat_id: str) -> list[InboxRow]:
        rows = await self.ready(channel, chat_id)
        if not rows:
            return rows
        conv = await self.conversations.active(channel, chat_id, is_private=rows[-1].is_private)
        await self.take(conv.id, [(row, _message(row)) for row in rows])
        return rows

    async def take(self, conversation_id: int, taken: Sequence[tuple[InboxRow, Message]]) -> None:
        if not taken:
            return
        among, ids = self.db.dialect.among([row.id for row, _ in taken])
        await self.conversations.take(
            conversation_id,
            [(msg, row.user_id) for row, msg in taken],
            (f"UPDATE inbox SET state='taken', taken_at=? WHERE id {among}", (time.time(), *ids)),
        )

    async def rows(self, state: Any, channel: str, chat_id: str) -> list[InboxRow]:
        found = await self.db.fetch(
            f"SELECT {_COLS} FROM inbox WHERE state=? AND channel=? AND chat_id=? ORDER BY id",
            InboxState(state).value,
            channel,
            chat_id,
        )
        return [_row(r) for r in found]

    async def answered(
        self, ids: Sequence[int], *, delivered: tuple[int, str] | None = None
    ) -> None:
        """These rows are answered; `delivered`: by the answer (its message id, and the
        platform's id for it) whose delivery is recorded with them."""
        update = None
        if ids:
            among, params = self.db.dialect.among(ids)
            update = (f"UPDATE inbox SET state='answered' WHERE id {among}", params)
        if delivered is not None:
            await self.conversations.delivered(*delivered, then=update)
        elif update is not None:
            await self.db.execute_later(update[0], *update[1])

    async def unfinished_chats(self) -> list[tuple[str, str]]:
        rows = await self.db.fetch(
            "SELECT channel, chat_id FROM inbox WHERE state <> 'answered' "
            "UNION SELECT channel, chat_id FROM deliveries WHERE state = 'pending'"
        )
        return [(r["channel"], r["chat_id"]) for r in rows]

    async def sent_since(self, channel: str, user_id: str, since: float) -> list[float]:
        """When the user's messages received since `since` arrived, oldest first."""
        who = (channel, user_id)
        if self._arrivals is not None and not self._guard.busy(who):
            known = self._arrivals.use(who)
            if known is not None and known[0] <= since:
                times = [t for t in known[1] if t >= since]  # older ones are never asked again
                self._arrivals[who] = (since, times)
                return list(times)
            if known is None and self._arrivals.none_since(since):
                return []
        mark = self._guard.reading(who)
        rows = None
        try:
            rows = await self.db.fetch(
                "SELECT received_at FROM inbox WHERE channel=? AND user_id=? AND received_at>=? "
                "ORDER BY received_at",
                channel,
                user_id,
                since,
            )
        finally:
            if self._guard.keeps(who, mark) and rows is not None and self._arrivals is not None:
                self._arrivals[who] = (since, [r["received_at"] for r in rows])
        return [r["received_at"] for r in rows]

    async def next_release(self, channel: str, chat_id: str) -> float | None:
        """When the chat's earliest held message may be taken (None: none held)."""
        held = await self.db.fetchval(
            "SELECT MIN(hold_until) FROM inbox WHERE channel=? AND chat_id=? "
            "AND state='queued' AND hold_until IS NOT NULL",
            channel,
            chat_id,
        )
        return None if held is None else float(held)

    async def prune(self, older_than: float) -> int:
        pruned = await self.db.execute(
            "DELETE FROM inbox WHERE state='answered' AND received_at < ?", older_than
        )
        if pruned and self._arrivals is not None:
            self.caches.drop()  # some arrivals it holds may be gone
        return pruned


def _row(r: Row) -> InboxRow:
    return InboxRow(
        r["id"],
        r["channel"],
        r["chat_id"],
        r["message_id"],
        r["user_id"],
        r["user_name"],
        r["text"],
        bool(r["is_private"]),
        InboxState(r["state"]),
        hold_until=r["hold_until"],
        attachments=_load(r["media"]),
        quote=r["quote"],
        forwarded=r["forwarded"],
    )


def _message(row: InboxRow) -> Message:
    msg = Message.user(row.text, speaker=row.speaker, provenance=row.provenance)
    msg.quote = row.quote
    return msg


def _dump(attachments: Sequence[Attachment]) -> str | None:
    if not attachments:
        return None
    return json.dumps(
        [
            {
                "kind": a.kind.value,
                "name": a.name,
                "mime": a.mime_type,
                "size": a.size,
                "ref": a.ref,
                "duration": a.duration_s,
            }
            for a in attachments
        ]
    )


def _load(raw: str | None) -> tuple[Attachment, ...]:
    if not raw:
        return ()
    return tuple(
        Attachment(MediaKind(a["kind"]), a["name"], a["mime"], a["size"], a["ref"], a["duration"])
        for a in json.loads(raw)
    )
