"""One process alone on its store (SQLite): where its channels' receiving parts resume after a
restart.

Instances sharing a store keep what each receiving part would resume from in the store while
they hold it (``_receivers``). A process alone keeps it in the same rows, held by nobody: every
:data:`KEEP_S`, what each part would resume from if the process died now
(``Channel.receiving_state``: a Discord shard's gateway session, counting only the messages
already stored), as soon as the channels run (a new session is resumable at once), and once
more as it stops. At start, before the channels connect, each part is given what was kept
(``Channel.set_receiving``), so Discord sends again whatever came after it: what it delivered as
the process died, and what was written while it was down (for as long as Discord keeps a
session; after that the channel starts a new one and says so).

What is kept lags what is stored by up to :data:`KEEP_S`, which only makes Discord send a few
events again: the inbox takes a message once. It is written only when it changed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Mapping

from engine._channel import Channel, Claim
from engine.store import OpsStore
from tools.errors import StoreError

KEEP_S = 0.25  # how stale the kept point may be: a new session is kept this soon after it starts


class Resuming:
    """What one process alone keeps to resume its channels' receiving parts from."""

    def __init__(self, store: OpsStore, channels: Mapping[str, Channel]) -> None:
        self.store = store
        self.channels = channels  # the dispatcher's, as channels are added
        self._kept: dict[str, str] = {}  # lease → what the store holds for it

    def _parts(self) -> Iterator[tuple[Channel, str]]:
        for channel in self.channels.values():
            for receiver in channel.receivers():
                if receiver.claim is not Claim.FALLBACK:  # another instance's own, not this one's
                    yield channel, receiver.lease

    async def resume(self) -> None:
        """Give each part what was kept for it; before the channels start."""
        self._kept = await self.store.resume_points()
        for channel, lease in self._parts():
            if (state := self._kept.get(lease)) is not None:
                await channel.set_receiving(lease, True, state)

    async def run(self) -> None:
        """Keep what each part would resume from, every KEEP_S, until cancelled."""
        while True:
            await asyncio.sleep(KEEP_S)  # a period, not a wait for something
            await self.keep()

    async def keep(self) -> None:
        """Keep what each part would resume from now (not now if the store refuses: it says
        why itself, and the point kept before stays good)."""
        with contextlib.suppress(StoreError):
            for channel, lease in self._parts():
                state = channel.receiving_state(lease)
                if state is not None and state != self._kept.get(lease):
                    await self.store.keep_resume_point(lease, state)
                    self._kept[lease] = state
