"""What a crash or restart left in a chat, settled before anything new is taken there.

An answer stored but not recorded as delivered is sent (once: this is its last try); messages a
turn had taken are answered by what the turn got to: a confirmation prompt it asked (shown if it
was not yet), an answer already delivered, or else the turn is finished now, its cut-off calls
closed as "interrupted" (except one an older turn still waits on). A turn that an approved
action's prompt had answered, cut off after the action ran to the end, is finished from its
history too (:func:`finish_after_action`, also after a refusal by the store: chat/_decided.py).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from engine.chat._confirmations._confirmations import DELEGATED
from engine.chat._turns._runner import RESTARTED, TurnRunner
from engine.chat._turns._untrusted import untrusted_of
from engine.loop import ConversationKey
from engine.models import Message, Role
from engine.store import ConfirmationRow, ConfirmationState, Conversation, InboxState

log = logging.getLogger("engine.chat._turns._runner")


async def recover(turns: TurnRunner, key: ConversationKey) -> None:
    """Settle what a crash left in the chat, before anything new is taken."""
    conversations = turns.store.conversations
    for d in await conversations.undelivered(key.channel, key.chat_id):
        conv = Conversation(d.conversation_id, d.channel, d.chat_id, True)
        log.info("delivering an answer a restart held up in %s", key)  # one a chat: not a warning
        read = await conversations.history(d.conversation_id, turns.settings.history_limit)
        untrusted = untrusted_of(read, turns.settings.system_prompt)
        await turns.delivery.deliver(
            d.message_id, conv, d.text, d.reply_to, last_try=True, untrusted=untrusted
        )
    rows = await turns.store.inbox.rows(InboxState.TAKEN, key.channel, key.chat_id)
    if not rows:
        return
    last = rows[-1]
    conv = await conversations.active(key.channel, key.chat_id, is_private=last.is_private)
    history = await conversations.history(conv.id, turns.settings.history_limit)
    open_confirmations = await turns.confirmations.open_in(key)
    waiting = _asked_in_last_turn(history, open_confirmations)
    if waiting:  # the turn of these rows ended in a question: the prompt answered them
        for conf in waiting:
            if conf.message_ref is None and conf.state is ConfirmationState.PENDING:
                await turns.confirmations.show(conf)
        await turns.store.inbox.answered([r.id for r in rows])
        return
    if history and history[-1].is_answer:  # answered and delivered before the crash
        await turns.store.inbox.answered([r.id for r in rows])
        return
    # Cut off mid-turn: its calls get "interrupted", except one an older turn still waits on.
    keep = {c.call_id for c in open_confirmations}
    await conversations.close_dangling(conv.id, RESTARTED, keep=keep)
    log.info("finishing the turn a restart cut off in %s", key)  # counted: Dispatcher.recover
    await turns.run(conv, last.user_id, last.user_name, last.message_id, answering=rows)


async def finish_after_action(
    turns: TurnRunner, conf: ConfirmationRow, cut: str = RESTARTED
) -> None:
    """The turn of an answered confirmation was cut off (by a restart, or by a refusal of the
    store) after its call's result was recorded and before the model answered: the turn is
    finished from the history, the call not run again, the calls after it closed with `cut`.
    Nothing when its result is not recorded (it is resumed) or its turn answered already."""
    if conf.call_id.startswith(DELEGATED):  # its delegated task asked, and finishes it
        return
    conversations = turns.store.conversations
    conv = await conversations.active(conf.channel, conf.chat_id)
    history = await conversations.history(conv.id, turns.settings.history_limit)
    at = [i for i, m in enumerate(history) if m.result and m.result.call_id == conf.call_id]
    if not at or any(m.is_answer for m in history[at[-1] :]):
        return
    await conversations.close_dangling(conv.id, cut)  # calls after it, cut off
    log.info("finishing the turn cut off after %s ran in %s", conf.tool, conf.chat_id)
    await turns.run(conv, conf.user_id, conf.user_name, conf.reply_to)


def _asked_in_last_turn(
    history: Sequence[Message], confirmations: Sequence[ConfirmationRow]
) -> list[ConfirmationRow]:
    """The confirmations whose call was made after the newest user message."""
    users = [i for i, m in enumerate(history) if m.role is Role.USER]
    since = history[users[-1] + 1 :] if users else history
    asked = {call.id for m in since for call in m.tool_calls}
    return [c for c in confirmations if c.call_id in asked]
