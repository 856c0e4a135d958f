"""The scheduler: each scheduled task runs at its time, once, as a turn in its own chat.

A due time is claimed in the store before anything runs (the run is recorded with it, and the
schedule's next time moves past it in the same transaction), then a :class:`ScheduledRun` goes
through the chat's queue, in order with everything else there. The run is a full turn: the
task's text is stored as a request of the user who scheduled it (so tools run, and a
destructive one asks that user), and the answer is posted in the chat.

Nothing is dropped silently and nothing runs twice:

- after downtime, the latest due time that passed runs once if it is at most `catch_up_s` late;
  otherwise the chat is told it was skipped (and how many earlier ones were missed with it);
- a run that a restart found queued runs (or is reported skipped, past the grace); one that was
  running is reported as cut off and not run again (it may have had effects);
- a run that fails tells the chat what failed.

The loop sleeps until the next due time, or until a schedule is added or cancelled
(``ScheduleStore.wait_changed``): it never polls.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass

from engine._channel import Action, Button, Reply
from engine._clock import Clock
from engine.chat._turns import RESTARTED, TurnRunner
from engine.i18n import translator
from engine.loop import ConversationKey
from engine.models import TRUSTED, Message, member
from engine.store import RunState, ScheduleRow, ScheduleRun, ScheduleState, Store
from engine.work import ChatQueues, Notice, Recover, ScheduledRun
from tools.builtins import describe_schedule as describe
from tools.builtins import recurrence_of
from tools.errors import (
    ContextOverflow,
    LLMError,
    ModelAuthError,
    ModelRateLimited,
    StoreUnavailable,
)

log = logging.getLogger(__name__)

_CANCEL = "sched:cancel:"
_LATE_S = 60.0  # a run this late (or more) says it is catching up
R = RunState


@dataclass(frozen=True, slots=True)
class ScheduleSettings:
    catch_up_s: float = 3600.0  # a run missed by less than this is run once after downtime


class Schedules:
    def __init__(
        self,
        store: Store,
        queues: ChatQueues,
        turns: TurnRunner,
        settings: Callable[[], ScheduleSettings],
        clock: Clock,
    ) -> None:
        self.store = store
        self.book = store.schedules
        self.queues = queues
        self.turns = turns
        self.settings = settings  # those in force (a reload changes them)
        self.clock = clock

    # -- start-up -------------------------------------------------------------------------

    async def recover(self, chats: Collection[ConversationKey] | None = None) -> None:
        """Settle the runs a restart found (in `chats`, else everywhere), before the queues
        open."""
        now = self.clock.now()
        for run in await self.book.runs(R.RUNNING):
            row = await self.book.get(run.schedule_id)
            if row is not None and chats is not None and _key(row) not in chats:
                continue  # another instance's, running now
            await self.book.transition(run.schedule_id, run.due, R.RUNNING, R.INTERRUPTED)
            if row is None:
                continue
            key = _key(row)
            conv = await self.store.conversations.active(
                row.channel, row.chat_id, is_private=row.is_private
            )
            await self.store.conversations.close_dangling(conv.id, RESTARTED)
            self.queues.put(key, Recover())  # an answer stored but not delivered goes out
            log.warning("scheduled task #%d in %s was cut off by a restart", row.id, key)
            _ = self._words(row)
            cut = _(
                "⚠️ Scheduled task #{id} ({task}) was cut off by a restart while it ran (due "
                "{due}); it was not run again, as it may have done part of its work."
            )
            due = _at(row, run.due)
            self._tell(row, cut.format(id=row.id, task=_clip(row.task), due=due), _)
        for run in await self.book.runs(R.QUEUED):
            row = await self.book.get(run.schedule_id)
            if row is not None and chats is not None and _key(row) not in chats:
                continue
            if row is None or row.state is not ScheduleState.ACTIVE:
                await self.book.transition(run.schedule_id, run.due, R.QUEUED, R.SKIPPED)
            elif now - run.due <= self.settings().catch_up_s:
                self.queues.put(_key(row), ScheduledRun(row.id, run.due))
            elif await self.book.transition(row.id, run.due, R.QUEUED, R.SKIPPED, "too late"):
                self._tell(row, _skipped(row, run.due, run.missed + 1, self._words(row)))

    # -- the loop -------------------------------------------------------------------------

    async def run(self) -> None:
        """Claim what is due, sleep until the next due time or a change; forever."""
        while True:
            try:
                await self.fire_due()
                until = await self.book.next_due()
            except StoreUnavailable:  # the database is away (reported by the cluster)
                until = self.clock.now() + 5
            except Exception:
                log.exception("the scheduler failed; trying again shortly")
                until = self.clock.now() + 5
            await self._wait(until)

    async def _wait(self, until: float | None) -> None:
        waits = [asyncio.ensure_future(self.book.wait_changed())]
        if until is not None:
            waits.append(asyncio.ensure_future(self.clock.sleep_until(until)))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    async def fire_due(self) -> None:
        now = self.clock.now()
        for row in await self.book.due(now):
            step = recurrence_of(row).step(row.next_due, now)
            late = now - step.latest
            state = R.QUEUED if late <= self.settings().catch_up_s else R.SKIPPED
            run = ScheduleRun(row.id, step.latest, state, missed=step.missed)
            if not await self.book.claim(row.id, row.next_due, run, step.following):
                continue  # cancelled meanwhile, or claimed before
            if state is R.SKIPPED:
                self._tell(row, _skipped(row, step.latest, step.missed + 1, self._words(row)))
                continue
            if step.missed or late >= _LATE_S:
                _ = self._words(row)
                missed = _(" ({n} earlier runs were missed)") if step.missed else ""
                late_run = _(
                    "⏰ Scheduled task #{id} was due at {due} while I was offline{missed}; running "
                    "it now."
                )
                due = _at(row, step.latest)
                missed = missed.format(n=step.missed)
                self._tell(row, late_run.format(id=row.id, due=due, missed=missed))
            self.queues.put(_key(row), ScheduledRun(row.id, step.latest))

    # -- one run, in the chat's queue -----------------------------------------------------

    async def execute(self, item: ScheduledRun) -> None:
        row = await self.book.get(item.schedule_id)
        if row is None or row.state is not ScheduleState.ACTIVE:
            await self.book.transition(item.schedule_id, item.due, R.QUEUED, R.SKIPPED)
            return
        if not await self.book.transition(row.id, item.due, R.QUEUED, R.RUNNING):
            return  # settled already
        log.info("scheduled task #%d runs in %s", row.id, _key(row))
        store = self.store.conversations
        try:
            conv = await store.active(row.channel, row.chat_id, is_private=row.is_private)
            when = recurrence_of(row)
            request = (
                f"[Scheduled task #{row.id}: {when.describe()}; this run was due "
                f"{when.local_time(item.due)}. Do it now and answer here.] {row.task}"
            )
            speaker = None if conv.is_private else row.user_name or row.user_id
            # in a group, the words of whoever scheduled it
            whose = TRUSTED if speaker is None else member(speaker, row.user_id)
            asked = Message.user(request, speaker=speaker, provenance=whose)
            await store.append(conv.id, asked, user_id=row.user_id)
            result = await self.turns.run(
                conv,
                row.user_id,
                row.user_name,
                None,
                failed=lambda e, language: _failed(row, e, translator(language).gettext),
            )
        except Exception as exc:
            log.exception("scheduled task #%d failed in %s", row.id, _key(row))
            await self.book.transition(row.id, item.due, R.RUNNING, R.FAILED, type(exc).__name__)
            _ = self._words(row)
            failed = _(
                "⚠️ Scheduled task #{id} ({task}) failed: something went wrong inside relaybot "
                "({error}; the owner finds it in the log)."
            )
            error = type(exc).__name__
            self._tell(row, failed.format(id=row.id, task=_clip(row.task), error=error), _)
            return
        done = R.DONE if result is not None else R.FAILED
        await self.book.transition(row.id, item.due, R.RUNNING, done)

    async def stopped(self, key: ConversationKey) -> None:
        """/stop cut off the chat's running item: a scheduled run among them failed."""
        for run in await self.book.runs(R.RUNNING):
            row = await self.book.get(run.schedule_id)
            if row is not None and _key(row) == key:
                await self.book.transition(row.id, run.due, R.RUNNING, R.FAILED, "stopped")

    def _words(self, row: ScheduleRow) -> Callable[[str], str]:
        """The chat's language, for what is said about `row` (chat/_languages.py)."""
        return translator(self.turns.language(_key(row), row.user_id)).gettext

    def _tell(self, row: ScheduleRow, text: str, _: Callable[[str], str] | None = None) -> None:
        """Say `text` in the chat (with the next run, when `_` translates its line)."""
        self.queues.put(_key(row), Notice(f"{text} {_next(row, _)}" if _ else text))

    # -- /schedules -----------------------------------------------------------------------

    async def menu(
        self, key: ConversationKey, note: str = "", language: str | None = None
    ) -> Reply:
        _ = translator(language).gettext
        rows = await self.book.chat_schedules(key.channel, key.chat_id)
        if not rows:
            text = _(
                "No scheduled tasks here. Ask me for one, e.g. “every weekday at 8, tell me the "
                "weather in Paris”."
            )
            return Reply(f"{note}\n{text}".strip())
        listed = "\n".join(f"• {describe(r)}" for r in rows)
        text = _("Scheduled tasks here:") + "\n" + listed
        buttons = tuple(Button(_("Cancel #{id}").format(id=r.id), f"{_CANCEL}{r.id}") for r in rows)
        return Reply(f"{note}\n{text}".strip(), buttons)

    async def act(self, action: Action) -> Reply | None:
        """A press on /schedules' buttons; None when the action is not one of ours."""
        if not action.action.startswith(_CANCEL):
            return None
        key = ConversationKey(action.channel, action.chat_id)
        number = action.action.removeprefix(_CANCEL)
        if not number.isdigit():
            return None
        cancelled = await self.book.cancel_schedule(key.channel, key.chat_id, int(number))
        log.info("/schedules: #%s cancelled in %s by user %s", number, key, action.user_id)
        _ = translator(action.language).gettext
        note = _("Cancelled #{id}.").format(id=number) if cancelled else _("Already cancelled.")
        return await self.menu(key, note, action.language)


