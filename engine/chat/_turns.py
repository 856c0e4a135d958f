"""Running a turn: load the conversation, drive the loop, deliver the answer exactly once.

Every message the loop produces is stored as it happens. The answer is stored with a pending
delivery; once the platform has accepted it, its platform id is recorded together with the
inbox messages it answers, in one transaction. So after a crash an answer whose delivery is
recorded is never sent again, and one that is stored but not recorded is sent by
:meth:`TurnRunner.recover` before anything new happens in that chat. The only window left is a
crash between the platform accepting a message and that commit (measured in benchmarks/soak.py).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from engine import metrics
from engine._channel import Channel, Reaction
from engine.chat._chat_settings import ChatSettings
from engine.chat._confirmations import Confirmations, pending_call
from engine.chat._delivery import Delivery
from engine.chat._limits import today
from engine.chat._live import LiveReply, typing
from engine.chat._notices import Notices, apology
from engine.chat._permissions import Permissions
from engine.chat._progress import Progress
from engine.chat._reactions import StatusReactions
from engine.chat._slash import open_slash_skill
from engine.chat._speech import VoiceAnswers
from engine.chat._spend import Meter, charging
from engine.chat._thinking import show_thoughts
from engine.chat._tooling import PromptPart, Tooling
from engine.chat._untrusted import untrusted_of
from engine.context import RecentImages, Window
from engine.i18n import language_line
from engine.loop import ConversationKey, ToolLoop, TurnContext, TurnResult
from engine.models import Message
from engine.store import (
    ConfirmationRow,
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


@dataclass(slots=True)
class TurnSettings:
    system_prompt: str = ""
    history_limit: int = 200
    stream: bool = False
    dm_only: set[str] = field(default_factory=set)  # tools never offered in group chats
    tool_calls_per_turn: int | None = 25  # admins are exempt
    tool_progress: bool = True  # a status line per tool step while the turn runs (_progress)


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
        resume: tuple[ConfirmationRow, bool, str | None] | None = None,
        failed: Callable[[LLMError, str], str] = apology,
    ) -> TurnResult | None:
        """One turn from the stored history (a resumed one when `resume` is given); when the
        model fails, the chat reads `failed(error, its language)` and None is returned."""
        channel = self.channels.get(conv.channel)
        if channel is None:
            log.warning("no channel %s is running; turn in %s skipped", conv.channel, conv.chat_id)
            return None
        started = time.monotonic()
        streaming = self.settings.stream and channel.capabilities.edits
        live = LiveReply(channel, conv.chat_id, reply_to) if streaming else None
        tooling = self._tooling()
        ctx = self._context(conv, user_id, user_name, live, tooling.loop)
        progress = None
        if self.settings.tool_progress and channel.capabilities.edits:
            progress = Progress(channel, conv.chat_id, reply_to)
            ctx.on_step = progress.step
        answered = [r.message_id for r in answering]
        self.reactions.show(conv.channel, conv.chat_id, answered, Reaction.WORKING)
        outcome: Reaction | None = Reaction.FAILED
        try:
            with tooling.use(), charging(self.meter, conv.channel, conv.chat_id, user_id):
                result = await self._run(
                    conv, ctx, tooling, channel, live, reply_to, answering, resume, failed, started
                )
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
        self,
        conv: Conversation,
        ctx: TurnContext,
        tooling: Tooling,
        channel: Channel,
        live: LiveReply | None,
        reply_to: str | None,
        answering: Sequence[InboxRow],
        resume: tuple[ConfirmationRow, bool, str | None] | None,
        failed: Callable[[LLMError, str], str],
        started: float,
    ) -> TurnResult | None:
        user_id, user_name = ctx.user_id, ctx.user_name
        ctx.grants = functools.partial(self.permissions.granted, ctx.key)
        loop = tooling.loop
        for part in (*self.parts, *tooling.parts):
            if text := await part.prompt(conv.channel, conv.chat_id, user_id, conv.is_private):
                ctx.system = f"{ctx.system}\n\n{text}".strip()
        window, history = await self._history(conv, loop)
        if self.images is not None:
            history = await self.images.for_turn(conv.channel, history)
        answer: list[int] = []
        read = [*history]  # what the model has read so far: how tools' texts are shown
        as_tools = functools.partial(untrusted_of, read, ctx.system, user_id, tool_text=True)
        ctx.send = self.notices.sender(ctx.key, as_tools)

        async def record(msg: Message) -> None:
            read.append(msg)
            deliver = (reply_to or "") if msg.is_answer else None
            message_id = await self.store.conversations.append(conv.id, msg, deliver=deliver)
            if deliver is not None:
                answer.append(message_id)

        for opened in await open_slash_skill(loop, history, ctx) if resume is None else []:
            await record(opened)  # `/skill-name args`: the turn starts with the skill open
            history.append(opened)
        try:
            async with typing(channel, conv.chat_id):
                if resume is None:
                    result = await loop.run(history, ctx, record=record, window=window)
                else:
                    conf, approved, reason = resume
                    guard = self.confirmations.held.guard(conf, self.confirmations.started)
                    result = await loop.resume(
                        history,
                        pending_call(conf),
                        approved,
                        ctx,
                        record=record,
                        reason=reason,
                        starting=guard.starting,
                        ran=guard.ran,
                        known=guard.known,
                        window=window,
                    )
        except LLMError as exc:
            log.error("LLM request failed in %s: %s", ctx.key, exc)
            metrics.turn_ended(conv.channel, "failed", time.monotonic() - started, len(answering))
            if live is not None:
                await live.abandon()
            said = failed(exc, self.language(ctx.key, user_id))
            await self.notices.say(conv.channel, conv.chat_id, said, reply_to)
            await self.store.inbox.answered([r.id for r in answering])
            return None
        if result.pending is not None:
            if live is not None:
                await live.abandon()
            await self.confirmations.ask(conv, result.pending, user_name, reply_to)
            await self.store.inbox.answered([r.id for r in answering])
        elif answer and result.text is not None:
            await show_thoughts(self.chat_settings, channel, ctx.key, result.thoughts, reply_to)
            untrusted = untrusted_of(read, ctx.system, user_id, taint=result.taint)
            shown = live is not None and await live.finish(result.text, untrusted)
            if shown and live is not None and live.ref is not None:
                await self.delivery.delivered(answer[-1], live.ref.message_id, answering)
            else:
                await self.deliver(
                    answer[-1], conv, result.text, reply_to, answering, untrusted=untrusted
                )
            if self.voice is not None:
                await self.voice.answer(channel, ctx.key, answering, result.text, reply_to)
        seconds = time.monotonic() - started
        _log_turn(ctx, result, seconds)
        outcome = "confirmation" if result.pending is not None else "answered"
        metrics.turn_ended(conv.channel, outcome, seconds, len(answering))
        u = result.usage
        await self.store.usage.add(
            conv.channel,
            user_id,
            today(),
            u.prompt_tokens,
            u.completion_tokens,
            len(result.tool_calls),
        )
        return result

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
        )


def _log_turn(ctx: TurnContext, result: TurnResult, seconds: float) -> None:
    u, outcome = result.usage, "waiting for a confirmation" if result.pending else "answered"
    log.info(
        "turn in %s for user %s %s in %.2f s; tools: %s; tokens: %d in (cache: %d read, "
        "%d written), %d out",
        *(ctx.key, ctx.user_id, outcome, seconds, ", ".join(result.tool_calls) or "none"),
        *(u.prompt_tokens, u.cached_tokens, u.cache_write_tokens, u.completion_tokens),
    )
