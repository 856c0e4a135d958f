"""Telegram: python-telegram-bot's Application, long polling, HTML replies and inline buttons.

Updates are matched by PTB handlers and filters (commands, text, captions and files, other
messages, button presses) and handed to the engine, which returns as soon as the message is
stored; the files a message carries travel as references, fetched when the engine asks
(``_telegram_media``). Our own
long polling (``_telegram_updates.Poller``, in place of PTB's Updater) runs a batch concurrently
across chats and in arrival order within a chat, and confirms it to Telegram only once every
update of it has been handed over: a crash loses no message. What the adapter itself replies
(command answers, "text only", button answers) goes out in tasks of the Application, off that
path, so a slow or rate-limited reply never holds up polling. The engine answers through send /
edit / typing / confirmations (``_telegram_outbox``, with ``_shown`` keeping long texts up to date
and ``_prompt`` laying out confirmations); requests go over aiohttp (``_telegram_http``) and
Markdown becomes Telegram HTML (``_telegram_markdown``, split by ``_telegram_format``). In webhook
mode (``[telegram] mode``) ``_telegram_webhook`` receives in place of the poller.

Start-up never blocks: ``start`` spawns the channel's task, which initialises the bot with
backoff while the Bot API is unreachable or rejects the token (said once, with what to check),
registers the commands and polls until ``stop``. With several instances on one store, only the
one holding the channel's receiving lease polls (``set_receiving``); every one sends.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from telegram import (
    BotCommand,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Update,
)
from telegram.constants import ChatMemberStatus, ChatType
from telegram.error import InvalidToken, TelegramError
from telegram.ext import (
    AIORateLimiter,
    Application,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    filters,
)

from channels._config import TelegramConfig
from channels._prompt import ATTACHED_NOTE, in_words, lay_out, who_and_when
from channels._telegram_format import CAPTION_LIMIT, TELEGRAM_LIMIT, escape, visible_len
from channels._telegram_http import AiohttpRequest
from channels._telegram_media import MEDIA, download
from channels._telegram_outbox import Outbox
from channels._telegram_updates import (
    ADDRESSED,
    TOKEN_REJECTED,
    Listening,
    Poller,
    inbound_message,
)
from engine import metrics
from engine._backoff import Backoff
from engine._channel import (
    Action,
    Attachment,
    Capabilities,
    Channel,
    Command,
    ConfirmationPrompt,
    Engine,
    MessageRef,
    OutgoingFile,
    Press,
    Receiver,
    Reply,
    encode_action,
    encode_decision,
    parse_action,
    parse_decision,
)
from tools import StoreUnavailable

if TYPE_CHECKING:
    from channels._telegram_webhook import Webhook

log = logging.getLogger(__name__)

UNREADABLE = "I can read text, pictures, files and voice messages, but not this kind of message."
STALE_BUTTON = "This button no longer works."


class TelegramChannel(Channel):
    name = "telegram"
    capabilities = Capabilities(
        max_message_length=4096,
        buttons=True,
        edits=True,
        markdown="telegram-html",
        edit_interval_s=1.0,
        typing_interval_s=4.0,
    )
    retry_initial_s = 1.0  # first back-off while the Bot API is unreachable at start-up

    def __init__(self, config: TelegramConfig) -> None:
        self._config = config
        self._engine: Engine | None = None
        self._task: asyncio.Task[None] | None = None  # connect, then poll
        self._receive = asyncio.Event()  # polling wanted (set_receiving)
        self._receive.set()
        self._polling: asyncio.Task[None] | None = None
        self._unrecorded: dict[int, StoreUnavailable] = {}  # update id → why (see _process)
        self._app = (
            Application.builder()
            .token(config.resolve_token())
            .base_url(config.api_base_url)
            .base_file_url(config.api_file_url or "")
            .request(AiohttpRequest(256))
            .get_updates_request(AiohttpRequest(1))
            .rate_limiter(_rate_limiter())
            .updater(None)  # polling is ours: see Poller
            .build()
        )
        self._outbox = Outbox(self._app.bot, self.retry_initial_s)
        self._webhook_secret = config.resolve_webhook_secret()  # None: polling
        self._add_handlers(config.group_mode)

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self, engine: Engine) -> None:
        """Returns at once; connecting (with retries) and polling go on in the background."""
        self._engine = engine
        self._task = asyncio.create_task(self._run(), name="telegram")
        self._task.add_done_callback(_log_failure)

    def receivers(self) -> Sequence[Receiver]:
        """Polling is one instance's at a time; behind a load balancer every instance takes
        webhook posts."""
        return () if self._webhook_secret is not None else (Receiver(self.name),)

    async def set_receiving(self, lease: str, on: bool, resume: str | None = None) -> None:
        """Poll (True) or not (False); stopping lets a batch in progress finish and confirms it.
        Nothing to resume from: the Bot API keeps what was not confirmed."""
        if on:
            self._receive.set()
            return
        self._receive.clear()
        polling, self._polling = self._polling, None
        if polling is not None:
            polling.cancel()
            await asyncio.gather(polling, return_exceptions=True)

    async def stop(self) -> None:
        """A batch of updates in progress finishes (bounded) and is confirmed; replies being
        sent are awaited (by ``Application.stop``)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        app = self._app
        if app.running:
            await app.stop()
        await app.shutdown()  # a no-op unless initialised
        await app.bot.shutdown()  # a cancelled initialize may have left the HTTP clients open
        self._outbox.close()

    async def _run(self) -> None:
        backoff = Backoff(self.retry_initial_s)
        token_reported = False
        while True:
            try:
                await self._app.initialize()  # a no-op once done
                if self._config.mode == "polling":  # getUpdates fails while a webhook is set
                    await self._app.bot.delete_webhook()
                break
            except InvalidToken:  # its message contains the token: never log it
                if not token_reported:
                    log.error(TOKEN_REJECTED, backoff.max_s)
                token_reported = True
            except TelegramError as exc:
                log.warning(
                    "Telegram Bot API unreachable, retrying in %gs (%s)", backoff.upcoming_s, exc
                )
            metrics.api_retry(self.name)
            await backoff.sleep()
        bot = self._app.bot
        try:
            await bot.set_my_commands([BotCommand(c.value, c.description) for c in Command])
        except TelegramError as exc:
            log.warning("could not register the bot commands: %s", exc)
        await self._app.start()
        self._outbox.open()
        receiver = self._receiver()
        while True:
            await self._receive.wait()
            self._polling = asyncio.create_task(receiver.run(), name="telegram-receive")
            try:
                await self._polling
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # stop()
                log.info("Telegram: another instance receives now")

    def _receiver(self) -> Poller | Webhook:
        cfg = self._config
        if self._webhook_secret is not None and cfg.webhook_url is not None:
            from channels._telegram_webhook import Webhook  # aiohttp's server: webhook mode only

            return Webhook(
                self._app,
                self._process,
                url=cfg.webhook_url,
                listen=cfg.listen_address(),
                secret=self._webhook_secret,
                retry_initial_s=self.retry_initial_s,
            )
        log.info("Telegram: polling as @%s", self._app.bot.username)
        return Poller(
            self._app.bot,
            self._process,
            timeout_s=cfg.poll_timeout_s,
            retry_initial_s=self.retry_initial_s,
        )

    # -- inbound -------------------------------------------------------------------------------

    def _add_handlers(self, group_mode: str) -> None:
        new = filters.UpdateType.MESSAGE  # edited messages and channel posts are ignored
        # A group set to "all" in /settings gets every message even when the config says
        # mentions; ADDRESSED is tried first, so a mention costs no lookup.
        listening = Listening(self._listens)
        groups = filters.ChatType.GROUPS if group_mode == "all" else ADDRESSED | listening
        text = filters.TEXT | filters.CAPTION | MEDIA
        app = self._app
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
        app.add_handler(CallbackQueryHandler(self._on_button))
        app.add_error_handler(self._on_error)

    async def _on_text(self, update: Update, _: ContextTypes.DEFAULT_TYPE) -> None:
        msg = inbound_message(update.message)
        if msg is not None:
            await self._engine_().handle_inbound(msg)

    async def _on_other(self, update: Update, _: ContextTypes.DEFAULT_TYPE) -> None:
        msg = inbound_message(update.message)
        if msg is not None:
            reply = self.send(msg.chat_id, UNREADABLE, reply_to=msg.message_id, formatted=False)
            self._reply(update, reply)

    def _command(self, command: Command) -> Callable[..., Coroutine[Any, Any, None]]:
        async def on_command(update: Update, _: ContextTypes.DEFAULT_TYPE) -> None:
            msg = inbound_message(update.message)
            if msg is None:
                return
            reply = await self._engine_().handle_command(msg, command)
            if reply.text:
                reply_to = None if msg.is_private else msg.message_id
                sent = self._outbox.send_menu(msg.chat_id, reply.text, reply_to, _menu(reply))
                self._reply(update, sent)

        return on_command

    async def _on_button(self, update: Update, _: ContextTypes.DEFAULT_TYPE) -> None:
        query = update.callback_query
        assert query is not None
        if (action := parse_action(query.data or "")) is not None:
            await self._on_action(update, action)
            return
        parsed = parse_decision(query.data or "")
        if parsed is None:
            self._reply(update, query.answer(STALE_BUTTON))
            return
        message = query.message
        chat_id = str(message.chat.id) if message is not None else ""
        press = Press(self.name, chat_id, str(query.from_user.id), parsed[0], parsed[1])
        try:
            decision = await self._engine_().handle_press(press)
        except Exception:
            failed = query.answer("Something went wrong; please try again.", show_alert=True)
            self._reply(update, failed)
            raise
        self._reply(update, query.answer(decision.message[:200], show_alert=not decision.accepted))

    async def _on_action(self, update: Update, action: str) -> None:
        """A press on a command reply's button: the engine says what the message shows now."""
        query = update.callback_query
        assert query is not None
        message = query.message
        if message is None:
            self._reply(update, query.answer(STALE_BUTTON))
            return
        chat_id = str(message.chat.id)
        private = message.chat.type == ChatType.PRIVATE
        pressed = Action(self.name, chat_id, str(query.from_user.id), action, private)
        reply = await self._engine_().handle_action(pressed)
        self._reply(update, query.answer())
        edit = self._outbox.edit_menu(chat_id, str(message.message_id), reply.text, _menu(reply))
        self._reply(update, edit)

    def _reply(self, update: Update, reply: Coroutine[Any, Any, Any]) -> None:
        """Send `reply` in a task of the Application (its errors go to the error handler;
        ``Application.stop`` awaits it), so that polling does not wait for Telegram."""
        self._app.create_task(reply, update=update, name="telegram-reply")

    async def _process(self, update: Update) -> None:
        """PTB's dispatch; an update the store could not record fails, so it is not confirmed
        (PTB hands handler errors to ``_on_error`` instead of raising them)."""
        await self._app.process_update(update)
        unrecorded = self._unrecorded.pop(update.update_id, None)
        if unrecorded is not None:
            raise unrecorded

    async def _on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        uid = update.update_id if isinstance(update, Update) else None
        if isinstance(context.error, StoreUnavailable):
            if uid is not None:  # a handler's: _process raises it
                self._unrecorded[uid] = context.error
            return  # _process's own (in a webhook's task): the webhook answers 500
        log.error("Telegram update %s failed", uid, exc_info=context.error)

    def _listens(self, chat_id: str) -> bool:
        return self._engine is not None and self._engine.listens(self.name, chat_id)

    async def is_chat_admin(self, chat_id: str, user_id: str) -> bool:
        """getChatMember: the group's creator and its administrators."""
        member = await self._app.bot.get_chat_member(int(chat_id), int(user_id))
        return member.status in (ChatMemberStatus.OWNER, ChatMemberStatus.ADMINISTRATOR)

    def _engine_(self) -> Engine:
        if self._engine is None:
            raise RuntimeError("TelegramChannel.start() was not called")
        return self._engine

    # -- outbound ------------------------------------------------------------------------------

    async def send(
        self, chat_id: str, text: str, *, reply_to: str | None = None, formatted: bool = True
    ) -> MessageRef:
        return await self._outbox.shown.send(chat_id, text, reply_to=reply_to, formatted=formatted)

    async def edit(self, ref: MessageRef, text: str, *, formatted: bool = True) -> None:
        """Text past 4096 characters continues in follow-up messages, kept up to date by later
        edits of `ref`; unchanged parts are not sent again."""
        await self._outbox.shown.edit(ref, text, formatted=formatted)

    async def typing(self, chat_id: str) -> None:
        await self._outbox.typing(chat_id)

    async def show_confirmation(self, prompt: ConfirmationPrompt) -> MessageRef:
        """One message with the buttons: the summary, the action as a code block and who may
        answer until when; when the action does not fit, it goes with the buttons as a file."""
        buttons = InlineKeyboardMarkup(
            [
                [
                    InlineKeyboardButton(c.label, callback_data=encode_decision(prompt.id, c))
                    for c in prompt.choices
                ]
            ]
        )
        footer = who_and_when(prompt.user_name, in_words(prompt.expires_at - time.time()))

        def render(summary: str, details: str | None, attached: bool) -> str:
            lines = [escape(summary)]
            if details is not None:
                lines.append(f"<pre>{escape(details)}</pre>")
            if attached:
                lines.append(f"<b>{escape(ATTACHED_NOTE)}</b>")
            lines.append(f"<i>{escape(footer)}</i>")
            return "\n\n".join(lines)

        message = lay_out(
            prompt, render, visible_len, limit=TELEGRAM_LIMIT, attached_limit=CAPTION_LIMIT
        )
        return await self._outbox.send_prompt(
            prompt.chat_id, message, reply_to=prompt.reply_to, markup=buttons
        )

    async def resolve_confirmation(self, ref: MessageRef, text: str) -> None:
        await self._outbox.close_buttons(ref, text)

    async def send_files(
        self, chat_id: str, files: Sequence[OutgoingFile], *, reply_to: str | None = None
    ) -> MessageRef:
        """Pictures with sendPhoto, other files with sendDocument, one message each, in order."""
        message_id = ""
        for file in files:
            message_id = await self._outbox.send_file(chat_id, file, reply_to)
        return MessageRef(chat_id, message_id)

    async def download(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        await self._outbox.wait_open()  # at start-up the bot may still be connecting
        return await download(self._app.bot, attachment, max_bytes)


def _menu(reply: Reply) -> InlineKeyboardMarkup:
    """A command reply's buttons, one per row (an empty keyboard removes them)."""
    return InlineKeyboardMarkup(
        [
            [InlineKeyboardButton(b.label, callback_data=encode_action(b.action))]
            for b in reply.buttons
        ]
    )


def _rate_limiter() -> AIORateLimiter:
    # No proactive throttle (PTB's defaults cap the whole bot at 30 messages/s and a group at
    # 20/min, edits included): Telegram's 429 answers are the authority, and every request
    # waits out their retry_after.
    return AIORateLimiter(overall_max_rate=0, group_max_rate=0, max_retries=5)


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the Telegram channel failed", exc_info=task.exception())
