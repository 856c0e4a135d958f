"""Delivering a stored answer exactly once.

Every message the loop produces is stored as it happens. The answer is stored with a pending
delivery; once the platform has accepted it, its platform id is recorded together with the
inbox messages it answers, in one transaction. So after a crash an answer whose delivery is
recorded is never sent again, and one that is stored but not recorded is sent by recovery
(engine/chat/_dispatch/_recovery.py) before anything new happens in that chat. The only window
left is a crash between the platform accepting a message and that commit (measured in
benchmarks/soak.py).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from engine import Backoff
from engine._channel import Channel, Untrusted
from engine.chat._turns._notices import Notices
from engine.store import Conversation, InboxRow, Store
from tools.errors import StoreUnavailable

log = logging.getLogger("engine.chat._turns._runner")


class Delivery:
    def __init__(self, store: Store, channels: Mapping[str, Channel], notices: Notices) -> None:
        self.store = store
        self.channels = channels
        self.notices = notices

    async def deliver(
        self,
        message_id: int,
        conv: Conversation,
        text: str,
        reply_to: str | None,
        answering: Sequence[InboxRow] = (),
        *,
        last_try: bool = False,
        untrusted: Untrusted | None = None,
    ) -> None:
        """Send a stored answer and record its platform id (and the inbox rows it answers);
        `untrusted`: it follows untrusted content (engine/chat/_turns/_untrusted.py)."""
        channel = self.channels.get(conv.channel)
        if channel is None:
            return
        self.notices.check_lease()
        try:
            ref = await channel.send(
                conv.chat_id, text, reply_to=reply_to, once=str(message_id), untrusted=untrusted
            )
        except Exception as exc:
            # Still pending: the next start-up tries again, unless this was that try.
            log.warning("could not deliver an answer in %s:%s: %s", conv.channel, conv.chat_id, exc)
            async with self.store.transaction():
                if last_try:
                    await self.store.conversations.delivered(message_id, None, failed=True)
                await self.store.inbox.answered([r.id for r in answering])
            return
        await self.delivered(message_id, ref.message_id, answering)

    async def delivered(self, message_id: int, ref: str, answering: Sequence[InboxRow]) -> None:
        """Record that the platform has the answer. The user has it already: while the store
        refuses the record (its disk full, say), it is tried again here, or a recovery would
        send the answer a second time (only a stop in the meantime leaves that to a restart)."""
        backoff = Backoff(1.0, max_s=5.0)
        while True:
            try:
                await self.store.inbox.answered(
                    [r.id for r in answering], delivered=(message_id, ref)
                )
                return
            except StoreUnavailable:  # the store says why, once
                await backoff.sleep()
