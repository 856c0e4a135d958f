"""What the console changes, each through the path the chat's own commands take, so it reaches
the instance that holds the chat: a confirmation is cancelled as /stop cancels one (the call
gets its result, the prompt says so, the turn that asked is stopped); a background job is
marked interrupted in the store first (a result it still produces is then never reported),
stopped here, and on the other instances through the cluster's signal that stops a forgotten
user's jobs, and its chat is told through the chat's queue (handed to the holder); a schedule
is cancelled as /schedules cancels it; a grant is revoked as /permissions revokes it; a pairing
request is answered as an owner's Allow or Deny button answers it (the stranger is told); an
approval is revoked as /users revokes it."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from engine import Action
from engine.loop import ConversationKey
from engine.store import ConfirmationState, JobState
from engine.work import Notice

if TYPE_CHECKING:
    from bot._daemon import Daemon

log = logging.getLogger("bot.web")

CANCELLED = "cancelled by the bot's owner in the web console."


async def cancel_confirmation(daemon: Daemon, confirmation_id: str, by: str) -> str:
    row = await daemon.store.confirmations.get(confirmation_id)
    if row is None or row.state is not ConfirmationState.PENDING:
        return "That confirmation is no longer waiting: nothing to cancel."
    key = ConversationKey(row.channel, row.chat_id)
    n = await daemon.dispatcher.confirmations.cancel_pending(key, CANCELLED)
    if n:  # its turn is stopped: no later request carries what it asked
        await daemon.dispatcher.commands.stop_asked(key)
    log.info("console: %s cancelled the confirmations waiting in %s (%d)", by, key, n)
    return f"Cancelled: {row.summary}" if n else "It was answered meanwhile: nothing cancelled."


async def cancel_job(daemon: Daemon, job_id: str, by: str) -> str:
    job = await daemon.store.jobs.get(job_id)
    if job is None or job.state not in (JobState.RUNNING, JobState.RESUMED):
        return "That job is not running any more: nothing to cancel."
    if not await daemon.store.jobs.transition(job.id, job.state, JobState.INTERRUPTED):
        return "That job finished meanwhile: nothing to cancel."
    dispatcher = daemon.dispatcher
    await dispatcher.background.runner.cancel([job.id])
    if dispatcher.cluster is not None:
        await dispatcher.cluster.forgot([job.id])  # every instance stops it, wherever it runs
    key = ConversationKey(job.channel, job.chat_id)
    dispatcher.queues.put(key, Notice(f"The bot's owner cancelled the background task {job.tool}."))
    log.info("console: %s cancelled job %s (%s) in %s", by, job.id, job.tool, key)
    return f"Cancelled the background task {job.tool} in {job.channel}:{job.chat_id}."


async def cancel_schedule(daemon: Daemon, schedule_id: int, by: str) -> str:
    row = await daemon.store.schedules.get(schedule_id)
    if row is None:
        return "There is no such schedule."
    done = await daemon.store.schedules.cancel_schedule(row.channel, row.chat_id, row.id)
    log.info("console: %s cancelled schedule #%d in %s:%s", by, row.id, row.channel, row.chat_id)
    return f"Cancelled schedule #{row.id}." if done else "It was cancelled already."


async def revoke_grant(daemon: Daemon, channel: str, chat_id: str, tool: str, by: str) -> str:
    n = await daemon.store.grants.revoke(channel, chat_id, tool)
    log.info("console: %s revoked %s in %s:%s (%d removed)", by, tool, channel, chat_id, n)
    if not n:
        return "It was revoked already."
    return f"Revoked: the bot asks before {tool} again in {channel}:{chat_id}."


async def revoke_user(daemon: Daemon, channel: str, user_id: str, by: str) -> str:
    return await daemon.dispatcher.pairing.revoke(channel, user_id, f"{by} (web console)")


async def answer_request(daemon: Daemon, code: str, allow: bool, by: str) -> str:
    """An owner's Allow or Deny, as the button in their chat gives it (`by` an owner)."""
    channel, _, user_id = by.partition(":")
    verb = "ok" if allow else "no"
    reply = await daemon.dispatcher.pairing.act(
        Action(channel, user_id, user_id, f"pair:{verb}:{code}")
    )
    return reply.text if reply is not None else "That request is unknown."
