"""Restart recovery: finish what a crash or a restart left unfinished.

Nothing is lost or done twice: an unanswered message gets its answer, a confirmation that
expired meanwhile is closed, an approved action that may have run is reported (never re-run),
a background job is resumed if it can be, else reported once.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine._jobs import Job
from engine._loop import ConversationKey
from engine._store import ConfirmationRow, JobRow, Store
from tools import ToolContext
from tools._base import Send

if TYPE_CHECKING:
    from engine._dispatcher import Dispatcher

log = logging.getLogger(__name__)

RESTARTED = "interrupted: the daemon restarted before this call finished."
APPROVED_INTERRUPTED = (
    "interrupted: the daemon restarted after the user approved this action; it may or may not "
    "have run. Do not retry it without asking the user again."
)


@dataclass(frozen=True, slots=True)
class Leftovers:
    """What the store says was unfinished when the daemon (re)started."""

    pending: list[ConfirmationRow]
    approved: list[tuple[ConfirmationRow, str]]
    running: list[tuple[JobRow, str]]
    done: list[JobRow]
    unfinished: list[tuple[str, str, bool]]

    @classmethod
    async def take_stock(cls, store: Store) -> Leftovers:
        return cls(
            await store.confirmations("pending"),
            [(c, s) for s in ("approved", "executing") for c in await store.confirmations(s)],
            [(j, s) for s in ("running", "resumed") for j in await store.jobs(s)],
            await store.jobs("done"),
            await store.unfinished_chats(),
        )


async def recover(d: Dispatcher, left: Leftovers) -> None:
    """Close what was left pending, report what was cut off, re-run unanswered turns."""
    store = d.store
    for conf in left.pending:
        if conf.expires_at <= time.time() and conf.channel in d.channels:
            await d._expire(conf)
    for conf, state in left.approved:
        if conf.channel not in d.channels:
            continue
        await store.transition(conf.id, state, "interrupted")
        await store.close_dangling(conf.conversation_id, APPROVED_INTERRUPTED)
        # Sends are spawned: a platform that is down at start-up must not hold up the start.
        d._spawn(d._resolve(conf, f"⚠️ Interrupted by a restart: {conf.summary}"), "r")
        text = (
            f"⚠️ I was restarted while running “{conf.summary}”. It may or may not have "
            "completed; ask me again if it is still needed."
        )
        d._spawn(d._send(conf.channel, conf.chat_id, text, conf.reply_to), "notice")
    for job, state in left.running:
        await _recover_job(d, job, state)
    for job in left.done:
        d._wake(ConversationKey(job.channel, job.chat_id), ("job", job.id))
    for channel, chat_id, taken in left.unfinished:
        if channel not in d.channels:
            continue
        key = ConversationKey(channel, chat_id)
        conv = await store.conversation(channel, chat_id)
        await store.close_dangling(conv.id, RESTARTED)
        if taken:
            rows = await store.inbox("taken", channel, chat_id)
            log.warning("re-running the interrupted turn in %s", key)
            d._wake(key, ("recover", rows))
        d._wake(key, ("inbound", None))


async def _recover_job(d: Dispatcher, job: JobRow, state: str) -> None:
    key = ConversationKey(job.channel, job.chat_id)
    if job.channel not in d.channels:
        return
    tool = d.registry.get(job.tool)
    if job.resumable and tool is not None:
        await d.store.set_job_state(job.id, "resumed", state)
        ctx = ToolContext(job.channel, job.chat_id, job.user_id, _sender(d, key), job.id)
        job_ = Job(job.id, key, job.user_id, job.tool, job.args)
        await d.jobs.start(job_, ctx, new=False)
        return
    if await d.store.set_job_state(job.id, "interrupted", state):
        conv = await d.store.conversation(job.channel, job.chat_id)
        await d._inject(conv, job.id, f"Background job {job.id} ({job.tool}) {RESTARTED}")
        text = (
            f"⚠️ The background task {job.tool} was interrupted by a restart and did not "
            "finish. Ask me again if you still need it."
        )
        d._spawn(d._send(job.channel, job.chat_id, text, None), "notice")


def _sender(d: Dispatcher, key: ConversationKey) -> Send:
    async def send(text: str) -> None:
        await d._send(key.channel, key.chat_id, text, None)

    return send
