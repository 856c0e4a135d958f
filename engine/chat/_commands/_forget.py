"""/forget_me: a user deletes everything relaybot stored about them, after saying yes.

The command answers with what would go (counted by a dry run of the store's forget, which
engine/store/_sqlite_forget.py describes) and two buttons. A press counts only from the user it
names: the platform says who pressed, the button's payload whom it is for. "Delete everything"
forgets them in one transaction; then what the daemon holds in memory goes too (`forgotten`: their
background jobs and reminders still running are cancelled and the settings of their private chats
dropped, on every instance sharing the store); the reply says what was deleted. The rows the
store keeps in memory (summaries, history, memory) are its own to drop
(engine/store/_operate/_ops.py).
`relaybot forget --user ID` does the same from the command line, also while the daemon runs:
the store tells the daemon (`on_forgot`), which stops the jobs whose rows went and reads the
chats' settings again (`_settle`), within about a second.
"""

from __future__ import annotations

import logging

from engine._channel import Action, Button, InboundMessage, Reply
from engine.chat._settings._chat import ChatSettings
from engine.i18n import translator
from engine.loop import JobRunner
from engine.store import Forgotten, Store
from engine.work import Cluster, Tasks

log = logging.getLogger(__name__)

_YES = "forget:yes:"
_NO = "forget:no:"
_MAX_PAYLOAD = 61  # engine._channel.ACTION_PATTERN


class ForgetMe:
    """/forget_me's question and buttons, and letting go of what the daemon keeps in memory
    about what was deleted (here, and on the other instances sharing the store)."""

    def __init__(
        self,
        store: Store,
        jobs: JobRunner,
        chat_settings: ChatSettings,
        cluster: Cluster | None,
        tasks: Tasks,
    ) -> None:
        self.store = store
        self.jobs = jobs
        self.chat_settings = chat_settings
        self.cluster = cluster
        store.ops.on_forgot(lambda: tasks.spawn(self._settle(), "forgotten"))

    async def forgotten(self, done: Forgotten) -> None:
        """A user was forgotten here: stop their jobs, let go of their private chats'
        settings; tell the other instances to do the same."""
        await self.jobs.cancel(done.job_ids)
        self.chat_settings.drop(done.private_chats)
        if self.cluster is not None:
            await self.cluster.forgot(done.job_ids)

    async def forgotten_elsewhere(self, job_ids: list[str]) -> None:
        await self.jobs.cancel(job_ids)
        await self.chat_settings.load()  # what is no longer stored goes

    async def _settle(self) -> None:
        """A user was forgotten, here or by another process (which may not know our jobs):
        the jobs running here whose rows are gone stop, the chats' settings are read again."""
        gone = [j for j in self.jobs.running if await self.store.jobs.get(j) is None]
        await self.jobs.cancel(gone)
        await self.chat_settings.load()

    async def ask(self, msg: InboundMessage) -> Reply:
        _ = translator(msg.language).gettext
        found = await self.store.ops.forget_user(msg.channel, msg.user_id, dry_run=True)
        if found.described() == "nothing":
            return Reply(_("I have nothing stored about you."))
        text = _(
            "This deletes everything I have stored about you here on {platform}: {what}. Your "
            "private chats with me go whole; in groups, your messages and my answers to them. It "
            "cannot be undone."
        ).format(platform=msg.channel, what=found.described())
        if len(_YES) + len(msg.user_id) > _MAX_PAYLOAD:
            run = _("Ask the bot's owner to run: {command}").format(
                command=f"relaybot forget --user {msg.channel}:{msg.user_id}"
            )
            return Reply(f"{text}\n{run}")
        buttons = (
            Button(_("Delete everything"), f"{_YES}{msg.user_id}"),
            Button(_("Keep it"), f"{_NO}{msg.user_id}"),
        )
        return Reply(f"{text} " + _("Delete it?"), buttons)

    async def act(self, action: Action) -> Reply | None:
        """A press on /forget_me's buttons; None when the action is not one of ours."""
        if action.action.startswith(_YES):
            whom, forget = action.action.removeprefix(_YES), True
        elif action.action.startswith(_NO):
            whom, forget = action.action.removeprefix(_NO), False
        else:
            return None
        _ = translator(action.language).gettext
        if whom != action.user_id:
            return Reply(
                _(
                    "Only the person who sent /forget_me can answer it. To delete what I have "
                    "stored about you, send /forget_me yourself."
                )
            )
        if not forget:
            return Reply(_("Kept: nothing was deleted."))
        done = await self.store.ops.forget_user(action.channel, whom)
        await self.forgotten(done)
        log.info("forgot %s user %s: %s", action.channel, whom, done.described())
        deleted = _("Done: I deleted {what}. Nothing about you is stored any more.")
        return Reply(deleted.format(what=done.described()))
