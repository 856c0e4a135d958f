"""The per-chat work: one queue per chat so everything touching a conversation runs in order
(``_queue``), and, with several instances on one store, which instance works on which chat
(``_cluster``) and receives for which part of a channel (``_receivers``); one process alone keeps
where its channels resume receiving after a restart (``_resuming``). ``Tasks`` runs
fire-and-forget work that is logged and awaited.
"""

from __future__ import annotations

from engine.work._cluster import Cluster, ClusterEvents, InstanceSettings
from engine.work._items import (
    Compact,
    Decided,
    Inbound,
    JobDone,
    Notice,
    Recover,
    Rewind,
    ScheduledRun,
    WorkItem,
)
from engine.work._locks import KeyedLocks
from engine.work._queue import ChatQueues
from engine.work._resuming import Resuming
from engine.work._tasks import Tasks

__all__ = [
    "ChatQueues",
    "Cluster",
    "ClusterEvents",
    "Compact",
    "Decided",
    "Inbound",
    "InstanceSettings",
    "JobDone",
    "KeyedLocks",
    "Notice",
    "Recover",
    "Resuming",
    "Rewind",
    "ScheduledRun",
    "Tasks",
    "WorkItem",
]
