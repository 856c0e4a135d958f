"""The chat commands (/help, /stop, /reset, /retry, /undo, /compact, /permissions, /settings,
/schedules, /usage, /forget_me, /memory, /users, /console) and the buttons of their menus. A command
answers at once, out of the chat's order, except those that change the conversation (/retry,
/undo, /compact): they queue a work item and answer when it has run. /stop answers once what it
stopped is recorded (engine/chat/_dispatch/_dispatcher.py): the stopped turn is left out of every
later request, and a restart does not finish it."""

from __future__ import annotations

import asyncio
import logging

from engine._channel import Action, Command, InboundMessage, Reply
from engine.chat._access._limits import Limits
from engine.chat._access._pairing import Pairing
from engine.chat._access._spend import charging
from engine.chat._commands._console_link import console_link
from engine.chat._commands._forget import ForgetMe
from engine.chat._commands._help import help_text
from engine.chat._commands._settings_menu import SettingsMenu
from engine.chat._confirmations._confirmations import Confirmations
from engine.chat._confirmations._permissions import Permissions
from engine.chat._confirmations._questions import Questions
from engine.chat._jobs._schedules import Schedules
from engine.chat._settings._chat import ChatSettings
from engine.chat._turns._memory import Remembered
from engine.chat._turns._notices import apology
from engine.chat._turns._runner import TurnRunner
from engine.i18n import N_, translator
from engine.loop import ConversationKey
from engine.store import Store
from engine.work import ChatQueues, Cluster, Compact, Rewind
from tools.errors import LLMError

log = logging.getLogger(__name__)

STOPPED = "cancelled: the user stopped the turn."
STOP_WAIT_S = 10.0  # "Stopped." waits this long at most for the stop to be recorded
BUSY = N_("I am still busy in this chat; try again in a moment.")
SHUTTING_DOWN = N_("I am shutting down; try again in a moment.")


