"""The store composed once over a :class:`~engine.store._db.Db`: every part, written once, on
whichever backend the Db is. SqliteStore and PgStore are this class with their own Db (and, for
PostgreSQL, the cluster part several instances need)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Self

from engine.store._api import (
    AccessStore,
    BrowseStore,
    ChatSettingsStore,
    ClusterStore,
    ConfirmationStore,
    ConsoleStore,
    ContextStore,
    ConversationStore,
    GrantStore,
    InboxStore,
    JobStore,
    MemoryStore,
    OpsStore,
    ScheduleStore,
    SealedStore,
    SpendStore,
    UsageStore,
)
from engine.store._cache import Caches
from engine.store._chat._confirmations import Confirmations
from engine.store._chat._context import Context
from engine.store._chat._conversations import Conversations
from engine.store._chat._inbox import Inbox
from engine.store._chat._jobs import Incarnation, Jobs
from engine.store._db import Db
from engine.store._operate._browse import Browse
from engine.store._operate._console import Console
from engine.store._operate._ops import Ops
from engine.store._operate._sealed import Sealed
from engine.store._people._access import Access
from engine.store._people._chat_settings import ChatSettings
from engine.store._people._grants import Grants, Usage
from engine.store._people._memory import Memory
from engine.store._people._schedules import Schedules
from engine.store._people._spend import Spend


class ComposedStore:
    """A :class:`~engine.store._api.Store` over `db`: ``async with`` it to open and close."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.caches = caches = Caches(db.caches)  # each part's own, enrolled here to drop
        context = Context(db, caches)
        conversations = Conversations(db, caches, context.histories, context.summaries)
        schedules = Schedules(db)
        self.conversations: ConversationStore = conversations
        self._inbox = Inbox(db, conversations, caches)
        self.inbox: InboxStore = self._inbox
        self._confirmations = Confirmations(db, caches)
        self.confirmations: ConfirmationStore = self._confirmations
        self.incarnation = Incarnation()  # this process's instance, once a cluster joins
        self.jobs: JobStore = Jobs(db, self.incarnation)
        self._memory = Memory(db, caches)
        self.memory: MemoryStore = self._memory
        self._grants = Grants(db, caches)
        self.grants: GrantStore = self._grants
        self.usage: UsageStore = Usage(db)
        self.spend: SpendStore = Spend(db)
        self.schedules: ScheduleStore = schedules
        self.chat_settings: ChatSettingsStore = ChatSettings(db)
        self.context: ContextStore = context
        self.access: AccessStore = Access(db)
        self.console: ConsoleStore = Console(db)
        self.sealed: SealedStore = Sealed(db)
        self.browse: BrowseStore = Browse(db)
        self.ops: OpsStore = Ops(db, schedules, caches)
        self.cluster: ClusterStore | None = None  # a backend several processes share sets it

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        async with self.db.transaction():
            yield

    async def schema_version(self) -> int:
        return await self.db.schema_version()

    async def settled(self) -> None:
        await self.db.settled()

    async def open(self) -> None:
        await self.db.open()
        if self.db.caches:  # what the caches of this process, the store's only writer, start from
            await self._inbox.prime()
            await self._list()
            self.db.after_outside_write(self._outside_write)

    async def watch(self) -> None:
        """Hear of what other processes write from now on (the daemon). A shared store caches
        nothing and tells through its notifications (the cluster listens); SQLite overrides."""

    async def _list(self) -> None:
        """Which chats and owners have rows at all (a key not listed has none, unasked)."""
        await self._grants.list_chats()
        await self._confirmations.list_chats()
        await self._memory.list_owners()

    async def _outside_write(self) -> None:
        self.caches.drop(outside=True)
        await self._list()

    async def close(self) -> None:
        await self.db.close()

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
