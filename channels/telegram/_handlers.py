"""Telegram → engine: the PTB handlers that hand matched updates to the engine.

Updates are matched by PTB handlers and filters (commands, text, captions and files, other
messages, button presses; ``_updates`` decides what is addressed to the bot) and handed to the
engine, which returns as soon as the message is stored. What the adapter itself replies (command
answers, "text only", button answers) goes out in tasks of the Application, off that path, so a
slow or rate-limited reply never holds up receiving. An update the store could not record fails
:meth:`Handlers.process`, so that it is not confirmed to Telegram and comes again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from telegram import BotCommand, Message, Update
from telegram.constants import ChatType
from telegram.error import TelegramError
from telegram.ext import (
    Application,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    filters,
)

from channels.telegram._guests import Guests, guest_inbound
from channels.telegram._markup import menu
from channels.telegram._media import MEDIA
from channels.telegram._outbox import Outbox
from channels.telegram._private import PrivateReplies, ephemeral_id_of, ephemeral_ref
from channels.telegram._topics import chat_key, topic_of
from channels.telegram._updates import ADDRESSED, Listening, inbound_message
from engine import Action, Command, Engine, Press, Reply, parse_action, parse_decision
from engine.i18n import DEFAULT, LANGUAGES, N_, translator
from tools.errors import StoreUnavailable

log = logging.getLogger("channels.telegram")

CHANNEL = "telegram"
UNREADABLE = N_(
    "I can read text, pictures, files and voice messages, but not this kind of message."
)
STALE_BUTTON = N_("This button no longer works.")
# Their answers are about the member who asked: in a group, with private replies, shown to them.
PERSONAL = frozenset({Command.USAGE, Command.MEMORY, Command.SETTINGS, Command.PERMISSIONS})


class Handlers:
    """The Application's handlers; `engine()` is the engine the adapter was started with."""

    def __init__(
        self,
        app: Application[Any, Any, Any, Any, Any, Any],
        outbox: Outbox,
        engine: Callable[[], Engine],
        listens: Callable[[str], bool],
        group_mode: str,
        private: PrivateReplies,
        guests: Guests,
    ) -> None:
        """`private`: where answers about one member go in groups (``_private``); `guests`:
        whose the buttons on a guest query's answer are (``_guests``)."""
        self._app = app
        self._outbox = outbox
        self._private = private
        self._guests = guests
        self._engine = engine
        self._unrecorded: dict[int, StoreUnavailable] = {}  # update id → why (see process)
        new = filters.UpdateType.MESSAGE  # edited messages and channel posts are ignored
        # A group set to "all" in /settings gets every message even when the config says
        # mentions; ADDRESSED is tried first, so a mention costs no lookup.
        groups = filters.ChatType.GROUPS if group_mode == "all" else ADDRESSED | Listening(listens)
        text = filters.TEXT | filters.CAPTION | MEDIA
        for command in Command:
            app.add_handler(CommandHandler(command.value, self._command(command), filters=new))
        app.add_handler(
            MessageHandler(new & text & (filters.ChatType.PRIVATE | groups), self._on_text)
        )
        app.add_handler(
            MessageHandler(
                new & ~text & ~filters.StatusUpdate.ALL & (filters.ChatType.PRIVATE | ADDRESSED),
                self._on_other,
            )
        )
        guest = filters.UpdateType.GUEST_MESSAGE  # a mention where the bot is not a member
        app.add_handler(MessageHandler(guest & (text | filters.COMMAND), self._on_guest))
        app.add_handler(CallbackQueryHandler(self._on_button))
        app.add_error_handler(self._on_error)

    async def register_menus(self) -> None:
        """The command menu, then the same in each other language (shown by the user's app):
        one request each, registered by the instance that receives, once it first does."""
        bot = self._app.bot
        try:
            await bot.set_my_commands([BotCommand(c.value, c.description) for c in Command])
            for language in [code for code in LANGUAGES if code != DEFAULT]:  # in their language
                menu = [BotCommand(c.value, c.describe(language)) for c in Command]
                await bot.set_my_commands(menu, language_code=language)
        except TelegramError as exc:
            log.warning("could not register the bot commands: %s", exc)

    async def process(self, update: Update) -> None:
        """PTB's dispatch; an update the store could not record fails, so it is not confirmed
        (PTB hands handler errors to ``_on_error`` instead of raising them)."""
        await self._app.process_update(update)
        unrecorded = self._unrecorded.pop(update.update_id, None)
        if unrecorded is not None:
            raise unrecorded

    async def _on_text(self, update: Update, _: ContextTypes.DEFAULT_TYPE) -> None:
        msg = inbound_message(update.message)
        if msg is not None:
            await self._engine().handle_inbound(msg)

    async def _on_guest(self, update: Update, _: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.guest_message
        assert message is not None
        msg = guest_inbound(inbound_message(message), message)
        if msg is not None:
            await self._engine().handle_inbound(msg)

    async def _on_other(self, update: Update, _: ContextTypes.DEFAULT_TYPE) -> None:
        msg = inbound_message(update.message)
        if msg is not None:
            unreadable = translator(msg.language).gettext(UNREADABLE)
            reply = self._outbox.shown.send(
                msg.chat_id, unreadable, reply_to=msg.message_id, formatted=False
            )
            self._reply(update, reply)

    def _command(self, command: Command) -> Callable[..., Coroutine[Any, Any, None]]:
        async def on_command(update: Update, _: ContextTypes.DEFAULT_TYPE) -> None:
            msg = inbound_message(update.message)
            if msg is None:
                return
            reply = await self._engine().handle_command(msg, command)
            if reply.text:
                reply_to = None if msg.is_private else msg.message_id
                if command in PERSONAL and self._private.wanted(msg.chat_id):
                    self._reply(update, self._personal(msg.chat_id, msg.user_id, reply, reply_to))
                    return
                sent = self._outbox.send_menu(msg.chat_id, reply.text, reply_to, menu(reply))
                self._reply(update, sent)

        return on_command

    async def _personal(
        self, chat_id: str, user_id: str, reply: Reply, reply_to: str | None
    ) -> None:
        """A command's answer to the member who asked alone; refused there: to the group."""
        buttons = menu(reply)
        ref = await self._private.send(
            chat_id, user_id, reply.text, reply_to=reply_to, markup=buttons
        )
        if ref is None:
            await self._outbox.send_menu(chat_id, reply.text, reply_to, buttons)

    async def _on_button(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        query = update.callback_query
        assert query is not None
        if (action := parse_action(query.data or "")) is not None:
            await self._on_action(update, action)
            return
        language = query.from_user.language_code
        _ = translator(language).gettext
        parsed = parse_decision(query.data or "")
        if parsed is None:
            self._reply(update, query.answer(_(STALE_BUTTON)))
            return
        message = query.message
        chat_id = chat_key(message.chat.id, topic_of(message)) if message is not None else ""
        if query.inline_message_id:  # on a guest query's answer
            chat_id = self._guests.chat_of(query.inline_message_id) or ""
        user_id = str(query.from_user.id)
        press = Press(CHANNEL, chat_id, user_id, parsed[0], parsed[1], language)
        try:
            decision = await self._engine().handle_press(press)
        except Exception:
            failed = query.answer(_("Something went wrong; please try again."), show_alert=True)
            self._reply(update, failed)
            raise
        self._reply(update, query.answer(decision.message[:200], show_alert=not decision.accepted))

    async def _on_action(self, update: Update, action: str) -> None:
        """A press on a command reply's button: the engine says what the message shows now."""
        query = update.callback_query
        assert query is not None
        message = query.message
        language = query.from_user.language_code
        if message is None:
            self._reply(update, query.answer(translator(language).gettext(STALE_BUTTON)))
            return
        chat_id = chat_key(message.chat.id, topic_of(message))
        private = message.chat.type == ChatType.PRIVATE
        pressed = Action(CHANNEL, chat_id, str(query.from_user.id), action, private, language)
        reply = await self._engine().handle_action(pressed)
        self._reply(update, query.answer())
        eid = ephemeral_id_of(message) if isinstance(message, Message) else None
        if eid is not None:  # a private menu: it stays private
            ref = ephemeral_ref(chat_id, query.from_user.id, eid)
            self._reply(update, self._private.edit(ref, reply.text, menu(reply)))
            return
        edit = self._outbox.edit_menu(chat_id, str(message.message_id), reply.text, menu(reply))
        self._reply(update, edit)

    def _reply(self, update: Update, reply: Coroutine[Any, Any, Any]) -> None:
        """Send `reply` in a task of the Application (its errors go to the error handler;
        ``Application.stop`` awaits it), so that receiving does not wait for Telegram."""
        self._app.create_task(reply, update=update, name="telegram-reply")

    async def _on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        uid = update.update_id if isinstance(update, Update) else None
        if isinstance(context.error, StoreUnavailable):
            if uid is not None:  # a handler's: process raises it
                self._unrecorded[uid] = context.error
            return  # process's own (in a webhook's task): the webhook answers 500
        log.error("Telegram update %s failed", uid, exc_info=context.error)
