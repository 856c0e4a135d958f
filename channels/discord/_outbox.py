"""What the bot shows in Discord: sends and edits over REST, confirmation prompts with their
buttons, and files.

Long and growing texts are kept up to date part by part by ``_shown.ShownMessages``, on the
Discord surface defined here (render, send, edit and delete one part). An answer written after
untrusted content goes with its embeds suppressed (the SUPPRESS_EMBEDS flag: Discord fetches no
preview of its links) and its links to hosts trusted text did not name as inline code
(``channels/_links.py``). A confirmation prompt is
one message with the buttons, the action attached as a file when it does not fit (the layout is
the shared ``channels._prompt``). Sending needs no gateway connection: every instance sends.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import discord

from channels._links import as_code, unlinked
from channels._prompt import ATTACHMENT_NAME, attached_note, lay_out, who_and_when
from channels._shown import ShownMessages
from channels._split import split_text
from channels.discord._buttons import DecisionButton, menu
from channels.discord._media import batches
from channels.discord._threads import GONE_NOTE, Threads, gone
from engine import ConfirmationPrompt, MessageRef, OutgoingFile, Reply, Untrusted

log = logging.getLogger("channels.discord")

LIMIT = 2000
_EDIT_MEMORY = 256  # messages whose last text (and overflow parts) we remember for edits
_QUIET = discord.MessageFlags(suppress_embeds=True)


@dataclass(frozen=True, slots=True)
class Part:
    """One message's content; `quiet`: sent and edited with its embeds suppressed."""

    text: str
    quiet: bool = False


