# Left whole: a turn's steps in order, one class (its types, delivery and streaming are modules of
# their own).
"""Running a turn: load the conversation, drive the loop, deliver the answer exactly once.

A turn is one :class:`Turn` (where it answers, with which tooling, what it stored) taken through
small steps: prepared (grants, prompt parts, history, a slash skill), driven (the loop run or
resumed after a confirmation), then settled one way: the model failed (:meth:`_failed`), a call
waits for a confirmation (:meth:`_ask`), or the answer is shown (thoughts, the streamed reply)
and delivered (:class:`~engine.chat._turns._delivery.Delivery`) and spoken; and accounted for
(log, metrics, usage). Every message the loop produces is stored as it happens (:meth:`_record`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping, Sequence

from engine import metrics
from engine._channel import Channel, Reaction
from engine._clock import monotonic
from engine.chat._access._limits import today
from engine.chat._access._spend import Meter, charging
from engine.chat._confirmations._confirmations import Confirmations, pending_call
from engine.chat._confirmations._permissions import Permissions
from engine.chat._settings._chat import ChatSettings
from engine.chat._settings._sections import TurnSettings
from engine.chat._settings._tooling import PromptPart, Tooling
from engine.chat._turns._delivery import Delivery
from engine.chat._turns._notices import Notices, apology
from engine.chat._turns._progress import Progress
from engine.chat._turns._reactions import StatusReactions
from engine.chat._turns._slash import open_slash_skill
from engine.chat._turns._speech import VoiceAnswers
from engine.chat._turns._streaming import LiveReply, typing
from engine.chat._turns._thinking import show_thoughts
from engine.chat._turns._turn import Resume, Start, Turn
from engine.chat._turns._untrusted import untrusted_of
from engine.context import RecentImages, Window
from engine.i18n import language_line
from engine.loop import ConversationKey, PendingCall, ToolLoop, TurnContext, TurnResult
from engine.models import Message
from engine.store import (
    Conversation,
    InboxRow,
    Store,
)
from engine.work import Tasks
from tools.errors import LLMError, StoreUnavailable

log = logging.getLogger(__name__)

RESTARTED = "interrupted: the daemon restarted before this call finished."
GROUP_NOTE = (
    "This is a group chat: each user message starts with the name of the person who wrote it, "
    "in brackets. Address people by name when it helps."
)


class TurnRunner:
    def __init__(
        self,
        store: Store,
        tooling: Callable[[], Tooling],
        channels: Mapping[str, Channel],
        confirmations: Confirmations,
        permissions: Permissions,
        settings: Callable[[], TurnSettings],
        notices: Notices,
        images: RecentImages | None = None,
        chat_settings: ChatSettings | None = None,
        meter: Meter | None = None,
        voice: VoiceAnswers | None = None,
        parts: Sequence[PromptPart] = (),
        tasks: Tasks | None = None,
    ) -> None:
        self.store = store
        self.parts = parts  # appended to the system prompt, in order (then the tooling's)
        self._tooling = tooling  # the model and tools in force: each turn keeps the one it took
        self.channels = channels
        self.confirmations = confirmations
        self.permissions = permissions
        self._settings = settings  # those in force when a turn starts (a reload changes them)
        self.images = images  # pictures in the history: bytes for recent turns, else markers
        self.chat_settings = chat_settings  # a chat's persona and model (/settings)
        self.notices = notices
        self.delivery = Delivery(store, channels, notices)  # the answer, sent exactly once
        self.meter = meter  # what the turn's requests cost, charged to its user
        self.voice = voice  # answers spoken too ([media] speech_model)
        self.reactions = StatusReactions(channels, tasks or Tasks())  # on the answered messages
        self.delivery = Delivery(store, channels, notices)  # each answer once
        self.deliver = self.delivery.deliver

    @property
    def settings(self) -> TurnSettings:
        return self._settings()

    def language(self, key: ConversationKey, user_id: str) -> str:
        """The language of the chat's user (chat/_languages.py): relaybot's words and the
        model's note."""
        chosen = self.chat_settings
        return chosen.languages.of(key, user_id) if chosen is not None else "en"

    @property
    def loop(self) -> ToolLoop:
        """The tool loop in force (a turn uses the one it started with)."""
        return self._tooling().loop

    async def user_turn(self, conv: Conversation, rows: Sequence[InboxRow]) -> None:
        """Answer `rows`, just taken into `conv`."""
        last = rows[-1]
        await self.run(conv, last.user_id, last.user_name, last.message_id, answering=rows)

    async def run(
        self,
        conv: Conversation,
        user_id: str,
        user_name: str,
        reply_to: str | None,
        *,
        answering: Sequence[InboxRow] = (),
        resume: Resume | None = None,
        failed: Callable[[LLMError, str], str] = apology,
    ) -> TurnResult | None:
        """One turn from the stored history (a resumed one when `resume` is given); when the
        model fails, the chat reads `failed(error, its language)` and None is returned."""
        channel = self.channels.get(conv.channel)
        if channel is None:
            log.warning("no channel %s is running; turn in %s skipped", conv.channel, conv.chat_id)
            return None
        started = monotonic()
        streaming = self.settings.stream and channel.capabilities.edits
        live = LiveReply(channel, conv.chat_id, reply_to) if streaming else None
        tooling = self._tooling()
        ctx = self._context(conv, user_id, user_name, live, tooling.loop)
        progress = None
        if self.settings.tool_progress and channel.capabilities.edits:
            progress = Progress(channel, conv.chat_id, reply_to)
            ctx.on_step = progress.step
        turn = Turn(conv, ctx, channel, tooling, reply_to, answering, started, live)
        answered = [r.message_id for r in answering]
        self.reactions.show(conv.channel, conv.chat_id, answered, Reaction.WORKING)
        outcome: Reaction | None = Reaction.FAILED
        try:
            with tooling.use(), charging(self.meter, conv.channel, conv.chat_id, user_id):
                result = await self._run(turn, resume, failed)
            outcome = Reaction.DONE if result is not None else Reaction.FAILED
            return result
        except (asyncio.CancelledError, StoreUnavailable):
            outcome = None  # cut off: the turn that finishes it (a retry, a restart) says how
            raise
        finally:
            if outcome is not None:
                self.reactions.show(conv.channel, conv.chat_id, answered, outcome)
            if progress is not None:
                await progress.close()  # after the answer: it never waits for this

    async def _run(
        self, turn: Turn, resume: Resume | None, failed: Callable[[LLMError, str], str]
    ) -> TurnResult | None:
        start = await self._prepare(turn, open_skill=resume is None)
        try:
            result = await self._drive(turn, start, resume)
        except LLMError as exc:
            await self._failed(turn, exc, failed)
            return None
        if result.pending is not None:
            await self._ask(turn, result.pending)
        elif turn.answer and result.text is not None:
            await self._answer(turn, result)
        await self._account(turn, result)
        return result

    async def _prepare(self, turn: Turn, *, open_skill: bool) -> Start:
        """The turn's grants and system prompt parts, and the history it starts from (with a
        slash skill opened, when the message asks for one and the turn is not resumed)."""
        conv, ctx, loop = turn.conv, turn.ctx, turn.tooling.loop
        ctx.grants = functools.partial(self.permissions.granted, ctx.key)
        for part in (*self.parts, *turn.tooling.parts):
            if text := await part.prompt(conv.channel, conv.chat_id, ctx.user_id, conv.is_private):
                ctx.system = f"{ctx.system}\n\n{text}".strip()
        window, history = await self._history(conv, loop)
        if self.images is not None:
            history = await self.images.for_turn(conv.channel, history)
        turn.read[:] = history  # what the model has read so far: how tools' texts are shown
        as_tools = functools.partial(
            untrusted_of, turn.read, ctx.system, ctx.user_id, tool_text=True
        )
        ctx.send = self.notices.sender(ctx.key, as_tools)
        for opened in await open_slash_skill(loop, history, ctx) if open_skill else []:
            await self._record(turn, opened)  # `/skill-name args`: the turn starts with it open
            history.append(opened)
        return Start(window, history)

    async def _drive(self, turn: Turn, start: Start, resume: Resume | None) -> TurnResult:
        """The loop run from `start`, or resumed with the answer to its confirmation."""
        loop, ctx = turn.tooling.loop, turn.ctx
        record = functools.partial(self._record, turn)
        async with typing(turn.channel, turn.conv.chat_id):
            if resume is None:
                return await loop.run(start.history, ctx, record=record, window=start.window)
            conf, approved, reason = resume
            guard = self.confirmations.held.guard(conf, self.confirmations.started)
            return await loop.resume(
                start.history,
                pending_call(conf),
                approved,
                ctx,
                record=record,
                reason=reason,
                starting=guard.starting,
                ran=guard.ran,
                known=guard.known,
                window=start.window,
            )

    async def _record(self, turn: Turn, msg: Message) -> None:
        """Store a message as the loop produces it; the answer with its delivery pending."""
        turn.read.append(msg)
        deliver = (turn.reply_to or "") if msg.is_answer else None
        message_id = await self.store.conversations.append(turn.conv.id, msg, deliver=deliver)
        if deliver is not None:
            turn.answer.append(message_id)

    async def _failed(
        self, turn: Turn, exc: LLMError, failed: Callable[[LLMError, str], str]
    ) -> None:
        """The model failed: the chat reads `failed`'s words, and its messages are answered."""
        log.error("LLM request failed in %s: %s", turn.ctx.key, exc)
        metrics.turn_ended(turn.conv.channel, "failed", turn.seconds(), len(turn.answering))
        if turn.live is not None:
            await turn.live.abandon()
        said = failed(exc, self.language(turn.ctx.key, turn.ctx.user_id))
        await self.notices.say(
            turn.conv.channel, turn.conv.chat_id, said, turn.reply_to, to=turn.ctx.user_id
        )
        await self.store.inbox.answered(turn.answered_ids())

    async def _ask(self, turn: Turn, pending: PendingCall) -> None:
        """A destructive call waits: its requester is asked, and the prompt answers the
        messages (the streamed reply, if any, gives way to it)."""
        if turn.live is not None:
            await turn.live.abandon()
        await self.confirmations.ask(turn.conv, pending, turn.ctx.user_name, turn.reply_to)
        await self.store.inbox.answered(turn.answered_ids())

    async def _answer(self, turn: Turn, result: TurnResult) -> None:
        """The answer shown (the thoughts first, where the chat asked for them), delivered
        once, and spoken where the turn began with a voice message; after untrusted content
        without previews and with links to hosts nobody in the chat named as text."""
        key, text = turn.ctx.key, result.text or ""
        await show_thoughts(self.chat_settings, turn.channel, key, result.thoughts, turn.reply_to)
        untrusted = untrusted_of(turn.read, turn.ctx.system, turn.ctx.user_id, taint=result.taint)
        live, stored = turn.live, turn.answer[-1]
        if live is not None and await live.finish(text, untrusted) and live.ref is not None:
            await self.delivery.delivered(stored, live.ref.message_id, turn.answering)
        else:
            await self.delivery.deliver(
                stored, turn.conv, text, turn.reply_to, turn.answering, untrusted=untrusted
            )
        if self.voice is not None:
            await self.voice.answer(turn.channel, key, turn.answering, text, turn.reply_to)

    async def _account(self, turn: Turn, result: TurnResult) -> None:
        """The turn logged, counted in the metrics, and its tokens added to its user's usage."""
        seconds = turn.seconds()
        _log_turn(turn.ctx, result, seconds)
        outcome = "confirmation" if result.pending is not None else "answered"
        metrics.turn_ended(turn.conv.channel, outcome, seconds, len(turn.answering))
        u = result.usage
        await self.store.usage.add(
            turn.conv.channel,
            turn.ctx.user_id,
            today(),
            u.prompt_tokens,
            u.completion_tokens,
            len(result.tool_calls),
        )

    async def _history(
        self, conv: Conversation, loop: ToolLoop
    ) -> tuple[Window | None, list[Message]]:
        """What the turn starts from: with a context budget, the summary and what follows it."""
        if loop.context is not None:
            return await loop.context.load(conv.id)
        return None, await self.store.conversations.history(conv.id, self.settings.history_limit)

    def _context(
        self,
        conv: Conversation,
        user_id: str,
        user_name: str,
        live: LiveReply | None,
        loop: ToolLoop,
    ) -> TurnContext:
        key = ConversationKey(conv.channel, conv.chat_id)
        system = self.settings.system_prompt
        chosen = self.chat_settings
        if chosen is not None and (persona := chosen.of(key).persona):
            system = f"{system}\n\n{persona}".strip()
        tools = None
        if not conv.is_private:
            system = f"{system}\n\n{GROUP_NOTE}".strip()
            if self.settings.dm_only:
                tools = [n for n in loop.registry.names() if n not in self.settings.dm_only]
        if spoken := language_line(self.language(key, user_id)):  # none for English
            system = f"{system}\n\n{spoken}".strip()
        admin = self.permissions.policy.is_admin(conv.channel, user_id)
        return TurnContext(
            key,
            user_id,
            user_name,
            self.notices.sender(key),
            live.on_text if live is not None else None,
            tools,
            system,
            self.notices.file_sender(key),
            max_tool_calls=None if admin else self.settings.tool_calls_per_turn,
            model=chosen.model(key) if chosen is not None else None,
            is_private=conv.is_private,
            vision=self.images is not None and self.images.vision(),
        )


def _log_turn(ctx: TurnContext, result: TurnResult, seconds: float) -> None:
    u, outcome = result.usage, "waiting for a confirmation" if result.pending else "answered"
    log.info(
        "turn in %s for user %s %s in %.2f s; tools: %s; tokens: %d in (cache: %d read, "
        "%d written), %d out",
        *(ctx.key, ctx.user_id, outcome, seconds, ", ".join(result.tool_calls) or "none"),
        *(u.prompt_tokens, u.cached_tokens, u.cache_write_tokens, u.completion_tokens),
    )
