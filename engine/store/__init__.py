"""The store: narrow interfaces per consumer (``_api/``); typed rows, reports and state machines
(``_types/``); each part written once over one :class:`Db` interface (``_db``): what a chat's
turns write (``_chat/``), what belongs to users and chats (``_people/``), operating the store
(``_operate/``); composed into one store class (``_composed``), whose parts own their caches
(``_cache``). The backends implement the Db: ``sqlite/`` and ``postgres/`` (imported only when
a configuration asks for PostgreSQL); ``_opening/`` says which one a URL names.

:func:`open_store` picks the backend from the configuration: a ``postgresql://`` URL, else the
SQLite file.
"""

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
    SpendStore,
    Store,
    UsageStore,
)
from engine.store._composed import ComposedStore
from engine.store._db import Db, Dialect
from engine.store._opening._open import open_store
from engine.store._opening._upgrade import plan as upgrade_plan
from engine.store._opening._upgrade import runs_as_it_is
from engine.store._opening._urls import is_postgres, passwords, redact
from engine.store._operate._browse import (
    Activity,
    ConfirmationView,
    ConversationView,
    ScheduleView,
    StoredMessage,
)
from engine.store._operate._console import CLI as CONSOLE_CLI
from engine.store._operate._console import ConsoleSession
from engine.store._people._access import AccessRequest, ApprovedUser, RequestState
from engine.store._people._memory import MemoryItem
from engine.store._types._reports import (
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
from engine.store._types._rows import (
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
    UserDay,
)
from engine.store._types._states import (
    ConfirmationState,
    DeliveryState,
    InboxState,
    JobState,
    ReplyMode,
    RunState,
    ScheduleState,
    VoiceReplies,
)
from engine.store.sqlite import MIGRATIONS, BackupMade, SqliteStore, backup_sqlite

__all__ = [
    "CONSOLE_CLI",
    "MIGRATIONS",
    "AccessRequest",
    "AccessStore",
    "Activity",
    "Adoption",
    "ApprovedUser",
    "BackupMade",
    "BrowseStore",
    "ChannelError",
    "ChatPrefs",
    "ChatSettingsStore",
    "ClusterStore",
    "ComposedStore",
    "ConfirmationRow",
    "ConfirmationState",
    "ConfirmationStore",
    "ConfirmationView",
    "ConsoleSession",
    "ConsoleStore",
    "ContextStore",
    "Conversation",
    "ConversationStore",
    "ConversationView",
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
    "ScheduleView",
    "ServerInfo",
    "SpendStore",
    "Spent",
    "SqliteStore",
    "StatusSnapshot",
    "Store",
    "StoreCounts",
    "StoredMessage",
    "Summary",
    "TokenRatio",
    "UpcomingRun",
    "UsageStore",
    "UsageTotals",
    "UserDay",
    "VoiceReplies",
    "backup_sqlite",
    "is_postgres",
    "open_store",
    "passwords",
    "redact",
    "runs_as_it_is",
    "upgrade_plan",
]
