"""Confirmations: a destructive call waits for its requester's answer, then runs once or never.

The states and their transitions are drawn in engine/store/_records.py; the store refuses any
other. A press is accepted only from the platform, chat and user the request was made for, by a
user still allowed, while it is pending and before it expires; the answer then travels through
the chat's queue (a :class:`Decided` item), so the call runs in order with the chat's messages
(chat/_decided.py; a turn about to start takes the chat's `deciding` lock, as a decision does).
At start-up :meth:`Confirmations.recover` settles what a restart found: expired prompts are
closed, an approval that never started runs (it is durable and was given for exactly this call),
and a call that had started is reported as cut off (it may have had effects).
A timeout is a length of time: a prompt asked here expires by the monotonic clock (a jump of
the wall clock moves it neither way); the stored `expires_at` serves after a restart.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Mapping

from engine._channel import (
    Channel,
    Choice,
    ConfirmationPrompt,
    Decision,
    DecisionStatus,
    Press,
)
from engine.chat._held import Held
from engine.chat._languages import Languages
from engine.chat._permissions import Permissions
from engine.chat._prompt_ends import RESTARTED_WHILE, PromptEnds
from engine.i18n import N_, translator
from engine.loop import ConversationKey, PendingCall
from engine.store import ConfirmationRow, Conversation, Store
from engine.store import ConfirmationState as S
from engine.work import ChatQueues, Decided, KeyedLocks, Notice, Tasks
from tools import ToolResult

log = logging.getLogger(__name__)

EXPIRED = "The confirmation expired before the user answered; the action was not run."
RESTARTING = N_("I am restarting: nothing was decided. Press again in a moment.")
DELEGATED = "delegated:"  # call ids of a delegated task's calls (engine/chat/_delegate.py)
STARTED_THEN_CUT = (
    "interrupted: the daemon restarted while this approved action was running; it may have "
    "completed partly or fully. Do not run it again without asking the user."
)


class Confirmations:
    def __init__(
        self,
        store: Store,
        channels: Mapping[str, Channel],
        queues: ChatQueues,
        tasks: Tasks,
        allowed: Callable[[str, str], bool],
        permissions: Permissions,
        languages: Languages | None = None,
    ) -> None:
        self.store = store
        self.rows = store.confirmations
        self.ends = PromptEnds(self.rows, channels, tasks, languages)  # "✅ Done: …"
        self.channels = channels
        self.queues = queues
        self.tasks = tasks
        self.allowed = allowed
        self.permissions = permissions
        self.ready = self.ends.ready  # set once the channels run: prompts can be edited
        # Answers awaited outside the chat's turn (a delegated task's calls), by confirmation id.
        self.waiting: dict[str, asyncio.Future[str | None]] = {}
        self._deadlines: dict[str, float] = {}  # monotonic, of the pending prompts asked here
        self.deciding = KeyedLocks[ConversationKey]()  # a decision, or a turn about to start
        self.held = Held(self.rows)  # what is known of actions whose turn the store cut off

    # -- asking ---------------------------------------------------------------------------

    async def ask(
        self, conv: Conversation, pending: PendingCall, user_name: str, reply_to: str | None
    ) -> None:
        row = ConfirmationRow(
            id=pending.id,
            conversation_id=conv.id,
            channel=conv.channel,
            chat_id=conv.chat_id,
            user_id=pending.user_id,
            user_name=user_name or pending.user_id,
            tool=pending.tool,
            call_id=pending.call_id,
            args=pending.args,
            summary=self.ends.summary(pending, ConversationKey(conv.channel, conv.chat_id)),
            details=pending.details,
            remaining=pending.remaining,
            iteration=pending.iteration,
            state=S.PENDING,
            message_ref=None,
            reply_to=reply_to,
            expires_at=pending.expires_at,
            offered="".join(
                c.value
                for c in self.permissions.choices(
                    pending.tool, conv.channel, pending.user_id, conv.is_private
                )
            ),
        )
        await self.rows.add(row)
        self._deadlines[row.id] = time.monotonic() + max(row.expires_at - time.time(), 0.0)
        await self.show(row)

    def _expired(self, conf: ConfirmationRow, now: float) -> bool:
        """Past its timeout: by the monotonic clock when asked here, else by the wall clock."""
        deadline = self._deadlines.get(conf.id)
        return conf.expires_at <= now if deadline is None else time.monotonic() >= deadline

    async def wait_for(
        self, conv: Conversation, pending: PendingCall, user_name: str
    ) -> tuple[ConfirmationRow | None, str | None]:
        """Ask as :meth:`ask` does, for a call made outside the chat's turn (a delegated task,
        whose call id starts with DELEGATED), and wait for the answer here: (the row, None) once
        approved, (None, why not) otherwise. The chat's queue never resumes such a call."""
        waiter: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self.waiting[pending.id] = waiter
        try:
            await self.ask(conv, pending, user_name, None)
            await asyncio.wait({waiter}, timeout=max(pending.expires_at - time.time(), 0))
            if not waiter.done() and (row := await self.rows.get(pending.id)) is not None:
                await self.expire(row)
            reason = waiter.result() if waiter.done() else EXPIRED
        finally:
            self.waiting.pop(pending.id, None)
        return (await self.rows.get(pending.id), None) if reason is None else (None, reason)

    def _answered(self, conf: ConfirmationRow, reason: str | None) -> bool:
        """Hand the answer to whoever waits for it here (True), or leave it to the queue."""
        waiter = self.waiting.get(conf.id)
        if waiter is not None and not waiter.done():
            waiter.set_result(reason)
        return waiter is not None or conf.call_id.startswith(DELEGATED)

    async def show(self, row: ConfirmationRow) -> None:
        """Show the prompt and record where it is (recovery shows a prompt not yet shown)."""
        prompt = ConfirmationPrompt(
            row.id,
            row.chat_id,
            row.user_id,
            row.user_name,
            row.tool,
            row.summary,
            row.expires_at,
            row.reply_to,
            row.details,
            tuple(Choice(c) for c in row.offered),
            self.ends.language(row),
        )
        ref = await self.channels[row.channel].show_confirmation(prompt)
        await self.rows.set_ref(row.id, ref.message_id)

    # -- answers --------------------------------------------------------------------------

    async def press(self, press: Press) -> Decision:
        _ = translator(press.language).gettext
        conf = await self.rows.get(press.confirmation_id)
        if conf is None or (conf.channel, conf.chat_id) != (press.channel, press.chat_id):
            return Decision(DecisionStatus.UNKNOWN, _("This request no longer exists."))
        if conf.user_id != press.user_id or not self.allowed(press.channel, press.user_id):
            log.warning(
                "refused a press on confirmation %s by %s user %s (asked of %s)",
                conf.id,
                press.channel,
                press.user_id,
                conf.user_id,
            )
            only = _("Only {name} can confirm this.").format(name=conf.user_name)
            return Decision(DecisionStatus.NOT_YOURS, only)
        if conf.state is not S.PENDING:
            return Decision(DecisionStatus.ALREADY_DECIDED, _("Already decided."))
        if press.choice.value not in conf.offered:  # a payload for a button never shown
            return Decision(DecisionStatus.UNKNOWN, _("This answer is not offered here."))
        if self._expired(conf, time.time()):
            await self.expire(conf)
            return Decision(DecisionStatus.EXPIRED, _("This request has expired; nothing was run."))
        if self.queues.closing:  # the answer could not resume the turn here: not taken at all
            return Decision(DecisionStatus.NOT_NOW, _(RESTARTING))
        approved = press.choice.approves
        key = ConversationKey(conf.channel, conf.chat_id)
        async with self.deciding.hold(key):  # before a turn that starts now, or after it
            if not await self._decide(conf, press, approved, key):
                return Decision(DecisionStatus.ALREADY_DECIDED, _("Already decided."))
        if approved:
            return Decision(DecisionStatus.APPROVED, _("Confirmed."))
        return Decision(DecisionStatus.DECLINED, _("Cancelled."))

    async def _decide(
        self, conf: ConfirmationRow, press: Press, approved: bool, key: ConversationKey
    ) -> bool:
        if not await self.rows.transition(
            conf.id, S.PENDING, S.APPROVED if approved else S.DECLINED
        ):
            return False
        if press.choice is Choice.ALWAYS:
            await self.permissions.grant(key, conf.tool, press.user_id, conf.user_name)
        log.info(
            "confirmation %s (%s) in %s:%s %s by user %s",
            conf.id,
            conf.tool,
            conf.channel,
            conf.chat_id,
            "approved" if approved else "declined",
            press.user_id,
        )
        channel = self.channels.get(conf.channel)
        if channel is not None and channel.capabilities.edits:  # a terminal shows the end only
            mark = N_("⏳ Running: {summary}") if approved else N_("✖️ Cancelled: {summary}")
            self.ends.end(conf, mark)
        if not self._answered(conf, None if approved else "The user declined this action."):
            self.queues.put(key, Decided(conf.id))
        return True

    async def expire(self, conf: ConfirmationRow) -> None:
        key = ConversationKey(conf.channel, conf.chat_id)
        async with self.deciding.hold(key):
            if await self.rows.transition(conf.id, S.PENDING, S.EXPIRED):
                self.ends.end(conf, N_("⌛ Expired: {summary}"))
                if not self._answered(conf, EXPIRED):
                    self.queues.put(key, Decided(conf.id))

    async def expire_due(self) -> None:
        now = time.time()
        pending = await self.rows.in_state(S.PENDING)
        for conf in pending:
            if self._expired(conf, now) and conf.channel in self.channels:
                await self.expire(conf)
        for gone in self._deadlines.keys() - {c.id for c in pending}:  # decided meanwhile
            del self._deadlines[gone]

    async def cancel_pending(self, key: ConversationKey, reason: str) -> int:
        """Cancel the chat's pending confirmations; their calls get `reason` as result."""
        cancelled = 0
        for conf in await self.rows.in_state(S.PENDING, key.channel, key.chat_id):
            async with self.store.transaction():  # a crash never leaves its call unanswered
                if not await self.rows.transition(conf.id, S.PENDING, S.CANCELLED):
                    continue
                if not self._answered(conf, reason):
                    await self.store.conversations.close_dangling(conf.conversation_id, reason)
            self.ends.end(conf, N_("✖️ Cancelled: {summary}"))
            log.info("confirmation %s (%s) in %s cancelled", conf.id, conf.tool, key)
            cancelled += 1
        return cancelled

    # -- running --------------------------------------------------------------------------

    async def begin(self, conf: ConfirmationRow) -> tuple[ConfirmationRow, bool, str | None] | None:
        """The decided confirmation to resume: (row, approved, reason for a refusal); None when
        there is nothing to do (cancelled meanwhile, or resumed already)."""
        if conf.call_id.startswith(DELEGATED):  # its task asked, and waits
            return None
        if conf.state is S.APPROVED:  # EXECUTING is recorded when the call starts: started()
            return conf, True, None
        refused = {S.DECLINED: None, S.EXPIRED: EXPIRED, S.INTERRUPTED: STARTED_THEN_CUT}
        if conf.state not in refused or await self._resumed(conf):
            return None
        # (INTERRUPTED: cut off by a restart while it ran; the turn goes on, told it may have)
        return conf, False, refused[conf.state]

    async def started(self, conf: ConfirmationRow) -> bool:
        """The approved call is about to run (it has its tool slot): record that, so a crash
        from now on is reported as "may have run" and before it as "did not run". False when
        it is no longer approved (stopped, or run already)."""
        return await self.rows.transition(conf.id, S.APPROVED, S.EXECUTING)

    async def finish(self, conf: ConfirmationRow, outcome: ToolResult | None) -> None:
        """An approved call ran (`outcome`: its result): say on the prompt what happened."""
        if not await self.rows.transition(conf.id, S.EXECUTING, S.EXECUTED):
            return
        if outcome is None:
            text = self.ends.text(conf, N_("⚠️ Not finished: {summary}"))
        elif outcome.is_error:
            reason = outcome.for_llm if len(outcome.for_llm) <= 200 else outcome.for_llm[:200] + "…"
            text = self.ends.text(conf, N_("⚠️ Failed: {summary}")) + f"\n{reason}"
        else:
            text = self.ends.text(conf, N_("✅ Done: {summary}"))
        await self.ends.resolve(conf, text)

    async def stopped(self, key: ConversationKey) -> None:
        """/stop cut off the running item: a call it was running is reported, never re-run; one
        approved but not started yet is cancelled."""
        for conf in await self.rows.in_state(S.EXECUTING, key.channel, key.chat_id):
            if await self.rows.transition(conf.id, S.EXECUTING, S.INTERRUPTED):
                self.ends.end(conf, N_("⚠️ Stopped: {summary}"))
        for conf in await self.rows.in_state(S.APPROVED, key.channel, key.chat_id):
            if await self.rows.transition(conf.id, S.APPROVED, S.CANCELLED):
                self.ends.end(conf, N_("✖️ Stopped, not run: {summary}"))

    # -- start-up -------------------------------------------------------------------------

    async def recover(self, chats: Collection[ConversationKey] | None = None) -> None:
        """Queue what a restart left (in `chats`, else everywhere): expired prompts closed,
        never-started approvals run, started ones reported as cut off (the turn then goes on,
        told that it may have run)."""
        await self.expire_due()
        for conf in await self.rows.in_state(S.APPROVED):
            if chats is not None and ConversationKey(conf.channel, conf.chat_id) not in chats:
                continue
            if conf.channel in self.channels:
                log.warning(
                    "running approved action %s (%s) the restart held up", conf.id, conf.tool
                )
                self.queues.put(ConversationKey(conf.channel, conf.chat_id), Decided(conf.id))
        for conf in await self.rows.in_state(S.EXECUTING):
            if conf.channel not in self.channels:
                continue
            if chats is not None and ConversationKey(conf.channel, conf.chat_id) not in chats:
                continue
            if await self.rows.transition(conf.id, S.EXECUTING, S.INTERRUPTED):
                key = ConversationKey(conf.channel, conf.chat_id)
                self.ends.end(conf, N_("⚠️ Interrupted by a restart: {summary}"))
                text = self.ends.text(conf, RESTARTED_WHILE)
                self.queues.put(key, Notice(text, conf.reply_to))
                self.queues.put(key, Decided(conf.id))  # then the turn goes on from there

    async def _resumed(self, conf: ConfirmationRow) -> bool:
        """True when the call of a refused or interrupted confirmation has its result in the
        history already (the turn went on before: /stop, an earlier start-up or try)."""
        conversations = self.store.conversations  # a stopped turn's results count too
        history = await conversations.history(conf.conversation_id, 50, with_stopped=True)
        return any(m.result is not None and m.result.call_id == conf.call_id for m in history)

    async def open_in(self, key: ConversationKey) -> list[ConfirmationRow]:
        """The chat's confirmations still waiting to be answered or run."""
        pending = await self.rows.in_state(S.PENDING, key.channel, key.chat_id)
        approved = await self.rows.in_state(S.APPROVED, key.channel, key.chat_id)
        return pending + approved


def pending_call(conf: ConfirmationRow) -> PendingCall:
    """The halted call a stored confirmation resumes."""
    return PendingCall(
        conf.id,
        conf.call_id,
        conf.tool,
        conf.args,
        conf.summary,
        conf.user_id,
        conf.expires_at,
        conf.remaining,
        conf.iteration,
        conf.details,
    )
