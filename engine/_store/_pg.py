"""The PostgreSQL backend: one database that any number of relaybot instances share.

``async with PgStore(url) as store:`` connects (migrating the schema under a lock) and closes.
It has every part the SQLite backend has, with the same rows and the same guarantees, plus
:attr:`PgStore.cluster`, what several instances need to share the work (engine/work/_cluster.py).
All SQL lives in this package's ``_pg_*`` modules, one per part.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from engine._store._api import (
    ChatSettingsStore,
    ClusterStore,
    ConfirmationStore,
    ContextStore,
    ConversationStore,
    GrantStore,
    InboxStore,
    JobStore,
    NoteStore,
    OpsStore,
    ScheduleStore,
    UsageStore,
)
from engine._store._pg_chat_settings import PgChatSettings
from engine._store._pg_cluster import PgCluster
from engine._store._pg_confirmations import PgConfirmations
from engine._store._pg_context import PgContext
from engine._store._pg_conversations import PgConversations
from engine._store._pg_db import PgDb
from engine._store._pg_grants import PgGrants, PgUsage
from engine._store._pg_inbox import PgInbox
from engine._store._pg_jobs import PgJobs
from engine._store._pg_notes import PgNotes
from engine._store._pg_ops import PgOps
from engine._store._pg_schedules import PgSchedules


class PgStore:
    def __init__(self, url: str, *, max_connections: int = 20, readonly: bool = False) -> None:
        self.db = PgDb(url, max_connections=max_connections, readonly=readonly)
        self.where = self.db.where
        conversations = PgConversations(self.db)
        self.conversations: ConversationStore = conversations
        self.inbox: InboxStore = PgInbox(self.db, conversations)
        self.confirmations: ConfirmationStore = PgConfirmations(self.db)
        self.jobs: JobStore = PgJobs(self.db)
        self.notes: NoteStore = PgNotes(self.db)
        self.grants: GrantStore = PgGrants(self.db)
        self.usage: UsageStore = PgUsage(self.db)
        schedules = PgSchedules(self.db)
        self.schedules: ScheduleStore = schedules
        self.chat_settings: ChatSettingsStore = PgChatSettings(self.db)
        self.context: ContextStore = PgContext(self.db)
        self.ops: OpsStore = PgOps(self.db, schedules)
        self.cluster: ClusterStore | None = PgCluster(self.db)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        async with self.db.transaction():
            yield

    async def schema_version(self) -> int:
        return await self.db.schema_version()

    async def open(self) -> None:
        await self.db.open()

    async def close(self) -> None:
        await self.db.close()

    async def __aenter__(self) -> PgStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
