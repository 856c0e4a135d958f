"""Each conversation's latest messages, kept in memory when only this process writes the store.

A turn starts from its conversation's summary and the messages after it (engine/context's
``load``, through :meth:`Context.messages_after`); without this, every turn read them again and
parsed each row back into a :class:`Message`. Here the messages a read returned stay, with
`floor`: every message of the conversation with an id from `floor` on is among them. A message
the store records from then on (an answer, a tool call or result, a user's message taken from
the inbox) is added once its id is known and its transaction committed; so a later read whose
messages all lie at or past `floor` is answered from memory, the same rows in the same order.

Coherent by construction, and conservative where it cannot be: a message appended inside a
larger transaction (which may still roll back) drops the conversation's tail instead; deleting
messages (/undo, /retry, pruning, forgetting a user) drops the conversation's tail or every tail;
a read that overlapped a write to its conversation keeps nothing. Only
:attr:`Dialect.shared` False stores keep any (SQLite, one process: bot/_lock.py); on PostgreSQL
several instances write, a chat moves between them, so every read goes to the server.

Bounded: at most `max_chars` of message text (plus a fixed cost per message) over all tails,
the least recently used conversation's dropped first. Messages are shared, never copied: their
users replace a message rather than change it (engine/context cuts results into new ones).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.models import Message, Role
from engine.store._cache import Guard

MAX_CHARS = 16_000_000  # text kept over all conversations (about as many bytes, and more)
_PER_MESSAGE = 300  # what a message costs besides its text


@dataclass(slots=True)
class _Tail:
    floor: int  # every message with an id from here on is in `items`
    items: list[tuple[int, Message]] = field(default_factory=list)  # ascending ids
    weight: int = 0


class Histories:
    def __init__(self, max_chars: int = MAX_CHARS) -> None:
        self.max_chars = max_chars
        self._tails: OrderedDict[int, _Tail] = OrderedDict()
        self._weight = 0
        self.guard = Guard[int]()  # reads and writes of each conversation's messages in flight

    def after(
        self, conversation: int, after_id: int, limit: int
    ) -> list[tuple[int, Message]] | None:
        """What :func:`select` gives on the whole conversation, or None when the tail in memory
        may not hold all of it (the caller reads the store)."""
        tail = self._tails.get(conversation)
        if tail is None or self.guard.busy(conversation):
            return None
        last_user = _last_user(tail.items)
        if last_user is None or tail.floor > min(after_id + 1, last_user):
            return None
        self._tails.move_to_end(conversation)
        return select(tail.items, after_id, limit)

    def loaded(
        self,
        conversation: int,
        mark: int,
        after_id: int,
        limit: int,
        rows: Sequence[tuple[int, Message]] | None,
    ) -> None:
        """The read begun at `mark` (``guard.reading``) ended with the store's rows for
        :func:`select` (before its cut at a user message, ascending; None: it failed): kept,
        unless a write overlapped it."""
        if not self.guard.keeps(conversation, mark) or rows is None:
            return
        if len(rows) == limit:  # cut by the limit: complete from its first row on
            floor = rows[0][0] if rows else after_id + 1
        else:  # every message past after_id, and from the last user message on
            floor = min(after_id + 1, rows[0][0]) if rows else after_id + 1
        self.drop(conversation)
        tail = _Tail(floor, list(rows), sum(_weight(m) for _, m in rows))
        self._tails[conversation] = tail
        self._weight += tail.weight
        self._trim()

    def fresh(self, conversation: int) -> None:
        """The conversation was just made: it has no messages (every one will be added)."""
        if not self.guard.busy(conversation) and conversation not in self._tails:
            self._tails[conversation] = _Tail(0)

    def written(
        self, conversation: int, added: Sequence[tuple[int, Message]] | None, *, kept: bool
    ) -> None:
        """A write begun with ``guard.writing`` ended: `added` (id, message) are in the store
        for good (`kept`: committed by now); None or not kept (it failed, or a larger
        transaction may still roll it back) drops the conversation's tail."""
        self.guard.written(conversation)
        tail = self._tails.get(conversation)
        if tail is None:
            return
        if added is None or not kept:
            self.drop(conversation)
            return
        for message_id, msg in added:
            if tail.items and message_id <= tail.items[-1][0]:
                continue  # never: a kept read saw no write begun after it (safety)
            tail.items.append((message_id, msg))
            tail.weight += _weight(msg)
            self._weight += _weight(msg)
        self._trim()

    def drop(self, conversation: int) -> None:
        tail = self._tails.pop(conversation, None)
        if tail is not None:
            self._weight -= tail.weight

    def clear(self) -> None:
        """Drop every tail; reads running now keep nothing."""
        self._tails.clear()
        self._weight = 0
        self.guard.forget_all()

    def _trim(self) -> None:
        while self._weight > self.max_chars and self._tails:
            _, tail = self._tails.popitem(last=False)
            self._weight -= tail.weight


def select(
    items: Sequence[tuple[int, Message]], after_id: int, limit: int
) -> list[tuple[int, Message]]:
    """Of a conversation's messages (ascending, all of those the result can hold): those after
    `after_id`, or from the last user message on, the newest `limit`; when the limit cut them,
    from a user message on (no tool result without its call)."""
    last_user = _last_user(items)
    start = after_id + 1 if last_user is None else min(after_id + 1, last_user)
    chosen = [(i, m) for i, m in items if i >= start][-limit:] if limit > 0 else []
    if len(chosen) == limit:
        while chosen and chosen[0][1].role is not Role.USER:
            chosen.pop(0)
    return chosen


def _last_user(items: Sequence[tuple[int, Message]]) -> int | None:
    for message_id, msg in reversed(items):
        if msg.role is Role.USER:
            return message_id
    return None


def _weight(msg: Message) -> int:
    return _PER_MESSAGE + len(msg.text or "") + sum(len(c.arguments) for c in msg.tool_calls)
