"""The store: narrow interfaces per consumer (``_api``), typed rows and state machines
(``_records``), the SQLite backend (``_sqlite*``) and the PostgreSQL one (``_pg*``).

:func:`open_store` picks the backend from the configuration: a ``postgresql://`` URL, else the
SQLite file.
"""

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
    ScheduleStore,
    Store,
    UsageStore,
)
from engine._store._open import is_postgres, open_store
from engine._store._records import (
    Adoption,
    ChatPrefs,
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
    ReplyMode,
    RunState,
    ScheduleRow,
    ScheduleRun,
    ScheduleState,
    Summary,
    TokenRatio,
    UsageTotals,
)
from engine._store._sqlite import SqliteStore
from engine._store._sqlite_schema import MIGRATIONS

__all__ = [
    "MIGRATIONS",
    "Adoption",
    "ChatPrefs",
    "ChatSettingsStore",
    "ClusterStore",
    "ConfirmationRow",
    "ConfirmationState",
    "ConfirmationStore",
    "ContextStore",
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
    "ReplyMode",
    "RunState",
    "ScheduleRow",
    "ScheduleRun",
    "ScheduleState",
    "ScheduleStore",
    "SqliteStore",
    "Store",
    "Summary",
    "TokenRatio",
    "UsageStore",
    "UsageTotals",
    "is_postgres",
    "open_store",
]