class Outbox:
    """Sends and edits through the client `client()` gives (None: the channel is not running)."""

    def __init__(self, client: Callable[[], discord.Client | None], threads: Threads) -> None:
        self._client = client
        self._threads = threads
        self.shown = ShownMessages[Part](self, _EDIT_MEMORY)

    async def typing(self, chat_id: str) -> None:
        await self._messageable(chat_id).typing()  # one-shot: POST /channels/{id}/typing

    async def show_confirmation(self, prompt: ConfirmationPrompt) -> MessageRef:
        """One message with the buttons: the summary, the action as a code block and who may
        answer until when; when the action does not fit, it goes with the buttons as a file."""
        who = discord.utils.escape_markdown(prompt.user_name)
        footer = "-# " + who_and_when(who, f"<t:{int(prompt.expires_at)}:R>", prompt.language)

        def render(summary: str, details: str | None, attached: bool) -> str:
            lines = [discord.utils.escape_markdown(summary)]
            if details is not None:  # a fence inside the action cannot close the block
                lines.append("```\n" + details.replace("```", "``\u200b`") + "\n```")
            if attached:
                lines.append(f"**{attached_note(prompt.language)}**")
            return "\n".join([*lines, footer])

        message = lay_out(prompt, render, len, limit=LIMIT, attached_limit=LIMIT)
        view = discord.ui.View(timeout=None)
        for choice in prompt.choices:
            view.add_item(DecisionButton(prompt.id, choice, prompt.language))
        attached: dict[str, Any] = {}
        if message.attachment is not None:
            attached["file"] = discord.File(io.BytesIO(message.attachment), ATTACHMENT_NAME)
        sent = await self._send(
            prompt.chat_id,
            message.text,
            view=view,
            reference=_reference(prompt.chat_id, prompt.reply_to),
            nonce=nonce(prompt.chat_id, f"prompt:{prompt.id}", message.text),  # shown once
            **attached,
        )
        return MessageRef(prompt.chat_id, str(sent.id))

    async def resolve_confirmation(self, ref: MessageRef, text: str) -> None:
        """The final text in place of the prompt's, the buttons removed; an attached action
        stays, as the record of what was answered."""
        message = self._message(ref.chat_id, ref.message_id)
        await message.edit(content=self.render(text, True)[0].text, view=None)

    async def send_private(self, user_id: str, reply: Reply) -> MessageRef:
        """Open (or find) the DM channel with the user, and send `reply` with its buttons."""
        client = self._client()
        if client is None:
            raise RuntimeError("the Discord channel is not running")
        dm = await client.create_dm(discord.Object(int(user_id)))
        view = menu(reply)
        text = self.render(reply.text, True)[0].text
        sent = await (dm.send(text, view=view) if view is not None else dm.send(text))
        return MessageRef(str(dm.id), str(sent.id))

    async def send_files(
        self, chat_id: str, files: Sequence[OutgoingFile], *, reply_to: str | None = None
    ) -> MessageRef:
        """Uploads, up to ten files to a message, in order."""
        sent_id = ""
        for batch in batches(files):
            reference = _reference(chat_id, reply_to)
            sent = await self._send(chat_id, files=batch, reference=reference)
            sent_id = str(sent.id)
        return MessageRef(chat_id, sent_id)

    # the Surface that ShownMessages works on

    def render(
        self, text: str, formatted: bool, *, untrusted: Untrusted | None = None
    ) -> list[Part]:
        """``text`` as Discord message contents: Markdown passes through, plain text is escaped;
        with `untrusted`, links it does not allow become code and embeds are suppressed."""
        if not formatted:
            text = discord.utils.escape_markdown(text)
        if untrusted is not None:
            text = unlinked(text, untrusted, as_code)
        quiet = untrusted is not None
        return [Part(t, quiet) for t in split_text(text, LIMIT)] or [Part("…", quiet)]

    async def send_part(
        self, chat_id: str, part: Part, reply_to: str | None, *, once: str | None = None
    ) -> str:
        key = None if once is None else nonce(chat_id, once, part.text)  # None: a random one
        sent = await self._send(
            chat_id,
            part.text,
            reference=_reference(chat_id, reply_to),
            nonce=key,
            suppress_embeds=part.quiet,
        )
        return str(sent.id)

    async def edit_part(self, chat_id: str, message_id: str, part: Part) -> None:
        message = self._message(chat_id, message_id)
        if not part.quiet:
            await message.edit(content=part.text)
            return
        # A partial message's edit cannot set flags: the same PATCH, with SUPPRESS_EMBEDS.
        params = discord.http.handle_message_parameters(content=part.text, flags=_QUIET)
        client = self._client()
        if client is None:
            raise RuntimeError("the Discord channel is not running")
        with params:
            await client.http.edit_message(message.channel.id, message.id, params=params)

    # components v2 (``_answers``): a message whose content is its view

    async def send_view(
        self, chat_id: str, view: discord.ui.LayoutView, reply_to: str | None, key: str | None
    ) -> str:
        reference = _reference(chat_id, reply_to)
        sent = await self._send(chat_id, view=view, reference=reference, nonce=key)
        return str(sent.id)

    async def edit_view(self, chat_id: str, message_id: str, view: discord.ui.LayoutView) -> None:
        """The message shows `view` alone: content cleared, as components v2 requires."""
        await self._message(chat_id, message_id).edit(content=None, view=view)

    async def delete_part(self, chat_id: str, message_id: str) -> None:
        with contextlib.suppress(discord.NotFound):  # already gone
            await self._message(chat_id, message_id).delete()

    async def _send(self, chat_id: str, *args: Any, **kwargs: Any) -> discord.Message:
        """Post to `chat_id`; when it is a thread that was locked or deleted meanwhile, to the
        thread's channel, which is told why first (once; see ``_threads``)."""
        try:
            return await self._messageable(chat_id).send(*args, **kwargs)
        except discord.HTTPException as exc:
            if not gone(exc) or (parent := await self._threads.parent_of(chat_id)) is None:
                raise
        log.warning("discord: thread %s is closed or deleted; answering in its channel", chat_id)
        channel = self._messageable(str(parent))
        kwargs.pop("reference", None)  # the message replied to is in the thread
        if self._threads.first_move(chat_id):
            await channel.send(GONE_NOTE)
        sent = await channel.send(*args, **kwargs)
        self._threads.note_moved(str(sent.id), parent)
        return sent

    def _message(self, chat_id: str, message_id: str) -> discord.PartialMessage:
        """A message the bot sent for `chat_id`, in the channel it really is in."""
        where = self._threads.moved_to(chat_id, message_id)
        return self._messageable(where).get_partial_message(int(message_id))

    def _messageable(self, chat_id: str) -> discord.PartialMessageable:
        client = self._client()
        if client is None:
            raise RuntimeError("the Discord channel is not running")
        return client.get_partial_messageable(int(chat_id))


def nonce(chat_id: str, once: str, content: str) -> str:
    """The message nonce of the delivery named `once` of `content` in `chat_id`: 24 hex
    characters (Discord takes 25 at most). discord.py sends it with ``enforce_nonce``, so Discord
    creates the message once: a second create with the same nonce within a few minutes returns
    the first message, which closes the window between Discord taking an answer and the store
    recording it. Chat and content are in the digest, so a new store that numbers its answers
    from 1 again cannot be handed back an older store's message (but an identical one)."""
    digest = hashlib.blake2b(f"{chat_id}\n{once}\n{content}".encode(), digest_size=12)
    return digest.hexdigest()


def _reference(chat_id: str, message_id: str | None) -> discord.MessageReference | None:
    if not message_id:
        return None
    return discord.MessageReference(
        message_id=int(message_id), channel_id=int(chat_id), fail_if_not_exists=False
    )
