"""The store as each consumer sees it: one narrow protocol per part of the engine.

A backend (SQLite, PostgreSQL) implements :class:`Store`, whose attributes are the parts. The
engine depends on these protocols only, and ``tests/test_store_contract.py`` checks every backend
against them, unchanged. A backend that several processes can share also has a
:class:`ClusterStore` (``Store.cluster``; None for one that only one process may use).
"""

from __future__ import annotations

import contextlib
from typing import Protocol

from engine.store._api._chat import (
    ConfirmationStore,
    ContextStore,
    ConversationStore,
    InboxStore,
    JobStore,
)
from engine.store._api._console import BrowseStore, ConsoleStore
from engine.store._api._ops import ClusterStore, OpsStore
from engine.store._api._tools import (
    AccessStore,
    ChatSettingsStore,
    GrantStore,
    MemoryStore,
    ScheduleStore,
    SealedStore,
    SpendStore,
    UsageStore,
)

__all__ = [
    "AccessStore",
    "BrowseStore",
    "ChatSettingsStore",
    "ClusterStore",
    "ConfirmationStore",
    "ConsoleStore",
    "ContextStore",
    "ConversationStore",
    "GrantStore",
    "InboxStore",
    "JobStore",
    "MemoryStore",
    "OpsStore",
    "ScheduleStore",
    "SealedStore",
    "SpendStore",
    "Store",
    "UsageStore",
]


class Store(Protocol):
    """A backend: its parts, one transaction spanning them, and its lifecycle."""

    conversations: ConversationStore
    inbox: InboxStore
    confirmations: ConfirmationStore
    jobs: JobStore
    memory: MemoryStore
    grants: GrantStore
    usage: UsageStore
    spend: SpendStore
    schedules: ScheduleStore
    chat_settings: ChatSettingsStore
    ops: OpsStore
    cluster: ClusterStore | None  # None: one process at a time (SQLite)
    context: ContextStore
    access: AccessStore
    console: ConsoleStore  # the web console's sign-in
    sealed: SealedStore  # MCP servers' OAuth tokens, encrypted by the caller
    browse: BrowseStore  # what the web console reads

    def transaction(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Writes of every part inside the block commit together, or not at all."""
        ...

    async def schema_version(self) -> int: ...

    async def settled(self) -> None:
        """The daemon started on this store: the copy an upgrade made before it may go."""
        ...

    async def watch(self) -> None:
        """Hear of what other processes write from now on (the daemon does; the command line
        does not): what is kept in memory is read again, and the parts' listeners told."""
        ...

    async def __aenter__(self) -> Store: ...

    async def __aexit__(self, *exc: object) -> None: ...
