"""The tool-call loop: ask the model, run the tools it asks for, feed results back, repeat.

A turn ends with the model's answer, a pending confirmation (a destructive call waits for its
requester), or the iteration bound (one last request without tools sums up). It never raises for
tool problems; LLMError propagates so the caller can tell the user the model is unavailable.
The loop speaks only the neutral model layer (engine/_model.py). With a context budget
(engine/_budget.py) each request is fitted to the model's window first; one the provider still
refuses as too long is fitted harder and sent once more.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from engine import _metrics as metrics
from engine._budget import ContextBudget, Fitted, Window
from engine._context import for_model, sanitised
from engine._jobs import Job, JobRunner
from engine._model import (
    FinishReason,
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolSpec,
    Usage,
)
from engine._types import PendingCall, Record, TurnContext, TurnResult
from tools import (
    AsyncTool,
    ContextOverflow,
    PreparedCall,
    Tool,
    ToolContext,
    ToolRegistry,
    ToolResult,
)

log = logging.getLogger(__name__)

FALLBACK_TEXT = "Sorry, I have no answer to that. Could you rephrase it?"
SUM_UP = (
    "You have used all the tool calls allowed for this message. Do not call tools; answer the "
    "user now with what you have, and say what is left undone."
)
TRUNCATED = (
    "Your reply was cut off by the length limit, so this call was not executed. "
    "Try again with a shorter reply or smaller arguments."
)
DECLINED = "The user declined this action; it was not run."
NOT_STARTED = "This action was cancelled before it started; it was not run."
Starting = Callable[[], Awaitable[bool]]


@dataclass(slots=True)
class _State:
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

    async def add(self, msg: Message) -> None:
        self.history.append(msg)
        self.produced.append(msg)
        if self.record is not None:
            await self.record(msg)

    def result(self, text: str | None, pending: PendingCall | None = None) -> TurnResult:
        return TurnResult(text, self.produced, pending, self.usage, self.called)


class ToolLoop:
    def __init__(
        self,
        model: Model,
        registry: ToolRegistry,
        *,
        jobs: JobRunner | None = None,
        max_iterations: int = 10,
        max_output_chars: int = 16_000,
        retry_budget: int = 3,
        confirmation_timeout_s: float = 300.0,
        max_parallel_tools: int = 8,
        stream: bool = False,
        models: Mapping[str, Model] | None = None,
        context: ContextBudget | None = None,
    ) -> None:
        self.model = model
        self.models = dict(models or {})  # a turn whose context names one of these uses it
        self.context = context  # None: the whole history is sent as it is
        self.registry = registry
        self.jobs = jobs or JobRunner(registry)
        self.max_iterations = max_iterations
        self.max_output_chars = max_output_chars
        self.retry_budget = retry_budget
        self.confirmation_timeout_s = confirmation_timeout_s
        self.stream = stream
        self._slots = asyncio.Semaphore(max_parallel_tools)
        self._specs: dict[str, tuple[Tool, ToolSpec]] = {}

    async def run(
        self,
        history: list[Message],
        ctx: TurnContext,
        *,
        record: Record | None = None,
        window: Window | None = None,
    ) -> TurnResult:
        """Drive one turn from `history` (which ends with the user's message); `window` is the
        conversation's summary and the store ids of `history`, as ContextBudget.load gave them."""
        return await self._drive(_State(ctx, list(history), record, window=window or Window()))

    async def resume(
        self,
        history: list[Message],
        pending: PendingCall,
        approved: bool,
        ctx: TurnContext,
        *,
        record: Record | None = None,
        reason: str | None = None,
        starting: Starting | None = None,
        window: Window | None = None,
    ) -> TurnResult:
        """Continue a halted turn: run the approved call (or record the refusal), then the calls
        left after it, then the loop. `starting` is awaited right before the approved call
        runs (once it has a tool slot); when it returns False the call is not run."""
        state = _State(ctx, list(history), record, iteration=pending.iteration)
        state.window = window or Window()
        call = ToolCall(pending.call_id, pending.tool, json.dumps(pending.args))
        if approved:
            prepared = self.registry.prepare(pending.tool, pending.args)
            if isinstance(prepared, ToolResult):
                result = prepared
            else:
                state.called.append(pending.tool)
                result = await self._run_one(state, call, prepared, starting)
        else:
            result = ToolResult.fail(reason or DECLINED)
        await self._add_result(state, call, result)
        halted = await self._process_calls(state, pending.remaining)
        if halted is None:
            halted = await self._drive(state) if state.stop_text is None else None
        if halted is None:
            assert state.stop_text is not None
            halted = await self._finish(state, state.stop_text)
        halted.approved = result if approved else None
        return halted

    # -- the loop -------------------------------------------------------------------------

    async def _drive(self, state: _State) -> TurnResult:
        while state.iteration < self.max_iterations:
            state.iteration += 1
            reply = await self._request(state, self._tool_specs(state.ctx))
            if not reply.tool_calls:
                return await self._finish(state, reply.text or FALLBACK_TEXT)
            calls = reply.tool_calls
            await state.add(Message.assistant(reply.text, [sanitised(c) for c in calls]))
            if reply.finish_reason is FinishReason.LENGTH:
                for c in calls:
                    await self._add_result(state, c, ToolResult.fail(TRUNCATED, retryable=True))
                continue
            halted = await self._process_calls(state, calls)
            if halted is not None:
                return halted
            if state.stop_text is not None:
                return await self._finish(state, state.stop_text)
        reply = await self._request(state, [], extra=SUM_UP)
        return await self._finish(state, reply.text or FALLBACK_TEXT)

    async def _finish(self, state: _State, text: str) -> TurnResult:
        await state.add(Message.assistant(text))
        return state.result(text)

    def _tool_specs(self, ctx: TurnContext) -> list[ToolSpec]:
        specs = []
        for tool in self.registry.select(ctx.tools):
            cached = self._specs.get(tool.name)
            if cached is None or cached[0] is not tool:  # schemas are computed once per tool
                spec = ToolSpec(tool.name, tool.description, tool.parameters, _strict(tool))
                cached = self._specs[tool.name] = (tool, spec)
            specs.append(cached[1])
        return specs

    async def _request(
        self, state: _State, tools: list[ToolSpec], extra: str | None = None
    ) -> ModelResponse:
        system = state.ctx.system if extra is None else f"{state.ctx.system}\n\n{extra}".strip()
        on_text = state.ctx.on_text if self.stream else None
        model = self.models.get(state.ctx.model or "", self.model)
        fitted = await self._fit(state, model, system, tools)
        state.usage += fitted.spent
        try:
            reply = await metrics.model_request(model, fitted.request, on_text)
        except ContextOverflow as exc:
            if self.context is None:
                raise
            # The provider counts more than we thought: learn, fold harder, try once more.
            await self.context.overflowed(fitted, exc)
            fitted = await self._fit(state, model, system, tools, harder=True)
            state.usage += fitted.spent
            reply = await metrics.model_request(model, fitted.request, on_text)
        if self.context is not None:
            await self.context.learn(fitted, reply.usage)
        state.usage += reply.usage
        return reply

    async def _fit(
        self,
        state: _State,
        model: Model,
        system: str,
        tools: list[ToolSpec],
        *,
        harder: bool = False,
    ) -> Fitted:
        if self.context is None:
            request = ModelRequest(system, for_model(state.history), tools, self.stream)
            return Fitted(request, 0, model.name)
        return await self.context.fit(
            state.window,
            state.history,
            system,
            tools,
            model=model,
            stream=self.stream,
            harder=harder,
        )

    # -- tool calls -----------------------------------------------------------------------

    async def _process_calls(self, state: _State, calls: list[ToolCall]) -> TurnResult | None:
        """Run `calls` in order: consecutive safe ones together, an exclusive one alone; halt at
        the first destructive call with valid arguments."""
        batch: list[tuple[ToolCall, PreparedCall | ToolResult]] = []
        for i, call in enumerate(calls):
            prepared = self._prepare(state, call)
            if isinstance(prepared, PreparedCall):
                tool = prepared.tool
                if tool.destructive and tool.name not in state.ctx.granted:
                    await self._run_batch(state, batch)
                    if state.stop_text is not None:
                        for c in calls[i:]:
                            await self._add_result(
                                state, c, ToolResult.fail("Not run: turn stopped.")
                            )
                        return None
                    return self._halt(state, call, prepared, calls[i + 1 :])
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

    def _prepare(self, state: _State, call: ToolCall) -> PreparedCall | ToolResult:
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
        self, state: _State, batch: list[tuple[ToolCall, PreparedCall | ToolResult]]
    ) -> None:
        if not batch:
            return
        if len(batch) == 1:
            results = [await self._outcome(state, *batch[0])]
        else:
            results = await asyncio.gather(*(self._outcome(state, c, p) for c, p in batch))
        for (call, _), result in zip(batch, results, strict=True):
            await self._add_result(state, call, result)

    async def _outcome(
        self, state: _State, call: ToolCall, prepared: PreparedCall | ToolResult
    ) -> ToolResult:
        if isinstance(prepared, ToolResult):
            return prepared
        state.called.append(prepared.tool.name)
        if prepared.tool.background:
            job = Job(
                id=secrets.token_hex(6),
                key=state.ctx.key,
                user_id=state.ctx.user_id,
                tool=prepared.tool.name,
                args=prepared.tool.job_args(prepared.json_args),
            )
            await self.jobs.start(job, self._tool_context(state, call))
            return ToolResult.started(job.id, prepared.tool.name)
        return await self._run_one(state, call, prepared)

    async def _run_one(
        self,
        state: _State,
        call: ToolCall,
        prepared: PreparedCall,
        starting: Starting | None = None,
    ) -> ToolResult:
        callback = None
        if isinstance(prepared.tool, AsyncTool):
            job_id = f"call_{call.id}"
            callback = self.jobs.callback(
                state.ctx.key, job_id, prepared.tool.name, state.ctx.user_id
            )
        async with self._slots:
            if starting is not None and not await starting():
                return ToolResult.fail(NOT_STARTED)
            result = await self.registry.run(
                prepared, self._tool_context(state, call), callback=callback
            )
        if result.for_user and not result.silent:
            try:
                await state.ctx.send(result.for_user)
            except Exception:
                log.exception("could not show a tool result to the user")
        if result.files and state.ctx.send_files is not None:  # before the answer about them
            result.for_llm += await state.ctx.send_files(result.files)
        return result

    def _tool_context(self, state: _State, call: ToolCall) -> ToolContext:
        key = state.ctx.key
        return ToolContext(key.channel, key.chat_id, state.ctx.user_id, state.ctx.send, call.id)

    def _halt(
        self, state: _State, call: ToolCall, prepared: PreparedCall, rest: list[ToolCall]
    ) -> TurnResult:
        pending = PendingCall(
            id=secrets.token_hex(6),
            call_id=call.id,
            tool=prepared.tool.name,
            args=prepared.json_args,
            summary=_safe_summary(prepared),
            user_id=state.ctx.user_id,
            expires_at=time.time() + self.confirmation_timeout_s,
            remaining=rest,
            iteration=state.iteration,
            details=_details(prepared),
        )
        return state.result(None, pending)

    async def _add_result(self, state: _State, call: ToolCall, result: ToolResult) -> None:
        known = self.registry.get(call.name) is not None
        metrics.tool_called(call.name if known else "other", not result.is_error)
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
        if len(text) > self.max_output_chars:
            cut = len(text) - self.max_output_chars
            text = text[: self.max_output_chars] + f"\n…[truncated: {cut} more characters]"
        await state.add(Message.tool_result(call.id, text, is_error=result.is_error))


def _strict(tool: Tool) -> dict | None:
    try:
        return tool.strict_parameters()
    except Exception:  # a schema strict mode cannot express: the provider sends the plain one
        log.warning("tool %s has no strict-mode schema; sending the plain one", tool.name)
        return None


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


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n] + "…"
