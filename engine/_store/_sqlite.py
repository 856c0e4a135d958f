"""The SQLite backend: one file holds every part of the store.

``async with SqliteStore(path) as store:`` opens (creating or migrating) and closes the file.
All SQL lives in this package's ``_sqlite_*`` modules, one per part.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

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
from engine._store._sqlite_chat_settings import SqliteChatSettings
from engine._store._sqlite_confirmations import SqliteConfirmations
from engine._store._sqlite_context import SqliteContext
from engine._store._sqlite_conversations import SqliteConversations
from engine._store._sqlite_db import WAL_LIMIT_BYTES, SqliteDb
from engine._store._sqlite_grants import SqliteGrants, SqliteUsage
from engine._store._sqlite_inbox import SqliteInbox
from engine._store._sqlite_jobs import SqliteJobs
from engine._store._sqlite_notes import SqliteNotes
from engine._store._sqlite_ops import SqliteOps
from engine._store._sqlite_schedules import SqliteSchedules


class SqliteStore:
    """`readonly` opens a store another process may be writing, to read it (`relaybot status`):
    it must be of this relaybot's schema version. `wal_limit_bytes` bounds the WAL."""

    def __init__(
        self, path: str | Path, *, readonly: bool = False, wal_limit_bytes: int = WAL_LIMIT_BYTES
    ) -> None:
        self.db = SqliteDb(path, readonly=readonly, wal_limit_bytes=wal_limit_bytes)
        self.path = self.db.path
        self.conversations: ConversationStore = SqliteConversations(self.db)
        self.inbox: InboxStore = SqliteInbox(self.db, self.conversations)
        self.confirmations: ConfirmationStore = SqliteConfirmations(self.db)
        self.jobs: JobStore = SqliteJobs(self.db)
        self.notes: NoteStore = SqliteNotes(self.db)
        self.grants: GrantStore = SqliteGrants(self.db)
        self.usage: UsageStore = SqliteUsage(self.db)
        self.schedules: ScheduleStore = SqliteSchedules(self.db)
        self.chat_settings: ChatSettingsStore = SqliteChatSettings(self.db)
        self.context: ContextStore = SqliteContext(self.db)
        self.ops: OpsStore = SqliteOps(self.db, self.schedules)
        self.cluster: ClusterStore | None = None  # one process per file (bot/_lock.py)

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

    async def __aenter__(self) -> SqliteStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
