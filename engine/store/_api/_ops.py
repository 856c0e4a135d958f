"""The store as operating it sees it: status, pruning, forgetting (:class:`OpsStore`), and what
instances sharing one store keep there (:class:`ClusterStore`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Protocol

from engine.store._types._reports import (
    Adoption,
    ChannelError,
    Forgotten,
    Pruned,
    ServerInfo,
    StatusSnapshot,
    StoreCounts,
)


class OpsStore(Protocol):
    """Operating it: what the daemon is doing, its last errors, bounded growth, forgetting."""

    async def status(self) -> StatusSnapshot:
        """What is queued, running and waiting (`relaybot status`); works on a read-only store."""
        ...

    async def counts(self) -> StoreCounts: ...

    async def record_errors(self, errors: Sequence[ChannelError]) -> None:
        """Keep each channel's newest error (one row per channel)."""
        ...

    async def prune(self, settled_before: float, history_before: float | None = None) -> Pruned:
        """Delete what is settled (answered inbox rows, sent deliveries, finished jobs and
        scheduled runs, decided confirmations) from before `settled_before`; with
        `history_before`, also each conversation's messages from before then, cut at a user
        message so every remaining tool result keeps its call. Unix times."""
        ...

    async def compact(self) -> None:
        """Give space back between bursts (SQLite: checkpoint and truncate the WAL; PostgreSQL:
        nothing, the server keeps its own log)."""
        ...

    async def forget_user(
        self, channel: str | None, user_id: str, *, dry_run: bool = False
    ) -> Forgotten:
        """Delete everything stored about a user of `channel` (None: of every channel), in one
        transaction: their private chats whole; in groups their messages and the bot's
        messages of the exchanges they took part in; their inbox rows, memory, reminders and
        jobs, schedules, confirmations, grants they gave, usage and settings; the summaries
        that cover any of it. `dry_run` counts without deleting."""
        ...

    def on_forgot(self, listener: Callable[[], object]) -> None:
        """Call `listener` when a user may have been forgotten, by any process."""
        ...

    async def resume_points(self) -> dict[str, str]:
        """What the receiving parts were left to resume from (a Discord shard's gateway
        session), by part, as :meth:`keep_resume_point` kept it; for one process alone on its
        store (instances sharing one keep theirs through :class:`ClusterStore`)."""
        ...

    async def keep_resume_point(self, part: str, resume: str) -> None: ...


class ClusterStore(Protocol):
    """What instances sharing one store keep there (engine/work/_cluster.py drives it): liveness,
    who holds each chat and each channel's receiving side, and notifications of work."""

    @property
    def incarnation(self) -> int | None: ...

    async def join(self, name: str, lease_s: float) -> int:
        """Register this process as a new live instance; returns its id."""
        ...

    async def heartbeat(self, timeout: float) -> bool:
        """Renew this instance's lease; False when it was found dead and taken over.
        :class:`tools.errors.StoreUnavailable` when it took longer than `timeout` seconds."""
        ...

    async def live(self) -> tuple[int, ...]:
        """The ids of the live instances (this one too), in order."""
        ...

    async def leave(self) -> None:
        """A clean stop: what this instance still holds is taken over at once."""
        ...

    async def adopt(self, channels: Sequence[str]) -> Adoption | None:
        """Take over one dead instance's chats (of `channels`) and running jobs, if any."""
        ...

    async def unheld(self, channels: Sequence[str]) -> frozenset[tuple[str, str]]:
        """The chats (of `channels`) with unfinished work that no instance holds."""
        ...

    async def orphans(self, chats: Collection[tuple[str, str]]) -> Adoption:
        """Claim those of `chats` that still have unfinished work nobody holds, and the jobs
        nobody runs."""
        ...

    async def claim(self, channel: str, chat_id: str) -> bool:
        """Hold a chat that nobody holds; False when another instance holds it."""
        ...

    async def release(self, channel: str, chat_id: str) -> None: ...

    async def holder(self, channel: str, chat_id: str) -> str | None:
        """The name of the live instance holding the chat, if any."""
        ...

    async def receive(self, parts: Sequence[str]) -> dict[str, str | None]:
        """Hold those receiving parts that no live instance holds, keeping those held here;
        returns the ones held here, with what their last holder left to resume from."""
        ...

    async def checkpoint(self, part: str, resume: str | None) -> None:
        """Keep what another instance would resume `part` from if this one died now."""
        ...

    async def stop_receiving(self, part: str, resume: str | None = None) -> None: ...

    async def publish(self, payload: str) -> None:
        """Tell every instance (this one too); delivered once committed."""
        ...

    async def hand_over(
        self, signals: Sequence[tuple[str, str, int | None, bool, str]]
    ) -> list[int | None]:
        """Publish chat signals ``(channel, chat_id, home, alone, payload)`` in order: those
        `alone` to the chat's holder, else `home`, alone; returns the instance each went to
        alone (None: every instance was told, as by :meth:`publish`)."""
        ...

    def on_signal(self, listener: Callable[[str], None]) -> None: ...

    def on_addressed(self, listener: Callable[[str], None]) -> None:
        """`listener` hears what :meth:`hand_over` addressed to this instance."""
        ...

    def on_reconnect(self, hook: Callable[[], Awaitable[None]]) -> None:
        """Run `hook` after notifications may have been missed."""
        ...

    async def listen(self) -> None: ...

    async def server(self) -> ServerInfo:
        """The server's version, a round trip's time and the live instances."""
        ...
