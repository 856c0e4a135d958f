# Left whole: TelegramChannel's lifecycle, one class; its other parts are the modules it hands work
# to.
"""Telegram: python-telegram-bot's Application, long polling or a webhook, HTML replies and
inline buttons. :class:`TelegramChannel` is what the engine sees: its lifecycle here, the rest
in the modules it hands each idea to.

Updates are handed to the engine by ``_handlers``; the files a message carries travel as
references, fetched when the engine asks (``_media``). Our own long polling (``_polling.Poller``,
in place of PTB's Updater) runs a batch concurrently across chats and in arrival order within a
chat, and confirms it to Telegram only once every update of it has been handed over: a crash
loses no message. The engine answers through send / edit / typing / confirmations (``_outbox``,
with ``_shown`` keeping long texts up to date and ``_markup`` laying out confirmations); requests
go over aiohttp (``_http``) and Markdown becomes Telegram HTML (``_markdown``, split by
``_format``), or a rich message where the answer has structure (``_rich``, sent by
``_answers``). In webhook mode (``[telegram] mode``) ``_webhook`` receives in place of the poller.

Start-up never blocks: ``start`` spawns the channel's task, which initialises the bot with
backoff while the Bot API is unreachable or rejects the token (said once, with what to check)
and polls until ``stop``; the command menus are registered beside the first poll, not before it.
With several instances on one store, only the one holding the channel's receiving lease polls
(``set_receiving``); every one sends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from telegram.constants import ChatMemberStatus
from telegram.error import InvalidToken, TelegramError
from telegram.ext import Application

from channels._config import TelegramConfig
from channels.telegram._answers import Answers
from channels.telegram._drafts import Drafts
from channels.telegram._guests import Guests, guest_query_of, is_inline
from channels.telegram._handlers import CHANNEL, Handlers
from channels.telegram._http import AiohttpRequest, rate_limiter
from channels.telegram._markup import answer_buttons, menu, prompt_message
from channels.telegram._media import download
from channels.telegram._outbox import Outbox
from channels.telegram._polling import Poller
from channels.telegram._private import PrivateReplies, ephemeral_of
from channels.telegram._reactions import set_status
from channels.telegram._topics import place
from channels.telegram._updates import TOKEN_REJECTED
from engine import (
    Attachment,
    Backoff,
    Capabilities,
    Channel,
    ConfirmationPrompt,
    Engine,
    MessageRef,
    OutgoingFile,
    Reaction,
    Receiver,
    Reply,
    Untrusted,
)
from engine.metrics import api_retry

if TYPE_CHECKING:
    from channels.telegram._webhook import Webhook

log = logging.getLogger("channels.telegram")
_REMEMBERED = 1024  # answers whose shown parts are kept, to skip unchanged edits


class TelegramChannel(Channel):
    name = CHANNEL
    capabilities = Capabilities(
        max_message_length=4096,
        buttons=True,
        edits=True,
        markdown="telegram-html",
        edit_interval_s=1.0,
        typing_interval_s=4.0,
    )

    def __init__(
        self,
        config: TelegramConfig,
        *,
        retry_initial_s: float = 1.0,
        webhook_give_up_s: float = 600.0,
    ) -> None:
        """`retry_initial_s`: the first back-off while the Bot API is unreachable;
        `webhook_give_up_s`: how long a webhook update that keeps failing is asked for again."""
        self._config = config
        self.retry_initial_s = retry_initial_s
        self._give_up_s = webhook_give_up_s
        self._engine: Engine | None = None
        self._task: asyncio.Task[None] | None = None  # connect, then poll
        self._receive = asyncio.Event()  # polling wanted (set_receiving)
        self._receive.set()
        self._polling: asyncio.Task[None] | None = None
        self._menus: asyncio.Task[None] | None = None  # the command menus being registered
        self._app = (
            Application.builder()
            .token(config.resolve_token())
            .base_url(config.api_base_url)
            .base_file_url(config.api_file_url or "")
            .request(AiohttpRequest(256))
            .get_updates_request(AiohttpRequest(1))
            .rate_limiter(rate_limiter())
            .updater(None)  # polling is ours: see Poller
            .build()
        )
        self._outbox = Outbox(self._app.bot, self.retry_initial_s)
        self._answers = Answers(self._outbox, _REMEMBERED)
        self._drafts = Drafts(self._app.bot)
        self._private = PrivateReplies(self._outbox, config.private_replies)
        self._guests = Guests(self._app.bot)
        self._webhook_secret = config.resolve_webhook_secret()  # None: polling
        self._handlers = Handlers(
            self._app,
            self._outbox,
            self._engine_,
            self._listens,
            config.group_mode,
            self._private,
            self._guests,
        )

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
        for task in (self._task, self._menus):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self._menus = None  # registered again by a later start
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
            api_retry(self.name)
            await backoff.sleep()
        await self._app.start()
        self._outbox.open()
        receiver = self._receiver()
        while True:
            await self._receive.wait()
            self._polling = asyncio.create_task(receiver.run(), name="telegram-receive")
            if self._menus is None:  # beside the first poll, not before it: nobody waits for them
                self._menus = asyncio.create_task(
                    self._handlers.register_menus(), name="telegram-menus"
                )
                self._menus.add_done_callback(_log_failure)
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
            from channels.telegram._webhook import Webhook  # aiohttp's server: webhook mode only

            return Webhook(
                self._app,
                self._handlers.process,
                url=cfg.webhook_url,
                listen=cfg.listen_address(),
                secret=self._webhook_secret,
                retry_initial_s=self.retry_initial_s,
                give_up_s=self._give_up_s,
            )
        log.info("Telegram: polling as @%s", self._app.bot.username)
        return Poller(
            self._app.bot,
            self._handlers.process,
            timeout_s=cfg.poll_timeout_s,
            retry_initial_s=self.retry_initial_s,
        )

    def _listens(self, chat_id: str) -> bool:
        return self._engine is not None and self._engine.listens(self.name, chat_id)

    def _engine_(self) -> Engine:
        if self._engine is None:
            raise RuntimeError("TelegramChannel.start() was not called")
        return self._engine

    # -- what the engine asks ------------------------------------------------------------------

    async def is_chat_admin(self, chat_id: str, user_id: str) -> bool:
        """getChatMember: the group's creator and its administrators."""
        member = await self._app.bot.get_chat_member(
            place(chat_id)[0], int(user_id)
        )  # a topic's group
        return member.status in (ChatMemberStatus.OWNER, ChatMemberStatus.ADMINISTRATOR)

    async def send(
        self,
        chat_id: str,
        text: str,
        *,
        reply_to: str | None = None,
        formatted: bool = True,
        once: str | None = None,
        untrusted: Untrusted | None = None,
    ) -> MessageRef:
        if guest_query_of(chat_id) is not None:  # a mention where the bot is a guest
            await self._outbox.wait_open()
            return await self._guests.answer(chat_id, text, formatted)
        shown = self._answers.shown
        return await shown.send(
            chat_id, text, reply_to=reply_to, formatted=formatted, once=once, untrusted=untrusted
        )

    async def edit(
        self,
        ref: MessageRef,
        text: str,
        *,
        formatted: bool = True,
        untrusted: Untrusted | None = None,
    ) -> None:
        """Text past 4096 characters continues in follow-up messages, kept up to date by later
        edits of `ref`; unchanged parts are not sent again."""
        if is_inline(ref):  # a guest query's answer
            await self._guests.edit(ref, text, formatted)
            return
        await self._answers.shown.edit(ref, text, formatted=formatted, untrusted=untrusted)

    async def typing(self, chat_id: str) -> None:
        if guest_query_of(chat_id) is None:  # a guest may not show it
            await self._outbox.typing(chat_id)

    async def send_thoughts(
        self, chat_id: str, thoughts: str, *, reply_to: str | None = None
    ) -> MessageRef:
        """An expandable block quotation: one line shows, a tap opens the rest."""
        return await self._outbox.send_thoughts(chat_id, thoughts, reply_to)

    async def send_private(self, user_id: str, reply: Reply) -> MessageRef:
        """A user's private chat with the bot has their user id (they must have started it)."""
        return await self._outbox.send_menu(user_id, reply.text, None, menu(reply))

    async def send_personal(
        self, chat_id: str, user_id: str, text: str, *, reply_to: str | None = None
    ) -> MessageRef:
        """To `user_id` alone in a group (``_private``); where it cannot be: to the chat."""
        ref = await self._private.send(chat_id, user_id, text, reply_to=reply_to)
        return ref or await self.send(chat_id, text, reply_to=reply_to)

    async def delete(self, ref: MessageRef) -> None:
        if (ephemeral := ephemeral_of(ref)) is not None:
            await self._private.delete(ref.chat_id, *ephemeral)
            return
        await self._outbox.delete_part(ref.chat_id, ref.message_id)  # gone or too old: it stays

    async def react(self, chat_id: str, message_id: str, reaction: Reaction) -> None:
        """With ``status_reactions``: 👀, nothing, or 😱 on the message (``_reactions``)."""
        if self._config.status_reactions:
            await self._outbox.wait_open()
            await set_status(self._app.bot, chat_id, message_id, reaction)

    async def draft(self, chat_id: str, draft_id: int, text: str) -> bool:
        """sendMessageDraft in a private chat (``_drafts``); False elsewhere."""
        if not self._drafts.may(chat_id):
            return False
        await self._outbox.wait_open()
        return await self._drafts.show(chat_id, draft_id, text)

    async def show_confirmation(self, prompt: ConfirmationPrompt) -> MessageRef:
        """One message with the buttons: the summary, the action as a code block and who may
        answer until when; when the action does not fit, it goes with the buttons as a file.
        In a group with ``private_replies`` it is shown to the requester alone (``_private``)."""
        shown = prompt_message(prompt)
        if guest_query_of(prompt.chat_id) is not None:  # see _guests: no file, no buttons then
            buttons = answer_buttons(prompt) if shown.attachment is None else None
            return await self._guests.show(prompt.chat_id, shown.text, "HTML", buttons)
        if ref := await self._private.send_prompt(prompt, shown):
            return ref
        return await self._outbox.send_prompt(
            prompt.chat_id,
            shown,
            reply_to=prompt.reply_to,
            markup=answer_buttons(prompt),
        )

    async def resolve_confirmation(self, ref: MessageRef, text: str) -> None:
        if is_inline(ref):  # a guest's
            await self._guests.close_prompt(ref, text)
            return
        if ephemeral_of(ref) is not None:
            await self._private.edit(ref, text)
            return
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


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the Telegram channel failed", exc_info=task.exception())
