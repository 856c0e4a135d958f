"""The tool calls of a turn: each checked, run (safe ones together, each within the parallel
limit), its result recorded for the model; a destructive call not granted halts the turn as a
pending confirmation. Background tools start a job; results over ``max_output_chars`` are cut
(but for a tool that pages its own, `bounded_output`: use_skill).
The loop (engine/loop/_loop.py) asks the model; this part does what the model asked.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from engine import metrics
from engine._clock import wall
from engine.context import Window
from engine.loop._containment import Containment, Taint
from engine.loop._jobs import Job, JobRunner
from engine.loop._types import PendingCall, Record, TurnContext, TurnResult
from engine.models import Image, Message, ToolCall, Usage
from tools import AsyncTool, File, ToolContext, ToolResult
from tools.registry import PreparedCall, ToolRegistry

log = logging.getLogger(__name__)

NOT_STARTED = "This action was cancelled before it started; it was not run."
Starting = Callable[[], Awaitable[bool]]


@dataclass(slots=True)
class TurnState:
    ctx: TurnContext
    history: list[Message]
    record: Record | None
    iteration: int = 0
    produced: list[Message] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)
    repeats: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    stop_text: str | None = None  # set by the governor
    usage: Usage = field(default_factory=Usage)
    called: list[str] = field(default_factory=list)
    window: Window = field(default_factory=Window)  # the conversation's summary, for the budget
    taint: Taint = field(default_factory=lambda: Taint(""))  # set by the loop (Taint.of)

    async def add(self, msg: Message) -> None:
        self.history.append(msg)
        self.produced.append(msg)
        self.taint.read(msg)
        if self.record is not None:
            await self.record(msg)

    def result(self, text: str | None, pending: PendingCall | None = None) -> TurnResult:
        return TurnResult(text, self.produced, pending, self.usage, self.called, taint=self.taint)


class ToolCalls:
    def __init__(
        self,
        registry: ToolRegistry,
        jobs: JobRunner,
        *,
        max_output_chars: int,
        retry_budget: int,
        confirmation_timeout_s: float,
        max_parallel_tools: int,
        containment: Containment | None = None,
    ) -> None:
        self.registry = registry
        self.containment = containment or Containment()
        self.jobs = jobs
        self.max_output_chars = max_output_chars
        self.retry_budget = retry_budget
        self.confirmation_timeout_s = confirmation_timeout_s
        self.max_parallel_tools = max_parallel_tools
        self._slots = asyncio.Semaphore(max_parallel_tools)

    async def process(self, state: TurnState, calls: list[ToolCall]) -> TurnResult | None:
        """Run `calls` in order: consecutive safe ones together, an exclusive one alone; halt at
        the first destructive call with valid arguments."""
        batch: list[tuple[ToolCall, PreparedCall | ToolResult]] = []
        for i, call in enumerate(calls):
            prepared = self._prepare(state, call)
            if isinstance(prepared, PreparedCall):
                tool = prepared.tool
                # after untrusted content, a call that acts asks whatever the chat granted
                contained = self.containment.asks(tool, prepared.json_args, state.taint)
                if tool.destructive and not contained and state.ctx.grants is not None:
                    state.ctx.granted, state.ctx.grants = await state.ctx.grants(), None
                if contained or (tool.destructive and tool.name not in state.ctx.granted):
                    await self._run_batch(state, batch)
                    if state.stop_text is not None:
                        for c in calls[i:]:
                            await self.add_result(
                                state, c, ToolResult.fail("Not run: turn stopped.")
                            )
                        return None
                    return self._halt(state, call, prepared, calls[i + 1 :], contained)
                if tool.exclusive or tool.destructive:  # an action always allowed runs alone
                    if tool.destructive:
                        log.info("%s runs in %s unasked: always allowed", tool.name, state.ctx.key)
                    await self._run_batch(state, batch)
                    batch = []
                    await self._run_batch(state, [(call, prepared)])
                    continue
            batch.append((call, prepared))
        await self._run_batch(state, batch)
        return None

    def _prepare(self, state: TurnState, call: ToolCall) -> PreparedCall | ToolResult:
        if state.ctx.tools is not None and call.name not in state.ctx.tools:
            return ToolResult.fail(
                f"Tool {call.name!r} is not available here. Available tools: "
                f"{', '.join(sorted(state.ctx.tools)) or 'none'}.",
                retryable=True,
            )
        limit = state.ctx.max_tool_calls
        if limit is not None and len(state.called) >= limit:
            return ToolResult.fail(
                f"Not run: this turn has made {limit} tool calls, the most allowed. Answer the "
                "user with what you have, and say what is left undone."
            )
        if state.failures[call.name] >= self.retry_budget:
            return ToolResult.fail(
                f"Tool {call.name!r} has failed {state.failures[call.name]} times in this turn; "
                "do not call it again. Explain the problem to the user instead."
            )
        return self.registry.prepare(call.name, call.arguments)

    async def _run_batch(
        self, state: TurnState, batch: list[tuple[ToolCall, PreparedCall | ToolResult]]
    ) -> None:
        if not batch:
            return
        if len(batch) == 1:
            results = [await self._outcome(state, *batch[0])]
        else:
            results = await asyncio.gather(*(self._outcome(state, c, p) for c, p in batch))
        for (call, _), result in zip(batch, results, strict=True):
            await self.add_result(state, call, result)

    async def _outcome(
        self, state: TurnState, call: ToolCall, prepared: PreparedCall | ToolResult
    ) -> ToolResult:
        if isinstance(prepared, ToolResult):
            return prepared
        state.called.append(prepared.tool.name)
        return await self.run_one(state, call, prepared)

    async def run_one(
        self,
        state: TurnState,
        call: ToolCall,
        prepared: PreparedCall,
        starting: Starting | None = None,
    ) -> ToolResult:
        """Run one call; a background tool's starts its job (also when a confirmation let it
        through: run here, a reminder would hold its turn until it is due)."""
        progress = _step(state, prepared)
        if prepared.tool.background:
            if starting is not None and not await starting():
                return ToolResult.fail(NOT_STARTED)
            job = Job(
                id=secrets.token_hex(6),
                key=state.ctx.key,
                user_id=state.ctx.user_id,
                tool=prepared.tool.name,
                args=prepared.tool.job_args(prepared.json_args),
            )
            await self.jobs.start(job, self._tool_context(state, call), registry=self.registry)
            return ToolResult.started(job.id, prepared.tool.name)
        callback = None
        if isinstance(prepared.tool, AsyncTool):
            job_id = f"call_{call.id}"
            callback = self.jobs.callback(
                state.ctx.key, job_id, prepared.tool.name, state.ctx.user_id
            )
        async with self._slots:
            if starting is not None and not await starting():
                return ToolResult.fail(NOT_STARTED)
            context = self._tool_context(state, call, progress)
            result = await self.registry.run(prepared, context, callback=callback)
        if result.for_user and not result.silent:
            try:
                await state.ctx.send(result.for_user)
            except Exception:
                log.exception("could not show a tool result to the user")
        if result.files and state.ctx.send_files is not None:  # before the answer about them
            result.for_llm += await state.ctx.send_files(result.files)
        return result

    def _tool_context(
        self, state: TurnState, call: ToolCall, progress: Callable[[str], None] | None = None
    ) -> ToolContext:
        key, ctx = state.ctx.key, state.ctx
        return ToolContext(
            key.channel,
            key.chat_id,
            ctx.user_id,
            ctx.send,
            call.id,
            ctx.is_private,
            progress or _unwatched,
        )

    def _halt(
        self,
        state: TurnState,
        call: ToolCall,
        prepared: PreparedCall,
        rest: list[ToolCall],
        contained: bool,
    ) -> TurnResult:
        pending = PendingCall(
            id=secrets.token_hex(6),
            call_id=call.id,
            tool=prepared.tool.name,
            args=prepared.json_args,
            summary=_safe_summary(prepared),
            user_id=state.ctx.user_id,
            expires_at=wall() + self.confirmation_timeout_s,
            remaining=rest,
            iteration=state.iteration,
            details=_details(prepared),
            after=state.taint.after() if contained else (),
        )
        if contained:
            log.info("%s in %s asks: it follows %s", call.name, state.ctx.key, pending.after)
        return state.result(None, pending)

    async def add_result(self, state: TurnState, call: ToolCall, result: ToolResult) -> None:
        tool = self.registry.get(call.name)
        metrics.tool_called(call.name if tool is not None else "other", not result.is_error)
        text = result.for_llm
        if result.is_error:
            if result.retryable:
                state.failures[call.name] += 1
                if state.failures[call.name] >= self.retry_budget:
                    text += " (Retry limit reached: do not call this tool again in this turn.)"
            key = (call.name, call.arguments, result.for_llm)
            state.repeats[key] += 1
            if state.repeats[key] >= 3 and state.stop_text is None:
                state.stop_text = (
                    f"I stopped because the tool {call.name} kept failing with the same "
                    f"error: {_clip(result.for_llm, 300)}"
                )
        bounded = tool is not None and tool.bounded_output
        if len(text) > self.max_output_chars and not bounded:
            cut = len(text) - self.max_output_chars
            text = text[: self.max_output_chars] + f"\n…[truncated: {cut} more characters]"
        source = self.containment.provenance(tool, call.arguments, result)
        message = Message.tool_result(call.id, text, is_error=result.is_error, provenance=source)
        if result.images and state.ctx.vision:  # pictures to look at, for this turn only
            message.parts += [_image(f) for f in result.images if f.data is not None]
        await state.add(message)


def _image(file: File) -> Image:
    assert file.data is not None
    return Image(file.mime_type, file.data, name=file.name, size=len(file.data))


def _safe_summary(prepared: PreparedCall) -> str:
    try:
        return prepared.tool.describe_call(prepared.json_args)
    except Exception:
        log.exception("describe_call failed for %s", prepared.tool.name)
        return f"Run {prepared.tool.name}"


def _details(prepared: PreparedCall) -> str:
    """The complete action, exactly as it will run (never cut: the channel attaches it)."""
    try:
        return prepared.tool.describe_action(prepared.json_args)
    except Exception:
        log.exception("describe_action failed for %s", prepared.tool.name)
        return f"{prepared.tool.name} {json.dumps(prepared.json_args, default=str)}"


def _unwatched(text: str) -> None:
    """A call's progress when no one watches the turn."""


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n] + "…"


def _step(state: TurnState, prepared: PreparedCall) -> Callable[[str], None]:
    """Tell the turn's watcher (its progress line) that a call starts; it never waits. What it
    returns updates the call's line with how far it has got."""
    if state.ctx.on_step is not None:
        try:
            described = prepared.tool.describe_step(prepared.json_args)
            return state.ctx.on_step(prepared.tool.name, prepared.json_args, described)
        except Exception:
            log.exception("the progress of a turn failed")
    return _unwatched
