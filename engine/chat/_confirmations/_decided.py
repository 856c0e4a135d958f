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

At start-up (and as chats are taken over) the turn of a decision that a crash cut off is queued
again (:meth:`Decisions.recover`): a decline or an expiry, and an action a restart recorded as cut
off, with no answer in the history since its call (its Decided item died with the process, or
the model had not answered yet). Its turn then goes on before anything new in the chat, without
waiting for the user to write again; a turn /stop ended stays ended.

A refusal by the store in the middle of such a turn is settled as a restart settles a crash, but
from what this process knows (chat/_held.py): an action that surely did not start is run, once;
one that ran has its result recorded, and the turn goes on from there. A turn whose call's result
is recorded but not answered is finished from the history (:func:`finish_after_action`).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence

from engine.chat._commands._commands import STOPPED
from engine.chat._confirmations._confirmations import DELEGATED, Confirmations
from engine.chat._dispatch._recovery import finish_after_action
from engine.chat._turns._runner import RESTARTED, TurnRunner
from engine.loop import ConversationKey
from engine.models import Message, Role
from engine.store import ConfirmationRow, Store
from engine.store import ConfirmationState as S
from engine.work import ChatQueues, Decided
from tools.errors import StoreUnavailable

log = logging.getLogger("engine.chat._confirmations._confirmations")

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
        self._restarted: set[str] = set()  # queued by recover: what cut them off is a restart

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
        self._restarted.discard(confirmation_id)

    async def before_turn(self, key: ConversationKey, reason: str) -> None:
        """Before a turn that moves the chat on: what was decided before it, then the pending
        confirmations cancelled (`reason` is their calls' result)."""
        while True:
            async with self.confirmations.deciding.hold(key):
                first = self.held.in_chat(key)
                first += [i.confirmation_id for i in self.queues.take(key, Decided)]
                if not first:
                    await self.confirmations.cancel_pending(key, reason)
                    return
            for confirmation_id in dict.fromkeys(first):  # their turns may ask again: loop
                await self.run(key, confirmation_id)

    async def recover(self, chats: Collection[ConversationKey] | None = None) -> None:
        """At start-up (or as chats are taken over; in `chats`, else all), before recovery
        queues the approved and the started confirmations again: a confirmation declined,
        expired or recorded as cut off by a restart whose turn a crash left unfinished (no
        answer since its call, the latest of them: :func:`_unfinished`; no prompt of the chat
        waiting) is queued again; its Decided item records the call's result, or finishes the
        turn from the history."""
        by_conversation: dict[int, list[ConfirmationRow]] = {}
        for state in _REFUSED:
            for conf in await self.confirmations.rows.in_state(state):
                key = ConversationKey(conf.channel, conf.chat_id)
                if (chats is None or key in chats) and not conf.call_id.startswith(DELEGATED):
                    by_conversation.setdefault(conf.conversation_id, []).append(conf)
        conversations = self.store.conversations
        lasts = await conversations.lasts(list(by_conversation))
        for conversation_id, confs in by_conversation.items():
            last = lasts.get(conversation_id)
            if last is None or not _mid_turn(last):
                continue  # the usual case: nothing more to read
            history = await conversations.history(conversation_id, 50)
            cut = _unfinished(history, confs)
            if cut is None:
                continue
            key = ConversationKey(cut.channel, cut.chat_id)
            if (
                await self._waits(key)
                or (await conversations.active(key.channel, key.chat_id)).id != conversation_id
            ):
                continue
            log.warning(
                "going on with the turn of confirmation %s (%s, %s) the restart held up",
                cut.id,
                cut.tool,
                cut.state.value,
            )
            self._restarted.add(cut.id)
            self.queues.put(key, Decided(cut.id))

    async def _waits(self, key: ConversationKey) -> bool:
        """The chat's turn waits for a press, or for an approved action recovery goes on with:
        not cut off (a later call of the turn asked again)."""
        if await self.confirmations.open_in(key):
            return True
        return bool(await self.confirmations.rows.in_state(S.EXECUTING, key.channel, key.chat_id))

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
                restarted = conf.state is S.INTERRUPTED or conf.id in self._restarted
                await finish_after_action(self.turns, conf, RESTARTED if restarted else CUT)
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
        conversations = self.store.conversations  # a stopped turn's results count too
        history = await conversations.history(conf.conversation_id, 50, with_stopped=True)
        return any(m.result is not None and m.result.call_id == conf.call_id for m in history)


def _mid_turn(last: Message) -> bool:
    """The history ends inside a turn: with a call, or a call's result (not a /stop's, which
    ended the turn)."""
    return bool(last.tool_calls) or (last.result is not None and last.result.text != STOPPED)


def _unfinished(
    history: Sequence[Message], confs: Sequence[ConfirmationRow]
) -> ConfirmationRow | None:
    """Of `confs`, the one whose call comes last in the history, when nothing since answered
    it or moved the chat on: its result was never recorded, or the turn was cut off before the
    model answered."""
    at = {call.id: i for i, m in enumerate(history) for call in m.tool_calls}
    placed = [(at[conf.call_id], conf) for conf in confs if conf.call_id in at]
    if not placed:
        return None
    i, conf = max(placed, key=lambda p: p[0])
    if any(m.is_answer or m.role is Role.USER for m in history[i:]):
        return None
    return conf
