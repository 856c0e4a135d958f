"""An answered confirmation's turn, run in the chat's order: the call run (once) or refused, then
the turn goes on to its answer.

A press is answered outside the chat's queue (the user must hear "Confirmed." at once) and its
:class:`Decided` item is queued; so are an expiry's. A turn that moves the conversation on (a new
message, a scheduled task) first does what was decided before it (:meth:`Decisions.before_turn`):
the Decided items waiting in the queue and the approved actions whose turn the store cut off,
then cancels what is still pending. The press and that step take the chat's deciding lock, so a
press is either before the turn (its action runs first) or after it (it finds the confirmation
cancelled): the new turn never starts while a call of the history waits for its result, which
would put the result after a later user message.

A refusal by the store in the middle of such a turn is settled as a restart settles a crash, but
from what this process knows (chat/_held.py): an action that surely did not start is run, once;
one that ran has its result recorded, and the turn goes on from there. A turn whose call's result
is recorded but not answered is finished from the history (:func:`finish_after_action`).
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from engine.chat._confirmations import DELEGATED, Confirmations
from engine.chat._recovery import finish_after_action
from engine.chat._turns import RESTARTED, TurnRunner
from engine.loop import ConversationKey
from engine.store import ConfirmationRow, Store
from engine.store import ConfirmationState as S
from engine.work import ChatQueues, Decided
from tools.errors import StoreUnavailable

log = logging.getLogger("engine.chat._confirmations")

_REFUSED = (S.DECLINED, S.EXPIRED, S.INTERRUPTED)  # resumed with a refusal: told why
CUT = "interrupted: relaybot's store refused to record this call's result; it was not run again."


class Decisions:
    def __init__(
        self, store: Store, confirmations: Confirmations, turns: TurnRunner, queues: ChatQueues
    ) -> None:
        self.store = store
        self.confirmations = confirmations
        self.held = confirmations.held
        self.turns = turns
        self.queues = queues
        self._suspects: set[ConversationKey] = set()  # chats _lost looks at (from recover)

    async def run(self, key: ConversationKey, confirmation_id: str) -> None:
        """A :class:`Decided` item: resume the confirmation's turn, unless that was done."""
        try:
            await self._run(confirmation_id)
        except StoreUnavailable:  # tried again (chat/_stalled.py), before the chat's next turn
            self.held.cut(key, confirmation_id)
            raise
        except BaseException:
            self.held.forget(confirmation_id)
            raise
        self.held.forget(confirmation_id)

    async def before_turn(
        self, key: ConversationKey, reason: str, is_private: bool | None = None
    ) -> None:
        """Before a turn that moves the chat on: what was decided before it, then the pending
        confirmations cancelled (`reason` is their calls' result). With `is_private` (the new
        messages'), a chat's first turn after a restart also looks for an answer the restart
        lost (:meth:`_lost`)."""
        while True:
            async with self.confirmations.deciding.hold(key):
                first = self.held.in_chat(key)
                first += [i.confirmation_id for i in self.queues.take(key, Decided)]
                if not first and is_private is not None and key in self._suspects:
                    first = await self._lost(key, is_private)
                if not first:
                    await self.confirmations.cancel_pending(key, reason)
                    return
            for confirmation_id in dict.fromkeys(first):  # their turns may ask again: loop
                await self.run(key, confirmation_id)

    async def recover(self, chats: Collection[ConversationKey] | None = None) -> None:
        """At start-up (or as chats are taken over): the chats (in `chats`, else all) with a
        declined or expired confirmation are looked at before their first turn (:meth:`_lost`).
        Recovery queues the approved and the started ones again, not these."""
        for state in (S.DECLINED, S.EXPIRED):
            for conf in await self.confirmations.rows.in_state(state):
                key = ConversationKey(conf.channel, conf.chat_id)
                if chats is None or key in chats:
                    self._suspects.add(key)

    async def _lost(self, key: ConversationKey, is_private: bool) -> list[str]:
        """A confirmation declined or expired just before a restart whose Decided item died with
        the process: its call still waits for its result at the end of the history."""
        self._suspects.discard(key)
        conversations = self.store.conversations
        conv = await conversations.active(key.channel, key.chat_id, is_private=is_private)
        last = await conversations.last(conv.id)
        calls = {c.id for c in last.tool_calls} if last is not None else set()
        if not calls:
            return []
        lost: list[str] = []
        for state in (S.DECLINED, S.EXPIRED):
            rows = await self.confirmations.rows.in_state(state, key.channel, key.chat_id)
            lost += [c.id for c in rows if c.call_id in calls]
        return lost

    async def _run(self, confirmation_id: str) -> None:
        conf = await self.confirmations.rows.get(confirmation_id)
        if conf is None or conf.call_id.startswith(DELEGATED):  # its task asked, and waits
            return
        known = self.held.result(conf.id)
        if self.held.carries_on(conf):
            log.info(
                "carrying on with approved action %s (%s) in %s:%s after the store refused a "
                "write of its turn (%s)",
                conf.id,
                conf.tool,
                conf.channel,
                conf.chat_id,
                "not started" if known is None else "it ran",
            )
            if known is not None and await self._recorded(conf):
                await finish_after_action(self.turns, conf, CUT)
                await self.confirmations.finish(conf, known)
                return
            begun: tuple[ConfirmationRow, bool, str | None] | None = (conf, True, None)
        else:
            begun = await self.confirmations.begin(conf)
        if begun is None:  # resumed already: its turn may want finishing
            if conf.state in _REFUSED:
                cut = RESTARTED if conf.state is S.INTERRUPTED else CUT
                await finish_after_action(self.turns, conf, cut)
            return
        conf, approved, _ = begun
        conv = await self.store.conversations.active(conf.channel, conf.chat_id)
        result = await self.turns.run(
            conv, conf.user_id, conf.user_name, conf.reply_to, resume=begun
        )
        if approved:
            outcome = result.approved if result is not None else None
            await self.confirmations.finish(conf, outcome or self.held.result(conf.id))

    async def _recorded(self, conf: ConfirmationRow) -> bool:
        """The call's result is in the history."""
        history = await self.store.conversations.history(conf.conversation_id, 50)
        return any(m.result is not None and m.result.call_id == conf.call_id for m in history)