def _key(row: ScheduleRow) -> ConversationKey:
    return ConversationKey(row.channel, row.chat_id)


def _at(row: ScheduleRow, t: float) -> str:
    return recurrence_of(row).local_time(t)


def _next(row: ScheduleRow, _: Callable[[str], str]) -> str:
    return _("Next run: {due}.").format(due=_at(row, row.next_due))


def _clip(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return f"“{text}”" if len(text) <= n else f"“{text[: n - 1]}…”"


def _skipped(row: ScheduleRow, due: float, count: int, _: Callable[[str], str]) -> str:
    skipped = (
        _(
            "⏭ Scheduled task #{id} ({task}) was skipped: I was offline for its run due at "
            "{due}, too long ago to run it now."
        )
        if count == 1
        else _(
            "⏭ Scheduled task #{id} ({task}) was skipped: I was offline for {n} runs, the last "
            "due at {due}, too long ago to run it now."
        )
    )
    text = skipped.format(id=row.id, task=_clip(row.task), due=_at(row, due), n=count)
    return f"{text} {_next(row, _)}"


def _failed(row: ScheduleRow, exc: LLMError, _: Callable[[str], str]) -> str:
    if isinstance(exc, ModelAuthError):
        why = _("the language model refused this bot's credentials (the owner must check its key)")
    elif isinstance(exc, ModelRateLimited):
        why = _("the language model was busy (rate limited)")
    elif isinstance(exc, ContextOverflow):
        why = _("this conversation is too long for the language model (send /reset)")
    else:
        why = _("the language model could not be reached")
    failed = _("⚠️ Scheduled task #{id} ({task}) failed: {why}.")
    return f"{failed.format(id=row.id, task=_clip(row.task), why=why)} {_next(row, _)}"
