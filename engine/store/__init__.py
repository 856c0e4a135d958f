"""The store: narrow interfaces per consumer (``_api*``), typed rows (``_rows``), reports
(``_reports``) and state machines (``_states``); each part written once (``_inbox``,
``_conversations``, ...) over one :class:`Db` interface (``_db``), composed into one store class
(``_composed``); the backends implement the Db: ``sqlite/`` and ``postgres/`` (imported only
when a configuration asks for PostgreSQL).

:func:`open_store` picks the backend from the configuration: a ``postgresql://`` URL, else the
SQLite file.
"""

from engine.store._access import AccessRequest, ApprovedUser, RequestState
from engine.store._api import (
    AccessStore,
    ChatSettingsStore,
    ClusterStore,
    ConfirmationStore,
    ContextStore,
    ConversationStore,
    GrantStore,
    InboxStore,
    JobStore,
    MemoryStore,
    OpsStore,
    ScheduleStore,
    SpendStore,
    Store,
    UsageStore,
)
from engine.store._composed import ComposedStore
from engine.store._db import Db, Dialect
from engine.store._memory import MemoryItem
from engine.store._open import open_store
from engine.store._reports import (
    Adoption,
    ChannelError,
    Forgotten,
    JobView,
    PendingPrompt,
    Pruned,
    QueuedChat,
    Running,
    ServerInfo,
    StatusSnapshot,
    StoreCounts,
    UpcomingRun,
)
from engine.store._rows import (
    ChatPrefs,
    ConfirmationRow,
    Conversation,
    Delivery,
    Grant,
    InboxRow,
    JobRow,
    ScheduleRow,
    ScheduleRun,
    Spent,
    Summary,
    TokenRatio,
    UsageTotals,
)
from engine.store._states import (
    ConfirmationState,
    DeliveryState,
    InboxState,
    JobState,
    ReplyMode,
    RunState,
    ScheduleState,
    VoiceReplies,
)
from engine.store._upgrade import plan as upgrade_plan
from engine.store._urls import is_postgres, redact
from engine.store.sqlite import MIGRATIONS, BackupMade, SqliteStore, backup_sqlite

__all__ = [
    "MIGRATIONS",
    "AccessRequest",
    "AccessStore",
    "Adoption",
    "ApprovedUser",
    "BackupMade",
    "ChannelError",
    "ChatPrefs",
    "ChatSettingsStore",
    "ClusterStore",
    "ComposedStore",
    "ConfirmationRow",
    "ConfirmationState",
    "ConfirmationStore",
    "ContextStore",
    "Conversation",
    "ConversationStore",
    "Db",
    "Delivery",
    "DeliveryState",
    "Dialect",
    "Forgotten",
    "Grant",
    "GrantStore",
    "InboxRow",
    "InboxState",
    "InboxStore",
    "JobRow",
    "JobState",
    "JobStore",
    "JobView",
    "MemoryItem",
    "MemoryStore",
    "OpsStore",
    "PendingPrompt",
    "Pruned",
    "QueuedChat",
    "ReplyMode",
    "RequestState",
    "RunState",
    "Running",
    "ScheduleRow",
    "ScheduleRun",
    "ScheduleState",
    "ScheduleStore",
    "ServerInfo",
    "SpendStore",
    "Spent",
    "SqliteStore",
    "StatusSnapshot",
    "Store",
    "StoreCounts",
    "Summary",
    "TokenRatio",
    "UpcomingRun",
    "UsageStore",
    "UsageTotals",
    "VoiceReplies",
    "backup_sqlite",
    "is_postgres",
    "open_store",
    "redact",
    "upgrade_plan",
]
