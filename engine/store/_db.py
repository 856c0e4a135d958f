"""The one interface the store's parts write their SQL against, whatever the backend.

Every part of the store (``_inbox``, ``_conversations``, ...) is written once, over :class:`Db`;
the SQLite backend (engine/store/sqlite/) and the PostgreSQL one (engine/store/postgres/) each
implement it. A statement is one SQL text with ``?`` placeholders: SQLite takes it as it is,
PostgreSQL's asyncpg wants ``$1..$n``, and :func:`numbered` translates each text once (cached by
the text, so a statement costs a dictionary look-up after its first use).

What truly differs between the dialects is a small :class:`Dialect`: an id list (``IN (?,?,…)``
against ``= ANY($1::bigint[])``), the predicate of the conversations' partial unique index an
upsert names, whether an INSERT may sit in a WITH (one statement for an answer and its delivery),
and the name of the substring-position function. Whether rows may be cached in memory is
:attr:`Dialect.shared`: a store several processes write (PostgreSQL) caches nothing. The caches
themselves are the parts' own (engine/store/_cache.py); the Db only tells of a write another
process made (:meth:`Db.outside_write`) and of what processes notify each other.
"""

from __future__ import annotations

import abc
import contextlib
import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

Row = Any  # a sqlite3.Row or an asyncpg.Record: both read by column name and by position
Listener = Callable[[str], object]
Hook = Callable[[], Awaitable[None]]

# What other processes tell through :meth:`Db.notify` (besides the cluster's own channels): a
# part whose rows a process keeps in memory listens, and reads them again.
ACCESS = "relaybot_access"  # who is let in changed (approved, revoked)
FORGOT = "relaybot_forgot"  # a user was forgotten


@dataclass(frozen=True, slots=True)
class Dialect:
    name: str
    shared: bool  # several processes write the store: nothing is cached in memory
    active_conflict: str  # the active conversations' partial unique index, in ON CONFLICT
    writable_cte: bool  # an INSERT may sit in a WITH (and so run with another in one statement)
    position: str  # the function giving a substring's 1-based position: instr / strpos
    id_array: bool  # id lists go as one array parameter (= ANY(?)), not one mark per id

    def among(self, values: Sequence[Any], sql_type: str = "bigint") -> tuple[str, tuple[Any, ...]]:
        """The condition "is one of `values`" to follow a column, and its parameters:
        ``IN (?,?,?)`` with one parameter per value, or ``= ANY(?::bigint[])`` with one list."""
        if self.id_array:
            return f"= ANY(?::{sql_type}[])", (list(values),)
        return f"IN ({','.join('?' * len(values))})", tuple(values)


SQLITE = Dialect(
    "sqlite",
    shared=False,
    active_conflict="active = 1",
    writable_cte=False,
    position="instr",
    id_array=False,
)
POSTGRES = Dialect(
    "postgresql",
    shared=True,
    active_conflict="active",
    writable_cte=True,
    position="strpos",
    id_array=True,
)


@functools.lru_cache(maxsize=4096)
def numbered(sql: str) -> str:
    """`sql` with its ``?`` placeholders as ``$1..$n`` (those inside quotes left alone)."""
    out: list[str] = []
    n = 0
    quote: str | None = None
    for ch in sql:
        if quote is not None:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "?":
            n += 1
            out.append(f"${n}")
            continue
        out.append(ch)
    return "".join(out)


