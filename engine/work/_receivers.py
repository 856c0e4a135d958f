"""Which instance receives for each part of a channel's receiving side, when several instances
share a store (see engine/work/_cluster.py, which calls this every tick).

A part (``Channel.receivers``: Telegram's polling, the Discord gateway, one Discord shard) is
held by one instance at a time, in the store's ``receivers`` rows, and each instance has a
``Claim`` on it. A part every instance claims alike (EQUAL) goes to whoever finds it free. A
part that is this instance's OWN (Discord's ``shard_ids``) is taken as soon as it is free, and
asked back (a *want* signal, once a lease) while another instance holds it. A FALLBACK part (an
instance's own elsewhere) is taken only once this instance has been up for a lease, so that its
own instance gets it first, and only while no live instance asks for it; asked for, it is given
back at once.

While a part is held, what its next holder would resume from (a Discord shard's gateway
session, ``Channel.receiving_state``, which counts only what has been stored) is kept in the
store when it changes, looked at every ``KEEP_S`` (:meth:`Receivers.run`: a tick is too long for
a session just started, which nothing else could resume), and when the holder lets go of it. So the
instance that takes a dead or stopping instance's shard resumes its session, and Discord sends
again the events nobody received in between: a message sent while the shard's holder was dead
is answered, not lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from engine._channel import Channel, Claim, Receiver
from engine._clock import monotonic
from engine.store import ClusterStore
from engine.work._resuming import KEEP_S
from tools.errors import StoreError

log = logging.getLogger("engine.work._cluster")

WANT = "want"  # the kind of signal that asks for a part


@dataclass(slots=True)
class _Part:
    channel: str  # its channel's name
    receiver: Receiver
    state: str | None = None  # what the store keeps to resume it from


class Receivers:
    """The receiving parts this instance holds, and the rules for taking and giving them."""

    def __init__(self, store: ClusterStore, channels: Mapping[str, Channel], lease_s: float):
        self.store = store
        self.channels = channels
        self.lease_s = lease_s
        self._held: dict[str, _Part] = {}  # by lease
        self._joined_at: float | None = None  # monotonic time this instance first joined
        self._wanted_at: dict[str, float] = {}  # lease → when this instance last asked for it
        self._asked: dict[str, float] = {}  # lease → when another instance last asked for it

    def joined(self, at: float) -> None:
        if self._joined_at is None:
            self._joined_at = at

    async def tick(self, incarnation: int | None) -> None:
        """Take the parts this instance may take, keep what the held ones would resume from,
        and ask for this instance's own ones another instance holds."""
        parts = {
            receiver.lease: self._held.get(receiver.lease) or _Part(name, receiver)
            for name, channel in self.channels.items()
            for receiver in channel.receivers()
            if self._may_take(receiver)
        }
        if not parts:
            return
        held = await self.store.receive(list(parts))
        for lease, part in parts.items():
            if lease not in held:
                if lease in self._held:  # another instance took it: this one was thought dead
                    await self.let_go(lease, record=False)
                elif part.receiver.claim is Claim.OWN:
                    await self._want(lease, incarnation)
            elif lease not in self._held:
                if not self._may_take(part.receiver):  # asked for meanwhile: leave it be
                    await self.store.stop_receiving(lease, held[lease])
                    continue
                try:
                    await self.channels[part.channel].set_receiving(lease, True, held[lease])
                except Exception:
                    log.exception("%s: could not start receiving; left to another instance", lease)
                    await self.store.stop_receiving(lease, held[lease])
                    continue
                log.info("%s: this instance receives now", lease)
                self._held[lease] = part
                part.state = held[lease]
            else:
                await self._keep(lease, part)

    async def run(self) -> None:
        """Keep what the held parts would resume from, every KEEP_S, until cancelled."""
        while True:
            await asyncio.sleep(KEEP_S)  # a period, not a wait for something
            with contextlib.suppress(StoreError):  # the cluster's tick reports the database
                for lease, part in list(self._held.items()):
                    await self._keep(lease, part)

    async def _keep(self, lease: str, part: _Part) -> None:
        state = self.channels[part.channel].receiving_state(lease)
        if state is not None and state != part.state:
            await self.store.checkpoint(lease, state)
            part.state = state

    def asked_for(self, lease: str) -> bool:
        """Another instance asks for `lease`: True if this instance holds it and gives it back
        (with :meth:`let_go`). Either way it is not taken here while that instance asks."""
        self._asked[lease] = monotonic()
        part = self._held.get(lease)
        if part is None or part.receiver.claim is not Claim.FALLBACK:
            return False
        log.info("%s: given back to the instance whose own it is", lease)
        return True

    async def let_go(self, lease: str, *, record: bool = True) -> None:
        """Stop receiving for `lease`; with `record`, leave what to resume from to its next
        holder (without: the database is away, or another instance holds it already)."""
        part = self._held.pop(lease, None)
        if part is None:
            return
        state = None
        try:
            state = await self.channels[part.channel].set_receiving(lease, False)
        except Exception:
            log.exception("%s: could not stop receiving", lease)
        if record:
            with contextlib.suppress(StoreError):
                await self.store.stop_receiving(lease, state)

    async def let_go_all(self, *, record: bool = True) -> None:
        for lease in list(self._held):
            await self.let_go(lease, record=record)

    def _may_take(self, receiver: Receiver) -> bool:
        if receiver.claim is not Claim.FALLBACK or receiver.lease in self._held:
            return True
        now = monotonic()
        up = self._joined_at is not None and now - self._joined_at >= self.lease_s
        asked = self._asked.get(receiver.lease)
        return up and (asked is None or now - asked >= 2 * self.lease_s)

    async def _want(self, lease: str, incarnation: int | None) -> None:
        """Ask the instance holding a part of this one's own to give it back (once a lease)."""
        now = monotonic()
        last = self._wanted_at.get(lease)
        if last is None or now - last >= self.lease_s:
            self._wanted_at[lease] = now
            await self.store.publish(json.dumps({"k": WANT, "r": lease, "o": incarnation}))
