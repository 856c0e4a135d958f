"""What the caches of a single-owner store are made of: a bounded mapping, the rule that keeps
a cache coherent with the store while reads and writes of the same key overlap, and the list of
every part's cache (:class:`Caches`), so that one write can drop them all.

Each cache belongs to the part of the store that reads it (engine/store/_chat/_conversations.py,
...): it is made there, bounded there, and changed there by every write of that part. What no part
can see is said through :class:`Caches`: a write that changes rows wholesale (a prune, a forget) and
a write by another process (heard of by the SQLite store's watch, engine/store/sqlite/_watch.py)
drop every cache at once.

A cache is changed where a statement's answer comes back: a read replaces the value, a write
adds itself to it (or drops it). SQLite answers one connection's statements in the order they
were sent, so that alone keeps the value what the store holds. :class:`Guard` makes it hold
without counting on that order (a write waits for the transaction lock, a read does not, so a
read sent later may be answered first): a read that overlapped a write of its key is not kept,
and while a write is in flight its key is read from the store.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Caches:
    """The caches of one store's parts: each part enrolls how to let go of its own. `enabled`
    when this process alone writes the store (SQLite); a store several processes write
    (PostgreSQL) keeps nothing in memory."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._drops: list[tuple[Callable[[], None], bool]] = []

    def enroll(self, drop: Callable[[], None], *, outside: bool = True) -> None:
        """`drop` empties a part's cache. `outside` False: not after another process's write
        (what it holds only this process adds, and one deleted elsewhere does no harm)."""
        self._drops.append((drop, outside))

    def drop(self, *, outside: bool = False) -> None:
        """Drop what every part keeps (`outside`: because another process wrote the store)."""
        for drop, also_outside in self._drops:
            if also_outside or not outside:
                drop()


class Recent(OrderedDict[K, V]):
    """A mapping of at most `size` keys; reading a key (:meth:`use`) makes it the newest, and
    adding one past the size drops the oldest."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def use(self, key: K) -> V | None:
        found = self.get(key)
        if found is not None:
            self.move_to_end(key)
        return found

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)


class Guard(Generic[K]):
    """Reads and writes of each key in flight: a read may be kept when no write of its key began
    or ended while it ran (nor was still running when it ended). Holds nothing for a key with
    neither in flight."""

    def __init__(self) -> None:
        self._reading: dict[K, int] = {}
        self._writing: dict[K, int] = {}
        self._epoch: dict[K, int] = {}

    def reading(self, key: K) -> int:
        """A read of `key` begins: the mark to give :meth:`keeps`."""
        self._reading[key] = self._reading.get(key, 0) + 1
        return self._epoch.get(key, 0)

    def keeps(self, key: K, mark: int) -> bool:
        """The read begun at `mark` ended: whether what it read may be kept."""
        _down(self._reading, key)
        keep = not self._writing.get(key) and self._epoch.get(key, 0) == mark
        self._settle(key)
        return keep

    def writing(self, key: K) -> None:
        """A write of `key` begins (pair with :meth:`written`, also when it fails)."""
        self._writing[key] = self._writing.get(key, 0) + 1
        self._epoch[key] = self._epoch.get(key, 0) + 1

    def written(self, key: K) -> None:
        _down(self._writing, key)
        self._epoch[key] = self._epoch.get(key, 0) + 1
        self._settle(key)

    def busy(self, key: K) -> bool:
        """A write of `key` is in flight (the cache may not answer for it now)."""
        return bool(self._writing.get(key))

    def forget_all(self) -> None:
        """Every cached value was dropped: no read running now may keep what it reads."""
        for key in self._reading:
            self._epoch[key] = self._epoch.get(key, 0) + 1

    def _settle(self, key: K) -> None:
        if key not in self._reading and key not in self._writing:
            self._epoch.pop(key, None)


def _down(counts: dict[K, int], key: K) -> None:
    left = counts.get(key, 1) - 1
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)


Arrival = tuple[float, list[float]]  # known from when on, the arrivals since then


class Arrivals(Recent[tuple[str, str], Arrival]):
    """Each user's latest messages' arrival (the rate limit's window), and since when every
    arrival is known for every user (`complete_since`, after the store read them once at open:
    one process writes them all from then on), so that a user who is not here sent nothing
    since then, unless a user dropped to keep the size, or whose arrival is in doubt after a
    failed write, had one later (`doubt_until`)."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.complete_since: float | None = None
        self.doubt_until = 0.0

    def none_since(self, since: float) -> bool:
        """True when a user not held here surely sent nothing since `since`."""
        return (
            self.complete_since is not None
            and since >= self.complete_since
            and (since > self.doubt_until)
        )

    def doubt(self, key: tuple[str, str], until: float) -> None:
        """Whether `key` sent something up to `until` is not known any more."""
        self.pop(key, None)
        self.doubt_until = max(self.doubt_until, until)

    def known_from(self) -> float:
        """From when on a user who is not held here has every arrival held once added."""
        assert self.complete_since is not None
        return max(self.complete_since, self.doubt_until + 1e-6)

    def popitem(self, last: bool = True) -> tuple[tuple[str, str], Arrival]:
        dropped = super().popitem(last)
        if times := dropped[1][1]:
            self.doubt_until = max(self.doubt_until, times[-1])
        return dropped

    def clear(self) -> None:
        super().clear()
        self.complete_since = None


class Listed(Generic[K]):
    """The keys (chats, owners) that have rows in a table, read once when the store opens, with
    every key this process writes rows for added before it writes them (it is the only writer):
    a key not listed has no rows, without asking. Not known (everything is asked) until loaded,
    and again once cleared; the keys known before, and those added meanwhile, are kept for the
    next load (which may have read the table before their rows were written: a key listed
    without rows is only asked about)."""

    def __init__(self) -> None:
        self._keys: set[K] | None = None
        self._added: set[K] = set()  # while not known

    def load(self, keys: Iterable[K]) -> None:
        self._keys = set(keys) | self._added
        self._added = set()

    def add(self, key: K) -> None:
        if self._keys is not None:
            self._keys.add(key)
        else:
            self._added.add(key)

    def none(self, key: K) -> bool:
        """True when `key` surely has no rows."""
        return self._keys is not None and key not in self._keys

    def clear(self) -> None:
        if self._keys is not None:
            self._added |= self._keys
        self._keys = None
