# Left whole: the wiring of the engine's parts and the Engine contract it implements, one class.
"""The dispatcher: the engine as the adapters see it (:class:`engine.Engine`), wiring its parts.

A message is checked (allowed user, length), committed to the inbox, and queued for its chat;
the call returns at once. Each chat's queue (engine/work/_queue.py) runs its items in order: turns
(chat/_turns.py), answers to confirmations (chat/_confirmations.py), background results
(engine/chat/_jobs/_background.py), notices. At start-up each part queues what a restart left,
before the channels deliver anything new (:meth:`Dispatcher.prepare`), and the queues open once the
channels run (:meth:`Dispatcher.start`). With a store several instances share, the chats' work is
spread over them (work/_cluster.py) and each instance recovers what it takes over the same way
(:meth:`Dispatcher.recover`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from dataclasses import dataclass
from typing import TypeVar

from engine._channel import Action, Channel, Command, Decision, InboundMessage, Press, Reply
from engine._clock import noticed_jump, wall
from engine.chat._access._limits import Limits
from engine.chat._access._pairing import Pairing
from engine.chat._commands._commands import STOPPED, Commands
from engine.chat._commands._forget import ForgetMe
from engine.chat._confirmations._confirmations import Confirmations
from engine.chat._confirmations._decided import Decisions
from engine.chat._confirmations._questions import Questions
from engine.chat._dispatch._recovery import recover
from engine.chat._dispatch._stalled import Stalled
from engine.chat._intake._intake import Intake
from engine.chat._intake._media import MediaIntake
from engine.chat._jobs._background import Background
from engine.chat._jobs._housekeeping import Housekeeping
from engine.chat._jobs._schedules import Schedules
from engine.chat._settings._chat import ChatSettings
from engine.chat._settings._live import Live, Settings
from engine.chat._settings._tooling import Tooling
from engine.chat._turns._notices import Notices
from engine.chat._turns._runner import TurnRunner
from engine.loop import ConversationKey, ToolLoop
from engine.store import Adoption, InboxState, Store
from engine.work import (
    ChatQueues,
    Cluster,
    Compact,
    Decided,
    Inbound,
    JobDone,
    Notice,
    Recover,
    Resuming,
    Rewind,
    ScheduledRun,
    Tasks,
    WorkItem,
)
from tools.errors import StoreUnavailable

log = logging.getLogger(__name__)
_E = TypeVar("_E", InboundMessage, Press, Action)

CANCELLED_BY_MESSAGE = "cancelled: the user sent a new message instead of confirming."
# In a shared chat a message from anyone moves the conversation on: a confirmation left pending
# under later messages would put its result out of order in the history.
CANCELLED_BY_SCHEDULE = "cancelled: a scheduled task ran in this chat before it was confirmed."
SHUTDOWN = "interrupted: the daemon shut down before this call finished."


@dataclass(frozen=True, slots=True, kw_only=True)
class Parts:
    """What the dispatcher drives, each built with what it uses (by bot/'s wiring)."""

    store: Store
    live: Live  # the settings in force
    channels: dict[str, Channel]  # filled by add_channel; every part shares this mapping
    tasks: Tasks
    queues: ChatQueues
    notices: Notices
    confirmations: Confirmations
    background: Background
    loop: ToolLoop
    chat_settings: ChatSettings
    turns: TurnRunner
    schedules: Schedules
    media: MediaIntake
    intake: Intake
    housekeeping: Housekeeping
    forget: ForgetMe
    commands: Commands
    limits: Limits
    pairing: Pairing
    cluster: Cluster | None = None  # several instances share the store
    questions: Questions | None = None  # a tool's questions to its user (MCP elicitation)


class Dispatcher:
    """Implements engine.Engine for every adapter, over the parts it is given."""

    def __init__(self, parts: Parts) -> None:
        self.store = parts.store
        self.live = parts.live
        self.channels = parts.channels
        self.tasks = parts.tasks
        self.queues = parts.queues
        self.notices = parts.notices
        self.confirmations = parts.confirmations
        self.background = parts.background
        self.loop = parts.loop
        self.chat_settings = parts.chat_settings
        self.turns = parts.turns
        self.schedules = parts.schedules
        self.media = parts.media
        self.intake = parts.intake
        self.housekeeping = parts.housekeeping
        self.forget = parts.forget
        self.commands = parts.commands
        self.limits = parts.limits
        self.pairing = parts.pairing
        self.cluster = parts.cluster
        self.resuming = Resuming(self.store.ops, self.channels)  # without a cluster
        self.questions = parts.questions
        self.stalled = Stalled(self.queues, self.tasks)  # chats whose work the store refused
        self._taking: dict[ConversationKey, list[int]] = {}  # inbox rows a turn reads (media)
        self.decisions = Decisions(self.store, self.confirmations, self.turns, self.queues)

    @property
    def settings(self) -> Settings:
        """The settings in force (a reload swaps them: :meth:`engine.chat.Live.swap`)."""
        return self.live.settings

    # -- the cluster's events (engine.work.ClusterEvents) ---------------------------------

    async def settings_changed(self) -> None:
        await self.chat_settings.load()

    async def abandon_jobs(self) -> None:
        await self.background.aclose()

    async def forgot(self, job_ids: list[str]) -> None:
        await self.forget.forgotten_elsewhere(job_ids)

    def add_channel(self, channel: Channel) -> None:
        self.channels[channel.name] = channel

    def reload(
        self, settings: Settings, tooling: Tooling | None = None, source: object = None
    ) -> None:
        """Put `settings` (and `tooling`: a new model and tools) in force for what starts from
        now on, in one step; what runs keeps what it started with (bot/_reload.py)."""
        if tooling is not None:
            self.background.use(tooling.loop.registry)
            if tooling.loop.context is not None:
                tooling.loop.context.discover_soon()
        self.live.swap(settings, tooling, source)

    @property
    def busy(self) -> int:
        """Conversations with a turn running now."""
        return self.queues.busy

    # -- lifecycle ------------------------------------------------------------------------

    async def prepare(self) -> None:
        """Queue what a crash or restart left unfinished, chat by chat, before the channels
        deliver anything new: it then runs first in each chat's order. (Sharing the store:
        join the other instances, and take what nobody holds.)"""
        await self.chat_settings.load()
        await self.pairing.load()
        if self.cluster is not None:
            await self.cluster.join(self)
        else:
            await self.recover()
            await self.resuming.resume()  # the channels connect from where they were

    async def recover(self, taken: Adoption | None = None) -> None:
        """Queue, chat by chat, what a crash left: in every chat (one process), or in the
        chats and jobs this instance just took over (`taken`)."""
        if taken is None:
            keys = [ConversationKey(*c) for c in await self.store.inbox.unfinished_chats()]
            scope: set[ConversationKey] | None = None
            if keys:  # one line, not one per chat (the cluster's adoption says its own)
                log.warning("finishing what a restart left unanswered in %d chats", len(keys))
        else:
            keys = [ConversationKey(*c) for c in taken.chats]
            scope = set(keys)
        for key in keys:
            self.queues.put(key, Recover())
        await self.decisions.recover(scope)  # before the started ones are recorded as cut off
        await self.confirmations.recover(scope)
        await self.background.recover(scope, None if taken is None else taken.jobs)
        await self.schedules.recover(scope)
        for key in keys:
            self.queues.put(key, Inbound())
            await self.intake.schedule_release(key)

    async def start(self) -> None:
        """The channels run: open the queues, watch for expiries and for what other processes
        write to the store (the command line)."""
        await self.store.watch()
        self.confirmations.ready.set()
        self.queues.open(self._handle, self._stopped)
        self.tasks.spawn(self._expiry_watch(), "confirmation-expiry")
        self.tasks.spawn(self.schedules.run(), "scheduler")
        if self.cluster is not None:
            self.tasks.spawn(self.cluster.run(), "cluster")
            self.tasks.spawn(self.cluster.receivers.run(), "receiving")
        else:
            await self.resuming.keep()  # the sessions the channels just opened, at once
            self.tasks.spawn(self.resuming.run(), "resuming")
        if self.loop.context is not None:
            self.loop.context.discover_soon()
        self.tasks.spawn(self.housekeeping.run(), "housekeeping")

    async def aclose(self) -> None:
        """Let running turns finish (bounded), then cancel and record what was cut off."""
        if self.cluster is not None:  # another instance receives while these turns finish
            await self.cluster.stop_receiving()
        self.intake.close()
        cut = await self.queues.aclose(self.settings.shutdown_grace_s)
        await self.tasks.aclose()
        await self.background.aclose()
        for key in cut:
            if await self.confirmations.open_in(key):  # its call waits for (or has) an answer
                continue
            conv = await self.store.conversations.active(key.channel, key.chat_id)
            n = await self.store.conversations.close_dangling(conv.id, SHUTDOWN)
            log.warning("shutdown cut off the turn in %s (%d tool calls interrupted)", key, n)
        await self.housekeeping.flush()
        if self.cluster is not None:  # another instance takes over what is left, at once
            await self.cluster.leave()
        else:
            await self.resuming.keep()

    async def _expiry_watch(self) -> None:
        while True:
            await asyncio.sleep(self.settings.expiry_check_s)  # a periodic timer
            noticed_jump(self.schedules.clock)  # wakes the scheduler and reminders at once
            try:
                await self.confirmations.expire_due()
            except StoreUnavailable:
                pass  # the database is away (reported by the cluster): next time

    # -- engine.Engine --------------------------------------------------------------------

    def allowed(self, channel: str, user_id: str) -> bool:
        return self.pairing.allowed(channel, user_id)

    def listens(self, channel: str, chat_id: str) -> bool:
        return self.chat_settings.listens(channel, chat_id)

    async def handle_inbound(self, msg: InboundMessage) -> None:
        if await self.handle_answer(msg):
            return  # the answer to a form a running call is waiting for
        await self.intake.handle(self._settled(msg))

    async def handle_answer(self, msg: InboundMessage) -> bool:
        return self.questions is not None and await self.questions.reply(self._settled(msg))

    async def handle_press(self, press: Press) -> Decision:
        return await self.confirmations.press(self._settled(press))

    async def handle_command(self, msg: InboundMessage, command: Command) -> Reply:
        return await self.commands.handle(self._settled(msg), command)

    async def handle_action(self, action: Action) -> Reply:
        return await self.commands.act(self._settled(action))

    def _settled(self, event: _E) -> _E:
        """`event` with the language relaybot answers it in (chat/_languages.py)."""
        languages = self.chat_settings.languages
        said = languages.settle(event.channel, event.chat_id, event.user_id, event.language)
        return dataclasses.replace(event, language=said)

    async def wait_idle(self, channel: str, chat_id: str) -> None:
        """Wait until the chat has nothing queued or running (the console reads line by line)."""
        await self.queues.wait_idle(ConversationKey(channel, chat_id))

    # -- the chat's queue -----------------------------------------------------------------

    async def _handle(self, key: ConversationKey, item: WorkItem) -> None:
        try:
            await self._run_item(key, item)
        except StoreUnavailable:  # the store says why, once; the chat is tried again
            self.stalled.refused(key, item)
        else:
            self.stalled.done(key)

    async def _run_item(self, key: ConversationKey, item: WorkItem) -> None:
        match item:
            case Inbound():
                queued = await self.store.inbox.rows(InboxState.QUEUED, key.channel, key.chat_id)
                now = wall()
                ready = [r for r in queued if r.ready(now)]
                if ready:  # a new message: what was decided before it first
                    await self.decisions.before_turn(key, CANCELLED_BY_MESSAGE)
                self._taking[key] = [r.id for r in ready]  # what a /stop now stops (_stopped)
                try:  # with what they carry (a picture fetched, a voice heard), within limits
                    taken = await self.media.take(key, ready)
                except Exception:
                    self._taking.pop(key, None)
                    raise
                self._taking.pop(key, None)
                if taken is not None:
                    await self.turns.user_turn(*taken)
                if len(ready) < len(queued):  # some held back by the rate limit: later
                    await self.intake.schedule_release(key)
            case Recover():
                await recover(self.turns, key)
            case Decided(confirmation_id):
                await self.decisions.run(key, confirmation_id)
            case JobDone(job_id):
                followed = await self.background.follow_up(job_id)
                if followed is None:
                    return
                job, conv = followed
                if job.for_user:
                    await self.notices.say(conv.channel, conv.chat_id, job.for_user, None)
                else:
                    await self.turns.run(conv, job.user_id, "", None)
            case Notice(text, reply_to):
                await self.notices.say(key.channel, key.chat_id, text, reply_to)
            case ScheduledRun():  # like a message, it moves the conversation on
                await self.decisions.before_turn(key, CANCELLED_BY_SCHEDULE)
                await self.schedules.execute(item)
            case Rewind():
                await self.commands.rewind(key, item)
            case Compact():
                await self.commands.compact(key, item)

    async def _stopped(self, key: ConversationKey, item: WorkItem) -> None:
        """/stop cut off the running item: close its calls and, when it was a turn, mark what
        it answered as stopped (no later request carries it), in one write; report an action
        it ran."""
        conv = await self.store.conversations.active(key.channel, key.chat_id)
        rows = await self.store.inbox.rows(InboxState.TAKEN, key.channel, key.chat_id)
        ids = [r.id for r in rows] + self._taking.pop(key, [])  # taken, or being read
        async with self.store.transaction():  # a crash leaves all of it, or the turn to finish
            await self.store.conversations.close_dangling(conv.id, STOPPED)
            if not isinstance(item, Notice | Compact):
                n = await self.store.conversations.stop_turn(conv.id)
                log.info("/stop in %s: %d messages of the stopped turn left out from now", key, n)
            await self.store.inbox.answered(ids)  # "Stopped." was their answer
        await self.confirmations.stopped(key)
        await self.schedules.stopped(key)
        self.queues.put(key, Inbound())  # messages not taken yet (the item may have been theirs)
