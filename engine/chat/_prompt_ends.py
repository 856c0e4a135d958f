"""How a confirmation prompt ends: its text replaced by what happened ("✅ Done: …", "⌛ Expired:
…"), in the requester's language (chat/_languages.py), once the channels run.

The edit goes out off the caller's path (:meth:`PromptEnds.end`) or awaited
(:meth:`PromptEnds.resolve`); a failure to edit is logged, never raised: the decision stands.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from engine._channel import Channel, MessageRef
from engine.chat._languages import Languages
from engine.i18n import N_, translator
from engine.loop import ConversationKey, PendingCall
from engine.store import ConfirmationRow, ConfirmationStore
from engine.work import Tasks

log = logging.getLogger("engine.chat._confirmations")

RESTARTED_WHILE = N_(
    "⚠️ I was restarted while running “{summary}”; it may have completed partly or fully. Ask "
    "me to check, or to run it again, if you still need it."
)


class PromptEnds:
    def __init__(
        self,
        rows: ConfirmationStore,
        channels: Mapping[str, Channel],
        tasks: Tasks,
        languages: Languages | None = None,
    ) -> None:
        self.rows = rows
        self.channels = channels
        self.tasks = tasks
        self.languages = languages or Languages(lambda: "en", lambda key: None)
        self.ready = asyncio.Event()  # set once the channels run: prompts can be edited

    def summary(self, pending: PendingCall, key: ConversationKey) -> str:
        """What a prompt about to be asked says; one that follows untrusted content says what
        came before it (engine/loop/_containment.py): the requester judges it knowing that."""
        if not pending.after:
            return pending.summary
        _ = translator(self.languages.of(key, pending.user_id)).gettext
        after = _("{summary} (asked after reading {sources})")
        return after.format(summary=pending.summary, sources=", ".join(pending.after))

    def language(self, conf: ConfirmationRow) -> str:
        """The prompt's language: its requester's."""
        return self.languages.of(ConversationKey(conf.channel, conf.chat_id), conf.user_id)

    def text(self, conf: ConfirmationRow, mark: str) -> str:
        """`mark` (a message marked with N_, with a {summary}) in the prompt's language."""
        return translator(self.language(conf)).gettext(mark).format(summary=conf.summary)

    def end(self, conf: ConfirmationRow, mark: str) -> None:
        """Show on the prompt how it ended (`mark`, see :meth:`text`), off this path."""
        self.tasks.spawn(self.resolve(conf, self.text(conf, mark)), "resolve")

    async def resolve(self, conf: ConfirmationRow, text: str) -> None:
        await self.ready.wait()
        channel = self.channels.get(conf.channel)
        ref = conf.message_ref
        if ref is None:  # the row was read before its prompt was shown: read it again
            fresh = await self.rows.get(conf.id)
            ref = fresh.message_ref if fresh else None
        if channel is None or ref is None:
            return
        try:
            await channel.resolve_confirmation(MessageRef(conf.chat_id, ref), text)
        except Exception as exc:
            log.warning("could not update confirmation %s: %s", conf.id, exc)
