"""What the store reports about itself: what `relaybot status` shows, the metrics' figures,
what housekeeping pruned and forgetting deleted, what a cluster instance adopted, the server."""

from __future__ import annotations

from dataclasses import dataclass

from engine._errors import ChannelError
from engine.store._types._states import JobState


@dataclass(frozen=True, slots=True)
class QueuedChat:
    """A chat with messages waiting for their turn."""

    channel: str
    chat_id: str
    messages: int
    oldest: float  # when the oldest arrived (unix time)
    held_until: float | None  # the earliest a message held by the rate limit may be taken


@dataclass(frozen=True, slots=True)
class Running:
    """Work in progress in a chat: a turn answering messages, a scheduled run, an approved
    action."""

    channel: str
    chat_id: str
    what: str
    since: float | None  # unix time it started (None: not recorded, e.g. an older version's)


@dataclass(frozen=True, slots=True)
class PendingPrompt:
    """A confirmation waiting for its requester."""

    id: str
    channel: str
    chat_id: str
    user_id: str
    tool: str
    summary: str
    expires_at: float


@dataclass(frozen=True, slots=True)
class JobView:
    """A background job not yet told to its chat; `due` is a reminder's time (its `at`)."""

    id: str
    channel: str
    chat_id: str
    user_id: str
    tool: str
    state: JobState
    since: float
    due: float | None = None


@dataclass(frozen=True, slots=True)
class UpcomingRun:
    """A scheduled task's next run."""

    schedule_id: int
    channel: str
    chat_id: str
    task: str
    next_due: float


@dataclass(frozen=True, slots=True)
class StatusSnapshot:
    """What the store says the daemon is doing (`relaybot status`)."""

    schema_version: int
    queued: list[QueuedChat]
    running: list[Running]
    confirmations: list[PendingPrompt]
    jobs: list[JobView]
    upcoming: list[UpcomingRun]
    errors: list[ChannelError]
    conversations: int  # active ones
    messages: int  # stored, in every conversation


@dataclass(frozen=True, slots=True)
class StoreCounts:
    """The store's figures for the metrics gauges."""

    confirmations_pending: int
    jobs_running: int
    db_bytes: int
    wal_bytes: int | None  # None: no write-ahead log of the store's own (PostgreSQL)


@dataclass(frozen=True, slots=True)
class Pruned:
    """Rows housekeeping deleted: settled ones past the retention, history past keep_days."""

    inbox: int = 0
    deliveries: int = 0
    jobs: int = 0
    runs: int = 0
    confirmations: int = 0
    messages: int = 0

    @property
    def total(self) -> int:
        return sum(
            (self.inbox, self.deliveries, self.jobs, self.runs, self.confirmations, self.messages)
        )


@dataclass(frozen=True, slots=True)
class Forgotten:
    """What forgetting a user deleted (or would delete: a dry run counts the same way)."""

    messages: int = 0
    conversations: int = 0
    inbox: int = 0
    memory: int = 0  # facts remembered about them
    grants: int = 0
    usage: int = 0
    schedules: int = 0
    settings: int = 0
    confirmations: int = 0
    jobs: int = 0
    summaries: int = 0
    access: int = 0  # their requests to use the bot, and an owner's approval
    job_ids: tuple[str, ...] = ()  # jobs that may still run in the daemon: cancel them
    private_chats: tuple[tuple[str, str], ...] = ()  # (channel, chat id) removed whole

    def described(self) -> str:
        """The counts in words, the empty ones left out."""
        words = [
            (self.messages, "message", "messages"),
            (self.memory, "remembered fact", "remembered facts"),
            (self.schedules, "scheduled task", "scheduled tasks"),
            (self.jobs, "background job or reminder", "background jobs and reminders"),
            (self.confirmations, "confirmation", "confirmations"),
            (self.grants, "permission", "permissions"),
            (self.settings, "setting", "settings"),
            (self.usage, "day of usage figures", "days of usage figures"),
            (self.inbox, "record of a received message", "records of received messages"),
            (self.summaries, "conversation summary", "conversation summaries"),
            (self.access, "request or approval to use me", "requests and approvals to use me"),
        ]
        said = [f"{n} {one if n == 1 else many}" for n, one, many in words if n]
        return ", ".join(said) or "nothing"


@dataclass(frozen=True, slots=True)
class Adoption:
    """What an instance took over (engine/work/_cluster.py): a dead instance's chats and running
    jobs (`instance` its name), or chats and jobs that nobody held (`instance` "")."""

    instance: str
    chats: tuple[tuple[str, str], ...]  # (channel, chat id)
    jobs: tuple[str, ...]  # job ids


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """A shared store's server as `relaybot doctor` reports it."""

    version: str
    round_trip_s: float  # the median of a few trivial statements
    instances: tuple[str, ...]  # the live instances' names
    receiving: tuple[tuple[str, str], ...] = ()  # (receiving part, the live instance holding it)