class Commands:
    def __init__(
        self,
        *,
        store: Store,
        queues: ChatQueues,
        turns: TurnRunner,
        confirmations: Confirmations,
        permissions: Permissions,
        chat_settings: ChatSettings,
        schedules: Schedules,
        limits: Limits,
        pairing: Pairing,
        cluster: Cluster | None,
        forget: ForgetMe,
        memory: Remembered | None = None,
        questions: Questions | None = None,
    ) -> None:
        self.store = store
        self.queues = queues
        self.turns = turns
        self.confirmations = confirmations
        self.permissions = permissions
        self.chat_settings = chat_settings
        self.settings_menu = SettingsMenu(chat_settings)  # /settings
        self.schedules = schedules
        self.limits = limits
        self.pairing = pairing
        self.allowed = pairing.allowed
        self.cluster = cluster
        self.forget = forget
        self.memory = memory
        self.questions = questions

    async def handle(self, msg: InboundMessage, command: Command) -> Reply:
        result = await self._command(msg, command)
        return result if isinstance(result, Reply) else Reply(result)

    async def act(self, action: Action) -> Reply:
        """A button of a command's menu."""
        _ = translator(action.language).gettext
        if not self.allowed(action.channel, action.user_id):
            return Reply(
                _("Sorry, you are not allowed to use this bot. Your user id is {user_id}.").format(
                    user_id=action.user_id
                )
            )
        reply = (
            await self.pairing.act(action)
            or await self.permissions.act(action)
            or await self.schedules.act(action)
            or await self.settings_menu.act(action)
            or await self.forget.act(action)
            or (await self.memory.act(action) if self.memory is not None else None)
            or (await self.questions.act(action) if self.questions is not None else None)
        )
        return reply or Reply(_("This button no longer works."))

    async def _command(self, msg: InboundMessage, command: Command) -> str | Reply:
        key = ConversationKey(msg.channel, msg.chat_id)
        _ = translator(msg.language).gettext
        allowed = self.allowed(msg.channel, msg.user_id) or await self.pairing.recheck(
            msg.channel, msg.user_id
        )
        if command is Command.START:
            greeting = _("Hi {name}! Your user id is {user_id}.").format(
                name=msg.user_name or _("there"), user_id=msg.user_id
            )
            if not allowed:
                asked = await self.pairing.refusal(msg, always=True) or ""
                return asked if msg.user_id in asked else f"{greeting} {asked}"  # the id once
            return greeting + " " + _("Send me a message to start; /help lists what I can do.")
        if not allowed:
            return await self.pairing.refusal(msg, always=True) or ""
        if command is Command.USERS:
            if not self.pairing.policy.is_admin(msg.channel, msg.user_id):
                return _("Only the bot's owners ([access] admins) can see who may use me.")
            return await self.pairing.menu(language=msg.language)
        if command is Command.CONSOLE:
            return await console_link(self.pairing, msg)
        if command is Command.HELP:
            return help_text(
                self.turns.loop.registry.select(),  # those in force (a reload changes them)
                msg.language,
                memory=self.memory is not None,
                owner=self.pairing.policy.is_admin(msg.channel, msg.user_id),
            )
        if command is Command.STOP:
            stopped = await self.stop(key)
            if cancelled := await self.confirmations.cancel_pending(key, STOPPED):
                await self.stop_asked(key)  # the turn ended asking: stopped too
            log.info("/stop in %s by user %s", key, msg.user_id)
            return _("Stopped.") if stopped or cancelled else _("Nothing to stop.")
        language = msg.language or "en"
        if command in (Command.RETRY, Command.UNDO):
            done: asyncio.Future[str] = asyncio.get_running_loop().create_future()
            retry = command is Command.RETRY
            rewind = Rewind(retry, msg.user_id, msg.user_name, done, language)
            return await self._queued(key, rewind, done)
        if command is Command.PERMISSIONS:
            return await self.permissions.menu(key, language=language)
        if command is Command.SETTINGS:
            return await self.settings_menu.command(msg)
        if command is Command.SCHEDULES:
            return await self.schedules.menu(key, language=language)
        if command is Command.USAGE:
            return await self.limits.usage(msg)
        if command is Command.FORGET_ME:
            return await self.forget.ask(msg)
        if command is Command.MEMORY:
            if self.memory is None:
                return _("This bot keeps no memory.")
            return await self.memory.menu(msg)
        if command is Command.RESET:
            await self.stop(key)
            await self.confirmations.cancel_pending(key, "cancelled: the conversation was reset.")
            await self.store.conversations.reset(key.channel, key.chat_id)
            return _("Started a fresh conversation.")
        if command is Command.COMPACT:
            done = asyncio.get_running_loop().create_future()
            compact = Compact(done, msg.user_id, language)
            return await self._queued(key, compact, done)  # after what the chat has queued
        return _("Unknown command.")

    async def _queued(
        self, key: ConversationKey, item: Rewind | Compact, done: asyncio.Future[str]
    ) -> str:
        """Run `item` in the chat's order (held here first, with several instances) and answer
        with what it says."""
        _ = translator(item.language).gettext
        if self.cluster is not None and not await self.cluster.leases.acquire(key):
            return _(BUSY)
        if not self.queues.put(key, item):
            return _(SHUTTING_DOWN)
        return await done

    async def stop(self, key: ConversationKey) -> bool:
        """Stop the item running in the chat, on whichever instance runs it; here, wait (a
        little) until what it cut off is recorded."""
        if self.cluster is not None:
            stopped = await self.cluster.stop(key)
        else:
            stopped = self.queues.stop(key)
        if stopped:
            await self.queues.stopped(key, STOP_WAIT_S)
        return stopped

    async def stop_asked(self, key: ConversationKey) -> None:
        """The chat's turn ended asking a confirmation, which the user (or the bot's owner)
        just cancelled instead: that turn is stopped, as /stop stops a running one."""
        conv = await self.store.conversations.active(key.channel, key.chat_id)
        n = await self.store.conversations.stop_turn(conv.id)
        log.info("stopped the turn waiting in %s: %d messages left out from now", key, n)

    async def rewind(self, key: ConversationKey, item: Rewind) -> None:
        """/retry and /undo, in the chat's order."""
        try:
            await self._rewind(key, item)
        finally:
            if not item.done.done():
                failed = translator(item.language).gettext("That did not work; please try again.")
                item.done.set_result(failed)

    async def _rewind(self, key: ConversationKey, item: Rewind) -> None:
        await self.confirmations.cancel_pending(
            key, "cancelled: the user rewound the conversation."
        )
        _ = translator(item.language).gettext
        conv = await self.store.conversations.active(key.channel, key.chat_id)
        dropped = await self.store.conversations.rewind(conv.id, keep_question=item.retry)
        if not item.retry:
            text = (
                _("Forgot your last message and my answer.") if dropped else _("Nothing to undo.")
            )
            item.done.set_result(text)
            return
        if await self.store.conversations.last(conv.id) is None:
            item.done.set_result(_("Nothing to answer again."))
            return
        item.done.set_result(_("Asking again…"))
        await self.turns.run(conv, item.user_id, item.user_name, None)

    async def compact(self, key: ConversationKey, item: Compact) -> None:
        """/compact, in the chat's order."""
        try:
            with charging(self.turns.meter, key.channel, key.chat_id, item.user_id):
                item.done.set_result(await self._compacted(key, item.language))
        finally:
            if not item.done.done():  # stopped or failed
                stopped = N_("Stopped: the conversation was not condensed.")
                item.done.set_result(translator(item.language).gettext(stopped))

    async def _compacted(self, key: ConversationKey, language: str) -> str:
        """/compact: fold the chat's finished turns into its summary now, and say what it saved."""
        _ = translator(language).gettext
        if self.turns.loop.context is None:
            return _("This bot sends whole conversations; there is nothing to condense.")
        conv = await self.store.conversations.active(key.channel, key.chat_id)
        try:
            done = await self.turns.loop.context.compact(conv.id)
        except LLMError as exc:
            log.error("/compact failed in %s: %s", key, exc)
            return apology(exc, language)
        if done.messages == 0 and done.tried:
            return _(
                "I could not condense the conversation now: the model's summary came back cut "
                "off, so nothing was replaced. Try /compact again later."
            )
        if done.messages == 0:
            return _("Nothing to condense yet: the conversation is already as short as it gets.")
        condensed = translator(language).ngettext(
            "Condensed {n} message into a summary: each request now carries about {after} "
            "tokens of conversation instead of {before} ({saved} saved). The full history "
            "stays stored.",
            "Condensed {n} messages into a summary: each request now carries about {after} "
            "tokens of conversation instead of {before} ({saved} saved). The full history "
            "stays stored.",
            done.messages,
        )
        saved = done.before - done.after
        return condensed.format(
            n=done.messages, after=f"{done.after:,}", before=f"{done.before:,}", saved=f"{saved:,}"
        )
