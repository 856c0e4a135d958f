"""Background jobs: tools that report back later, as a follow-up in their conversation.

The runner only runs them (a task each) and hands each result to `on_done` exactly once; what is
stored about a job, and how its result reaches the chat, is engine/chat/_jobs/_background.py's
business.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from engine.loop._types import ConversationKey
from tools import BackgroundJob, ToolContext, ToolResult
from tools.registry import ToolRegistry

log = logging.getLogger(__name__)

_NO_LIMIT_S = 10 * 365 * 24 * 3600.0


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    key: ConversationKey
    user_id: str
    tool: str
    args: dict[str, Any]


OnStart = Callable[[Job], Awaitable[None]]
OnDone = Callable[[Job, ToolResult], Awaitable[None]]
OnKeep = Callable[[Job, str], Awaitable[None]]


async def _nobody_listens(job: Job, result: ToolResult) -> None:
    log.info("background job %s in %s finished; no one is listening", job.id, job.key)


async def _nothing(job: Job) -> None:
    return None


async def _kept_nowhere(job: Job, resume: str) -> None:
    return None


class JobRunner:
    """Runs background jobs as tasks; `on_start` is awaited before a new job's task exists
    (so it can be recorded first), `on_done` receives each result once. `aclose` cancels what
    is still running and waits for it (a job it stops so is resumed after a restart);
    `cancel` stops jobs on purpose (each job's tool sees `ToolContext.job.stopped()`).
    `on_keep` stores where a job's tool says it is (its `ToolContext.job.keep`)."""

    def __init__(
        self,
        registry: ToolRegistry,
        on_done: OnDone = _nobody_listens,
        on_start: OnStart = _nothing,
        on_keep: OnKeep = _kept_nowhere,
    ) -> None:
        self.registry = registry
        self.on_done = on_done
        self.on_start = on_start
        self.on_keep = on_keep
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._stopped: set[str] = set()  # jobs cancelled on purpose, while they stop

    @property
    def running(self) -> list[str]:
        return list(self._tasks)

    async def start(
        self,
        job: Job,
        context: ToolContext,
        *,
        new: bool = True,
        registry: ToolRegistry | None = None,
        resume: str | None = None,
    ) -> None:
        """Run `job` with `registry`'s tool (the turn's; else this runner's); `new=False` re-runs
        a job recorded before (after a restart), from where its tool said it was (`resume`)."""
        if new:
            await self.on_start(job)

        async def keep(text: str) -> None:
            await self.on_keep(job, text)

        handle = BackgroundJob(job.id, resume, keep, lambda: job.id in self._stopped)
        context = dataclasses.replace(context, job=handle)
        run = self._run(job, context, registry or self.registry)
        task = asyncio.create_task(run, name=f"job-{job.id}")
        self._tasks[job.id] = task
        task.add_done_callback(lambda _t: self._tasks.pop(job.id, None))

    async def _run(self, job: Job, context: ToolContext, registry: ToolRegistry) -> None:
        prepared = registry.prepare(job.tool, job.args)
        if isinstance(prepared, ToolResult):
            result = prepared
        else:
            # A background job runs as long as it needs unless the tool sets its own limit.
            limit = prepared.tool.timeout_s or _NO_LIMIT_S
            result = await registry.run(prepared, context, timeout_s=limit)
        await self._deliver(job, result)

    def callback(
        self, key: ConversationKey, job_id: str, tool: str, user_id: str = ""
    ) -> Callable[[ToolResult], Awaitable[None]]:
        """A once-only callback for an AsyncTool reporting its own result later."""
        job = Job(job_id, key, user_id, tool, {})
        fired = False

        async def report(result: ToolResult) -> None:
            nonlocal fired
            if fired:
                log.warning("job %s reported twice; the second report is ignored", job_id)
                return
            fired = True
            await self._deliver(job, result)

        return report

    async def _deliver(self, job: Job, result: ToolResult) -> None:
        try:
            await self.on_done(job, result)
        except Exception:
            log.exception("delivering the result of job %s failed", job.id)

    async def cancel(self, job_ids: Iterable[str]) -> None:
        """Stop these jobs if they run (their results are never reported); returns once they
        have stopped."""
        ids = [i for i in job_ids if i in self._tasks]
        tasks = [self._tasks[i] for i in ids]
        self._stopped.update(ids)
        for task in tasks:
            task.cancel()
        try:
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            self._stopped.difference_update(ids)

    async def aclose(self) -> None:
        tasks = list(self._tasks.values())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
