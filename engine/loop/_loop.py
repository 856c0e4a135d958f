"""The tool-call loop: ask the model, run the tools it asks for, feed results back, repeat.

A turn ends with the model's answer, a pending confirmation (a destructive call waits for its
requester), or the iteration bound (one last request without tools sums up). It never raises for
tool problems; LLMError propagates so the caller can tell the user the model is unavailable.
The loop speaks only the neutral model layer (engine/models/_types.py). With a context budget
(context/_budget.py) each request is fitted to the model's window first; one the provider still
refuses as too long is fitted harder and sent once more.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Mapping

from engine import metrics
from engine.context import CUT_NOTE, ContextBudget, Fitted, Window, for_model
from engine.loop._calls import Starting, ToolCalls, TurnState
from engine.loop._containment import Containment, Taint
from engine.loop._jobs import JobRunner
from engine.loop._types import PendingCall, Record, TurnContext, TurnResult
from engine.models import (
    FinishReason,
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolSpec,
    sanitised,
)
from tools import ToolResult
from tools.errors import ContextOverflow
from tools.registry import ToolRegistry

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


def _tainted(state: TurnState) -> TurnState:
    """`state` with the taint of what its context holds before the turn reads on."""
    summary = state.window.summary
    held = (summary.text, summary.sources) if summary is not None else None
    state.taint = Taint.of(state.history, state.ctx.user_id, state.ctx.system, held)
    return state


def answer_text(reply: ModelResponse) -> str:
    """What the user reads of a final reply: a reply cut by the length limit says so."""
    text = reply.text or FALLBACK_TEXT
    if reply.finish_reason is FinishReason.LENGTH and reply.text:
        return text.rstrip() + CUT_NOTE
    return text


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
        trusted_sources: Collection[str] = (),
    ) -> None:
        self.model = model
        self.models = dict(models or {})  # a turn whose context names one of these uses it
        self.context = context  # None: the whole history is sent as it is
        self.registry = registry
        self.jobs = jobs or JobRunner(registry)
        self.max_iterations = max_iterations
        self.stream = stream
        self.calls = ToolCalls(
            registry,
            self.jobs,
            max_output_chars=max_output_chars,
            retry_budget=retry_budget,
            confirmation_timeout_s=confirmation_timeout_s,
            max_parallel_tools=max_parallel_tools,
            containment=Containment(trusted_sources),
        )

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
        state = TurnState(ctx, list(history), record, window=window or Window())
        return await self._drive(_tainted(state))

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
        ran: Callable[[ToolResult], None] | None = None,
        known: ToolResult | None = None,
        window: Window | None = None,
    ) -> TurnResult:
        """Continue a halted turn: run the approved call (or record the refusal), then the calls
        left after it, then the loop. `starting` is awaited right before the approved call
        runs (once it has a tool slot); when it returns False the call is not run. `ran` is
        told the call's result before anything records it; `known` is that result when the
        call ran already (a turn the store cut off after it: it is recorded, not run again)."""
        state = TurnState(ctx, list(history), record, iteration=pending.iteration)
        state.window = window or Window()
        _tainted(state)
        call = ToolCall(pending.call_id, pending.tool, json.dumps(pending.args))
        if approved and known is not None:
            state.called.append(pending.tool)
            result = known
        elif approved:
            prepared = self.registry.prepare(pending.tool, pending.args)
            if isinstance(prepared, ToolResult):
                result = prepared
            else:
                state.called.append(pending.tool)
                result = await self.calls.run_one(state, call, prepared, starting)
                if ran is not None:
                    ran(result)
        else:
            result = ToolResult.fail(reason or DECLINED)
        await self.calls.add_result(state, call, result)
        halted = await self.calls.process(state, pending.remaining)
        if halted is None:
            halted = await self._drive(state) if state.stop_text is None else None
        if halted is None:
            assert state.stop_text is not None
            halted = await self._finish(state, state.stop_text)
        halted.approved = result if approved else None
        return halted

    # -- the loop -------------------------------------------------------------------------

    async def _drive(self, state: TurnState) -> TurnResult:
        while state.iteration < self.max_iterations:
            state.iteration += 1
            reply = await self._request(state, self._tool_specs(state.ctx))
            if not reply.tool_calls:
                return await self._finish(state, answer_text(reply), reply)
            calls = reply.tool_calls
            sane = [sanitised(c) for c in calls]
            await state.add(Message.assistant(reply.text, sane, reply.reasoning))
            if reply.finish_reason is FinishReason.LENGTH:
                for c in calls:
                    await self.calls.add_result(
                        state, c, ToolResult.fail(TRUNCATED, retryable=True)
                    )
                continue
            halted = await self.calls.process(state, calls)
            if halted is not None:
                return halted
            if state.stop_text is not None:
                return await self._finish(state, state.stop_text)
        reply = await self._request(state, [], extra=SUM_UP)
        return await self._finish(state, answer_text(reply), reply)

    async def _finish(
        self, state: TurnState, text: str, reply: ModelResponse | None = None
    ) -> TurnResult:
        """The answer, stored with what the model thought before it (its reasoning items)."""
        await state.add(Message.assistant(text, (), reply.reasoning if reply else ()))
        return state.result(text)

    def _tool_specs(self, ctx: TurnContext) -> list[ToolSpec]:
        return self.registry.definitions(ctx.tools)  # each made once per tool by the registry

    async def _request(
        self, state: TurnState, tools: list[ToolSpec], extra: str | None = None
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
        state: TurnState,
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
