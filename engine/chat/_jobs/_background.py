"""Background jobs as the store knows them: recorded before they start, their result stored once,
then put into their conversation and told to the user (a :class:`JobDone` item in the chat's
queue), and after a restart resumed (when the tool says it can be) or reported as interrupted.

A result enters the history as an assistant tool call and its tool result, never as a user or
system message: it is data the model reads, not an instruction.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection

from engine.loop import ConversationKey, Job, JobRunner, result_source
from engine.models import TRUSTED, Message, ToolCall, untrusted
from engine.store import Conversation, JobRow, JobState, Store
from engine.work import ChatQueues, JobDone, Notice
from tools import ToolContext, ToolResult
from tools.registry import Send, ToolRegistry

log = logging.getLogger(__name__)

RESTARTED = "interrupted: the daemon restarted before this job finished."
SendFor = Callable[[ConversationKey], Send]


class Background:
    def __init__(
        self, store: Store, registry: ToolRegistry, queues: ChatQueues, send_for: SendFor
    ) -> None:
        self.store = store
        self.registry = registry
        self.queues = queues
        self.send_for = send_for
        self.runner = JobRunner(
            registry, on_done=self._done, on_start=self._started, on_keep=self._keep
        )

    def use(self, registry: ToolRegistry) -> None:
        """The tools in force (a reload's): jobs recovered or recorded from now on use them."""
        self.registry = self.runner.registry = registry

    async def _started(self, job: Job) -> None:
        conv = await self.store.conversations.active(job.key.channel, job.key.chat_id)
        tool = self.registry.get(job.tool)
        resumable = bool(tool and tool.resumable)
        await self.store.jobs.add(
            conv, job.id, job.user_id, job.tool, job.args, resumable=resumable
        )

    async def _keep(self, job: Job, resume: str) -> None:
        await self.store.jobs.set_resume(job.id, resume)

    async def _done(self, job: Job, result: ToolResult) -> None:
        jobs = self.store.jobs
        if await jobs.get(job.id) is None:  # an AsyncTool's own callback: recorded now
            conv = await self.store.conversations.active(job.key.channel, job.key.chat_id)
            await jobs.add(conv, job.id, job.user_id, job.tool, {}, resumable=False)
        for_user = result.for_user if result.for_user and not result.silent else None
        done = await jobs.finish(
            job.id, result.for_llm, for_user, result.is_error, untrusted=result.untrusted
        )
        if done:
            self.queues.put(job.key, JobDone(job.id))
        else:
            log.info("duplicate result for job %s ignored", job.id)

    async def follow_up(self, job_id: str) -> tuple[JobRow, Conversation] | None:
        """Put a finished job's result into its conversation, once; None if done before."""
        job = await self.store.jobs.get(job_id)
        if job is None or job.state is not JobState.DONE:
            return None
        conv = await self.store.conversations.active(job.channel, job.chat_id)
        outcome = "failed" if job.is_error else "finished"
        async with self.store.transaction():
            await self._inject(
                conv, job, f"Background job {job.id} ({job.tool}) {outcome}: {job.result}"
            )
            await self.store.jobs.transition(job.id, JobState.DONE, JobState.DELIVERED)
        return job, conv

    async def _inject(self, conv: Conversation, job: JobRow, text: str) -> None:
        call = ToolCall(f"job_{job.id}", "background_job_result", json.dumps({"job_id": job.id}))
        await self.store.conversations.append(conv.id, Message.assistant(None, [call]))
        # containment: what the tool said of its result, else what relaybot knows of the tool
        source = job.untrusted or (None if job.is_error else result_source(job.tool, job.args))
        tool = self.registry.get(job.tool)
        if tool is not None and tool.mcp_server is not None:  # an MCP task's words, even failed
            source = f"MCP server {tool.mcp_server}"
        found = TRUSTED if source is None else untrusted(source)
        result = Message.tool_result(call.id, text, is_error=job.is_error, provenance=found)
        await self.store.conversations.append(conv.id, result)

    async def recover(
        self,
        chats: Collection[ConversationKey] | None = None,
        jobs: Collection[str] | None = None,
    ) -> None:
        """Queue the follow-ups a restart held up (in `chats`, else everywhere); resume or
        report the jobs it cut off (those of `jobs`, else every one left running)."""
        for job in await self.store.jobs.in_state(JobState.DONE):
            key = ConversationKey(job.channel, job.chat_id)
            if chats is None or key in chats:
                self.queues.put(key, JobDone(job.id))
        for state in (JobState.RUNNING, JobState.RESUMED):
            for job in await self.store.jobs.in_state(state):
                if jobs is None or job.id in jobs:
                    await self._recover(job)

    async def _recover(self, job: JobRow) -> None:
        key = ConversationKey(job.channel, job.chat_id)
        tool = self.registry.get(job.tool)
        if job.resumable and tool is not None:
            await self.store.jobs.transition(job.id, job.state, JobState.RESUMED)
            ctx = ToolContext(
                job.channel,
                job.chat_id,
                job.user_id,
                self.send_for(key),
                job.id,
                is_private=job.is_private,
            )
            await self.runner.start(
                Job(job.id, key, job.user_id, job.tool, job.args),
                ctx,
                new=False,
                resume=job.resume,
            )
            return
        async with self.store.transaction():
            if not await self.store.jobs.transition(job.id, job.state, JobState.INTERRUPTED):
                return
            conv = await self.store.conversations.active(job.channel, job.chat_id)
            await self._inject(conv, job, f"Background job {job.id} ({job.tool}) {RESTARTED}")
        text = (
            f"⚠️ The background task {job.tool} was interrupted by a restart and did not "
            "finish. Ask me again if you still need it."
        )
        self.queues.put(key, Notice(text))

    async def aclose(self) -> None:
        await self.runner.aclose()
