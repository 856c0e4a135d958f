"""The dispatcher: from a platform message to an answer, one turn at a time per conversation.

Every inbound message is committed to the inbox before anything else happens; each chat has a
worker that takes its queued messages (folding several into one turn), runs the tool loop, and
sends the answer. Confirmations, background results and restarts all go through the same
per-chat queue, so a conversation's history is always written in order.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from engine._channel import (
    Channel,
    Command,
    ConfirmationPrompt,
    Decision,
    DecisionStatus,
    InboundMessage,
    MessageRef,
    Press,
)
from engine._jobs import Job, JobRunner
from engine._live import LiveReply, typing
from engine._llm import Message, ToolCall
from engine._loop import ConversationKey, PendingCall, ToolLoop, TurnContext, TurnResult
from engine._recovery import Leftovers, recover
from engine._store import ConfirmationRow, Conversation, Store
from tools import LLMError, ToolRegistry, ToolResult

log = logging.getLogger(__name__)

EXPIRED = "The confirmation expired before the user answered; the action was not run."
CANCELLED_BY_MESSAGE = "cancelled: the user sent a new message instead of confirming."
# In a shared chat a message from anyone moves the conversation on: a confirmation left pending
# under later messages would put its result out of order in the history.
STOPPED = "cancelled: the user stopped the turn."
SHUTDOWN = "interrupted: the daemon shut down before this call finished."


@dataclass(slots=True)
class Settings:
    system_prompt: str | None = None
    allowed_users: dict[str, set[str]] = field(default_factory=dict)  # channel -> ids or "*"
    dm_only: set[str] = field(default_factory=set)
    history_limit: int = 200
    shutdown_grace_s: float = 20.0
    expiry_check_s: float = 5.0
    stream: bool = False


@dataclass(slots=True)
class _Chat:
    key: ConversationKey
    items: collections.deque[tuple[str, Any]] = field(default_factory=collections.deque)
    worker: asyncio.Task[None] | None = None
    turn: asyncio.Task[None] | None = None
    idle: asyncio.Event = field(default_factory=asyncio.Event)


class _StoredJobs(JobRunner):
    """Background jobs whose start is committed before they run."""

    def __init__(self, registry: ToolRegistry, dispatcher: Dispatcher) -> None:
        super().__init__(registry, dispatcher._job_done)
        self.dispatcher = dispatcher

    async def before_start(self, job: Job) -> None:
        store = self.dispatcher.store
        conv = await store.conversation(job.key.channel, job.key.chat_id)
        tool = self.registry.get(job.tool)
        resumable = bool(tool and tool.resumable)
        await store.add_job(conv, job.id, job.user_id, job.tool, job.args, resumable=resumable)


class Dispatcher:
    """Implements channels.Engine for every adapter; owns the per-chat workers."""

    def __init__(self, store: Store, loop: ToolLoop, settings: Settings | None = None) -> None:
        self.store = store
        self.loop = loop
        self.settings = settings or Settings()
        self.registry = loop.registry
        self.jobs = _StoredJobs(loop.registry, self)
        loop.jobs = self.jobs
        self.channels: dict[str, Channel] = {}
        self._chats: dict[ConversationKey, _Chat] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False
        self._leftovers: Leftovers | None = None

    def add_channel(self, channel: Channel) -> None:
        self.channels[channel.name] = channel

    @property
    def busy(self) -> int:
        """Conversations with a turn running now."""
        return sum(1 for c in self._chats.values() if c.turn is not None)

    # -- lifecycle ------------------------------------------------------------------------

    async def prepare(self) -> None:
        """Take stock of what a crash or restart left unfinished. Call before channels start
        delivering, so a message that arrives now is not mistaken for an interrupted one."""
        self._leftovers = await Leftovers.take_stock(self.store)

    async def start(self) -> None:
        """Finish what was left unfinished (see prepare), then watch for expiries."""
        leftovers, self._leftovers = self._leftovers, None
        await recover(self, leftovers or await Leftovers.take_stock(self.store))
        self._spawn(self._expiry_watch(), "confirmation-expiry")

    async def aclose(self) -> None:
        """Let running turns finish (bounded), then cancel and record what was cut off."""
        self._closing = True
        workers = [c.worker for c in self._chats.values() if c.worker is not None]
        if workers:
            await asyncio.wait(workers, timeout=self.settings.shutdown_grace_s)
        cut = [c.key for c in self._chats.values() if c.worker and not c.worker.done()]
        for chat in list(self._chats.values()):
            for task in (chat.turn, chat.worker):
                if task is not None:
                    task.cancel()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*workers, *self._tasks, return_exceptions=True)
        await self.jobs.aclose()
        for key in cut:
            conv = await self.store.conversation(key.channel, key.chat_id)
            n = await self.store.close_dangling(conv.id, SHUTDOWN)
            log.warning("shutdown cut off the turn in %s (%d tool calls interrupted)", key, n)

    def _spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("task %s failed", name, exc_info=t.exception())

        task.add_done_callback(done)
        return task

    # -- channels.Engine ------------------------------------------------------------------

    def allowed(self, channel: str, user_id: str) -> bool:
        users = self.settings.allowed_users.get(channel, set())
        return "*" in users or user_id in users

    async def handle_inbound(self, msg: InboundMessage) -> None:
        if not self.allowed(msg.channel, msg.user_id):
            log.warning("refused %s user %s (%s)", msg.channel, msg.user_id, msg.user_name)
            if not (msg.is_private or msg.mentioned):
                return  # chatter in a group the bot reads everything in: no reply to spam
            await self._send(
                msg.channel,
                msg.chat_id,
                f"Sorry, you are not allowed to use this bot. Your user id is {msg.user_id}; "
                "ask the owner to add it to allowed_users.",
                reply_to=msg.message_id,
            )
            return
        if not await self.store.accept(msg):
            log.info("duplicate delivery of %s message %s ignored", msg.channel, msg.message_id)
            return
        if not self._closing:
            self._wake(ConversationKey(msg.channel, msg.chat_id), ("inbound", None))

    async def handle_press(self, press: Press) -> Decision:
        conf = await self.store.confirmation(press.confirmation_id)
        if conf is None or (conf.channel, conf.chat_id) != (press.channel, press.chat_id):
            return Decision(DecisionStatus.UNKNOWN, "This request no longer exists.")
        approved = press.choice.approves
        user_id = press.user_id
        if conf.user_id != user_id or not self.allowed(press.channel, user_id):
            return Decision(DecisionStatus.NOT_YOURS, f"Only {conf.user_name} can confirm this.")
        if conf.state != "pending":
            return Decision(DecisionStatus.ALREADY_DECIDED, f"Already decided ({conf.state}).")
        if conf.expires_at <= time.time():
            await self._expire(conf)
            return Decision(DecisionStatus.EXPIRED, "This request has expired; nothing was run.")
        to_state = "approved" if approved else "declined"
        if not await self.store.transition(conf.id, "pending", to_state):
            return Decision(DecisionStatus.ALREADY_DECIDED, "Already decided.")
        mark = "✅ Confirmed, running" if approved else "✖️ Cancelled"
        self._spawn(self._resolve(conf, f"{mark}: {conf.summary}"), "resolve-confirmation")
        self._wake(ConversationKey(conf.channel, conf.chat_id), ("decision", conf.id))
        if approved:
            return Decision(DecisionStatus.APPROVED, "Confirmed.")
        return Decision(DecisionStatus.DECLINED, "Cancelled.")

    async def handle_command(self, msg: InboundMessage, command: Command) -> str:
        key = ConversationKey(msg.channel, msg.chat_id)
        if command is Command.START:
            greeting = f"Hi {msg.user_name or 'there'}! Your user id is {msg.user_id}."
            if not self.allowed(msg.channel, msg.user_id):
                return greeting + " You are not on this bot's allowed_users list yet."
            return greeting + " Send me a message to start; /help lists what I can do."
        if not self.allowed(msg.channel, msg.user_id):
            return f"Sorry, you are not allowed to use this bot. Your user id is {msg.user_id}."
        if command is Command.HELP:
            tools = "\n".join(f"• {s}" for s in self.registry.summaries()) or "• (no tools)"
            return (
                "Talk to me in plain language; I can use these tools:\n"
                f"{tools}\n\n/reset starts a fresh conversation, /stop cancels what I'm doing."
            )
        if command is Command.STOP:
            return "Stopped." if await self._stop(key) else "Nothing to stop."
        if command is Command.RESET:
            await self._stop(key)
            await self._cancel_pending(key, "cancelled: the conversation was reset.")
            await self.store.reset(key.channel, key.chat_id)
            return "Started a fresh conversation."
        return "Unknown command."

    # -- per-chat workers -----------------------------------------------------------------

    def _wake(self, key: ConversationKey, item: tuple[str, Any]) -> None:
        chat = self._chats.get(key)
        if chat is None:
            chat = self._chats[key] = _Chat(key)
        chat.items.append(item)
        if chat.worker is None:
            chat.worker = asyncio.create_task(self._work(chat), name=f"chat-{key}")

    async def _work(self, chat: _Chat) -> None:
        try:
            while chat.items:
                kind, arg = chat.items.popleft()
                chat.turn = asyncio.create_task(self._item(chat.key, kind, arg))
                try:
                    await chat.turn
                except asyncio.CancelledError:
                    current = asyncio.current_task()
                    if current is not None and current.cancelling():
                        raise  # we are being shut down
                    await self._after_stop(chat.key)
                except Exception:
                    log.exception("turn in %s failed", chat.key)
                finally:
                    chat.turn = None
        finally:
            chat.worker = None
            if not chat.items:
                self._chats.pop(chat.key, None)
                chat.idle.set()

    async def wait_idle(self, channel: str, chat_id: str) -> None:
        """Wait until the chat has nothing queued or running (the console reads line by line)."""
        chat = self._chats.get(ConversationKey(channel, chat_id))
        if chat is not None:
            await chat.idle.wait()

    async def _item(self, key: ConversationKey, kind: str, arg: Any) -> None:
        if kind == "inbound":
            await self._cancel_pending(key, CANCELLED_BY_MESSAGE)
            rows = await self.store.take_queued(key.channel, key.chat_id)
            if rows:
                await self._user_turn(key, rows)
        elif kind == "recover":
            await self._user_turn(key, arg, recovering=True)
        elif kind == "decision":
            await self._resume(arg)
        elif kind == "job":
            await self._follow_up(arg)

    async def _stop(self, key: ConversationKey) -> bool:
        chat = self._chats.get(key)
        if chat is None or chat.turn is None:
            return False
        chat.turn.cancel()
        return True

    async def _after_stop(self, key: ConversationKey) -> None:
        conv = await self.store.conversation(key.channel, key.chat_id)
        await self.store.close_dangling(conv.id, STOPPED)
        running = await self.store.confirmations(
            "executing", channel=key.channel, chat_id=key.chat_id
        )
        for conf in running:
            if await self.store.transition(conf.id, "executing", "interrupted"):
                self._spawn(self._resolve(conf, f"⚠️ Stopped: {conf.summary}"), "resolve-stop")
        rows = await self.store.inbox("taken", key.channel, key.chat_id)
        await self.store.answered([r.id for r in rows])  # "Stopped." was their answer

    # -- turns ----------------------------------------------------------------------------

    def _context(
        self, conv: Conversation, user_id: str, user_name: str, live: LiveReply | None
    ) -> TurnContext:
        channel = self.channels[conv.channel]

        async def send(text: str) -> None:
            await channel.send(conv.chat_id, text)

        tools = None
        if not conv.is_private and self.settings.dm_only:
            tools = [n for n in self.registry.names() if n not in self.settings.dm_only]
        return TurnContext(
            ConversationKey(conv.channel, conv.chat_id),
            user_id,
            user_name,
            send,
            live.on_text if live is not None else None,
            tools,
        )

    async def _history(self, conv: Conversation) -> list[Message]:
        history = await self.store.history(conv.id, self.settings.history_limit)
        if self.settings.system_prompt:
            history.insert(0, Message("system", self.settings.system_prompt))
        return history

    async def _user_turn(
        self, key: ConversationKey, rows: list[Any], recovering: bool = False
    ) -> None:
        last = rows[-1]
        conv = await self.store.conversation(key.channel, key.chat_id, is_private=last.is_private)
        history = await self._history(conv)
        last_msg = history[-1] if history else None
        if recovering and last_msg and last_msg.role == "assistant" and not last_msg.tool_calls:
            # The answer was produced before the crash but may not have been sent: send it.
            await self._send(key.channel, key.chat_id, last_msg.content or "", last.message_id)
        else:
            await self._run_turn(conv, history, last.user_id, last.user_name, last.message_id)
        await self.store.answered([r.id for r in rows])

    async def _run_turn(
        self,
        conv: Conversation,
        history: list[Message],
        user_id: str,
        user_name: str,
        reply_to: str | None,
        *,
        pending: PendingCall | None = None,
        approved: bool = False,
        reason: str | None = None,
    ) -> TurnResult | None:
        channel = self.channels.get(conv.channel)
        if channel is None:
            log.warning("no channel %s is running; turn in %s skipped", conv.channel, conv.chat_id)
            return None
        streaming = self.settings.stream and channel.capabilities.edits
        live = LiveReply(channel, conv.chat_id, reply_to) if streaming else None
        ctx = self._context(conv, user_id, user_name, live)

        async def record(msg: Message) -> None:
            await self.store.append(conv.id, msg)

        try:
            async with typing(channel, conv.chat_id):
                if pending is None:
                    result = await self.loop.run(history, ctx, record=record)
                else:
                    result = await self.loop.resume(
                        history, pending, approved, ctx, record=record, reason=reason
                    )
        except LLMError as exc:
            log.error("LLM request failed in %s: %s", ctx.key, exc)
            if live is not None:
                await live.abandon()
            await self._send(
                conv.channel,
                conv.chat_id,
                f"⚠️ I can't reach the language model right now ({exc}). Your message is saved; "
                "please try again in a moment.",
                reply_to,
            )
            return None
        if result.pending is not None:
            if live is not None:
                await live.abandon()
            await self._ask(conv, result.pending, user_name, reply_to)
        elif result.text is not None:
            if live is None or not await live.finish(result.text):
                await self._send(conv.channel, conv.chat_id, result.text, reply_to)
        return result

    async def _send(self, channel: str, chat_id: str, text: str, reply_to: str | None) -> None:
        ch = self.channels.get(channel)
        if ch is None:
            log.warning("cannot send to %s:%s: channel not running", channel, chat_id)
            return
        await ch.send(chat_id, text, reply_to=reply_to)

    # -- confirmations --------------------------------------------------------------------

    async def _ask(
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
            summary=pending.summary,
            remaining=pending.remaining,
            iteration=pending.iteration,
            state="pending",
            message_ref=None,
            reply_to=reply_to,
            expires_at=pending.expires_at,
        )
        await self.store.add_confirmation(conv, row)
        prompt = ConfirmationPrompt(
            row.id,
            conv.chat_id,
            row.user_id,
            row.user_name,
            row.tool,
            row.summary,
            row.expires_at,
            reply_to,
        )
        ref = await self.channels[conv.channel].show_confirmation(prompt)
        await self.store.set_confirmation_ref(row.id, ref.message_id)

    async def _resolve(self, conf: ConfirmationRow, text: str) -> None:
        channel = self.channels.get(conf.channel)
        if channel is None or conf.message_ref is None:
            return
        try:
            await channel.resolve_confirmation(MessageRef(conf.chat_id, conf.message_ref), text)
        except Exception as exc:
            log.warning("could not update confirmation %s: %s", conf.id, exc)

    async def _expire(self, conf: ConfirmationRow) -> None:
        if await self.store.transition(conf.id, "pending", "expired"):
            self._spawn(self._resolve(conf, f"⌛ Expired: {conf.summary}"), "resolve-expired")
            self._wake(ConversationKey(conf.channel, conf.chat_id), ("decision", conf.id))

    async def _expiry_watch(self) -> None:
        while True:
            await asyncio.sleep(self.settings.expiry_check_s)  # a periodic timer
            now = time.time()
            for conf in await self.store.confirmations("pending"):
                if conf.expires_at <= now:
                    await self._expire(conf)

    async def _cancel_pending(self, key: ConversationKey, reason: str) -> None:
        pending = await self.store.confirmations(
            "pending", channel=key.channel, chat_id=key.chat_id
        )
        for conf in pending:
            if await self.store.transition(conf.id, "pending", "cancelled"):
                await self.store.close_dangling(conf.conversation_id, reason)
                self._spawn(self._resolve(conf, f"✖️ Cancelled: {conf.summary}"), "resolve-cancel")

    async def _resume(self, confirmation_id: str) -> None:
        conf = await self.store.confirmation(confirmation_id)
        if conf is None or conf.state not in ("approved", "declined", "expired"):
            return
        approved = conf.state == "approved"
        if approved and not await self.store.transition(conf.id, "approved", "executing"):
            return
        conv = await self.store.conversation(conf.channel, conf.chat_id)
        pending = PendingCall(
            conf.id,
            conf.call_id,
            conf.tool,
            conf.args,
            conf.summary,
            conf.user_id,
            conf.expires_at,
            conf.remaining,
            conf.iteration,
        )
        reason = EXPIRED if conf.state == "expired" else None
        history = await self._history(conv)
        # Cancelled (shutdown, /stop) while running, the state stays "executing": the action
        # may have happened, so it is reported and never re-run without a new confirmation.
        await self._run_turn(
            conv,
            history,
            conf.user_id,
            conf.user_name,
            conf.reply_to,
            pending=pending,
            approved=approved,
            reason=reason,
        )
        if approved and await self.store.transition(conf.id, "executing", "executed"):
            await self._resolve(conf, f"✅ Done: {conf.summary}")

    # -- background jobs ------------------------------------------------------------------

    async def _job_done(self, key: ConversationKey, job_id: str, result: ToolResult) -> None:
        if await self.store.job_state(job_id) is None:  # an AsyncTool's own callback
            conv = await self.store.conversation(key.channel, key.chat_id)
            await self.store.add_job(conv, job_id, "", job_id.split("-")[0], {}, resumable=False)
        for_user = result.for_user if result.for_user and not result.silent else None
        if await self.store.finish_job(job_id, result.for_llm, for_user, result.is_error):
            self._wake(key, ("job", job_id))
        else:
            log.info("duplicate result for job %s ignored", job_id)

    async def _follow_up(self, job_id: str) -> None:
        job = next((j for j in await self.store.jobs("done") if j.id == job_id), None)
        if job is None:
            return
        conv = await self.store.conversation(job.channel, job.chat_id)
        outcome = "failed" if job.is_error else "finished"
        text = f"Background job {job_id} ({job.tool}) {outcome}: {job.result}"
        await self._inject(conv, job_id, text)
        await self.store.set_job_state(job_id, "delivered", "done")
        if job.for_user:
            await self._send(conv.channel, conv.chat_id, job.for_user, None)
            return
        history = await self._history(conv)
        await self._run_turn(conv, history, job.user_id, "", None)

    async def _inject(self, conv: Conversation, job_id: str, text: str) -> None:
        """Background results enter the history as tool data, never as a user or system line."""
        call = ToolCall(f"job_{job_id}", "background_job_result", json.dumps({"job_id": job_id}))
        await self.store.append(conv.id, Message("assistant", None, [call]))
        await self.store.append(conv.id, Message("tool", text, tool_call_id=call.id))
