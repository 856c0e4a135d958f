"""The store: narrow interfaces per consumer (``_api``), typed rows and state machines
(``_records``), and the SQLite backend (``_sqlite*``)."""

from engine._store._api import (
    ConfirmationStore,
    ConversationStore,
    GrantStore,
    InboxStore,
    JobStore,
    NoteStore,
    Store,
    UsageStore,
)
from engine._store._records import (
    ConfirmationRow,
    ConfirmationState,
    Conversation,
    Delivery,
    DeliveryState,
    Grant,
    InboxRow,
    InboxState,
    JobRow,
    JobState,
    UsageTotals,
)
from engine._store._sqlite import SqliteStore
from engine._store._sqlite_schema import MIGRATIONS

__all__ = [
    "MIGRATIONS",
    "ConfirmationRow",
    "ConfirmationState",
    "ConfirmationStore",
    "Conversation",
    "ConversationStore",
    "Delivery",
    "DeliveryState",
    "Grant",
    "GrantStore",
    "InboxRow",
    "InboxState",
    "InboxStore",
    "JobRow",
    "JobState",
    "JobStore",
    "NoteStore",
    "SqliteStore",
    "Store",
    "UsageStore",
    "UsageTotals",
]