class Db(abc.ABC):
    """A connection to one store, as every part uses it. Statements outside
    :meth:`transaction` commit at once; inside it, the current task's statements commit together
    (nested use joins the open one)."""

    dialect: Dialect

    def __init__(self) -> None:
        self._listeners: dict[str, list[Listener]] = {}
        self._outside: list[Hook] = []  # refill caches after another process wrote (watch)

    @property
    def caches(self) -> bool:
        """Whether the parts may keep rows in memory (this process alone writes the store)."""
        return not self.dialect.shared

    def in_transaction(self) -> bool:
        """Whether the running task is inside :meth:`transaction` (what it writes may still roll
        back). Only a backend that caches needs to say (SQLite); by default False."""
        return False

    # -- statements -------------------------------------------------------------------------

    @abc.abstractmethod
    async def execute(self, sql: str, *params: Any) -> int:
        """Run a write; returns how many rows it touched."""

    async def execute_later(self, sql: str, *params: Any) -> None:
        """A write whose result nobody reads. A backend may send it with the transaction's next
        statement or its COMMIT (SQLite: one trip to the database, not two); by default, now."""
        await self.execute(sql, *params)

    async def execute_soon(self, sql: str, *params: Any) -> None:
        """A write nobody waits for, outside any transaction, whose failure only the log needs
        (a counter). A backend may send it with its next trip, a moment later, and log a
        failure instead of raising it (SQLite: engine/store/sqlite/_soon.py); by default, now."""
        await self.execute(sql, *params)

    async def together(self, *statements: tuple[str, Sequence[Any]]) -> list[list[Row]]:
        """The statements in order, in one transaction (the open one, or their own): the rows
        each returned. A backend may send them in one trip (SQLite)."""
        async with self.transaction():
            return [await self.fetch(sql, *params) for sql, params in statements]

    async def at_once(self, *statements: tuple[str, Sequence[Any]]) -> list[Row]:
        """Writes committed together that are independent of each other (none reads or writes
        what another writes: they may see the same snapshot); the rows the first returns. One
        statement where the backend can (a data-modifying WITH: no BEGIN and COMMIT trips),
        else :meth:`together`."""
        (first, first_params), rest = statements[0], statements[1:]
        if not rest:  # one statement is its own transaction
            return await self.fetch(first, *first_params)
        if not self.dialect.writable_cte:
            return (await self.together(*statements))[0]
        parts = ", ".join(f"w{n} AS ({sql})" for n, (sql, _) in enumerate(rest))
        params = [p for _, ps in rest for p in ps]  # in the order their marks come
        return await self.fetch(f"WITH {parts} {first}", *params, *first_params)

    @abc.abstractmethod
    async def fetch(self, sql: str, *params: Any) -> list[Row]:
        """The rows a statement returns (a read, or a write with RETURNING)."""

    async def fetchrow(self, sql: str, *params: Any) -> Row | None:
        rows = await self.fetch(sql, *params)
        return rows[0] if rows else None

    async def fetchval(self, sql: str, *params: Any) -> Any:
        row = await self.fetchrow(sql, *params)
        return None if row is None else row[0]

    @abc.abstractmethod
    def transaction(self) -> contextlib.AbstractAsyncContextManager[None]: ...

    # -- lifecycle and housekeeping -----------------------------------------------------------

    @abc.abstractmethod
    async def open(self) -> None: ...

    @abc.abstractmethod
    async def close(self) -> None: ...

    @abc.abstractmethod
    async def schema_version(self) -> int: ...

    @abc.abstractmethod
    async def size(self) -> tuple[int, int | None]:
        """The store's size in bytes, and its own write-ahead log's (None: it has none)."""

    async def settled(self) -> None:  # noqa: B027 (nothing to do is the usual case)
        """The daemon started on this store: what an upgrade kept in case it went wrong may go
        (SQLite: the copy made before it)."""

    async def compact(self) -> None:  # noqa: B027 (nothing to do is the usual case)
        """Give space back between bursts (by default nothing: a server keeps its own log)."""

    # -- notifications --------------------------------------------------------------------------

    def after_outside_write(self, hook: Hook) -> None:
        """Run `hook` when another process wrote the store (:meth:`outside_write`), before the
        listeners hear of it: the store drops and refills its parts' caches."""
        self._outside.append(hook)

    async def outside_write(self) -> None:
        """Another process wrote the store, nobody knows what: the hooks drop what the parts
        keep, and every listener, whatever its channel, hears of it."""
        for hook in self._outside:
            await hook()
        for listeners in list(self._listeners.values()):
            for listener in list(listeners):
                listener("")

    def on_notify(self, channel: str, listener: Listener) -> None:
        """Call `listener(payload)` for each :meth:`notify` on `channel` (by any process)."""
        self._listeners.setdefault(channel, []).append(listener)

    async def notify(self, channel: str) -> None:
        """Tell every listener of `channel`: here, those of this process, at once."""
        for listener in self._listeners.get(channel, ()):
            listener("")
