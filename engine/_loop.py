"""The tool-call loop: ask the model, run the tools it asks for, feed results back, repeat.

A turn ends with the model's answer, a pending confirmation (a destructive call waits for its
requester), or the iteration bound (one last request without tools sums up). It never raises for
tool problems; LLMError propagates so the caller can tell the user the model is unavailable.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from engine._jobs import Job, JobRunner
from engine._llm import LLMClient, Message, OnText, ToolCall
from tools import AsyncTool, PreparedCall, ToolContext, ToolRegistry, ToolResult
from tools._base import Send, _no_send

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

Record = Callable[[Message], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ConversationKey:
    channel: str
    chat_id: str

    def __str__(self) -> str:
        return f"{self.channel}:{self.chat_id}"


@dataclass(slots=True)
class TurnContext:
    """Who the turn is for and how to reach them."""

    key: ConversationKey
    user_id: str
    user_name: str = ""
    send: Send = _no_send  # shows text to the user as it is (for_user results, ctx.send)
    on_text: OnText | None = None  # streamed text deltas
    tools: Collection[str] | None = None  # tool names offered in this turn; None = all


@dataclass(slots=True)
class PendingCall:
    """A destructive call halted before it ran, waiting for its requester."""

    id: str
    call_id: str
    tool: str
    args: dict[str, Any]
    summary: str
    user_id: str
    expires_at: float
    remaining: list[ToolCall]  # calls of the same reply not processed yet (raw arguments)
    iteration: int


@dataclass(slots=True)
class TurnResult:
    text: str | None  # the answer to send; None when halted for a confirmation
    messages: list[Message]  # every message this call produced, in order
    pending: PendingCall | None = None


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

    async def add(self, msg: Message) -> None:
        self.history.append(msg)
        self.produced.append(msg)
        if self.record is not None:
            await self.record(msg)


class ToolLoop:
    def __init__(
        self,
        llm: LLMClient,
        registry: ToolRegistry,
        *,
        jobs: JobRunner | None = None,
        max_iterations: int = 10,
        max_output_chars: int = 16_000,
        retry_budget: int = 3,
        confirmation_timeout_s: float = 300.0,
        max_parallel_tools: int = 8,
        strict: bool = False,
        stream: bool = False,
    ) -> None:
        self.llm = llm
        self.registry = registry
        self.jobs = jobs or JobRunner(registry)
        self.max_iterations = max_iterations
        self.max_output_chars = max_output_chars
        self.retry_budget = retry_budget
        self.confirmation_timeout_s = confirmation_timeout_s
        self.strict = strict
        self.stream = stream
        self._slots = asyncio.Semaphore(max_parallel_tools)

    async def run(
        self, history: list[Message], ctx: TurnContext, *, record: Record | None = None
    ) -> TurnResult:
        """Drive one turn from `history` (which ends with the user's message)."""
        state = _State(ctx, list(history), record)
        return await self._drive(state)

    async def resume(
        self,
        history: list[Message],
        pending: PendingCall,
        approved: bool,
        ctx: TurnContext,
        *,
        record: Record | None = None,
        reason: str | None = None,
    ) -> TurnResult:
        """Continue a halted turn: run the approved call (or record the refusal), then the calls
        left after it, then the loop."""
        state = _State(ctx, list(history), record, iteration=pending.iteration)
        call = ToolCall(pending.call_id, pending.tool, json.dumps(pending.args))
        if approved:
            prepared = self.registry.prepare(pending.tool, pending.args)
            result = prepared if isinstance(prepared, ToolResult) else None
            if result is None:
                assert isinstance(prepared, PreparedCall)
                result = await self._run_one(state, call, prepared)
        else:
            result = ToolResult.fail(reason or DECLINED)
        await self._add_result(state, call, result)
        halted = await self._process_calls(state, pending.remaining)
        if halted is not None:
            return halted
        if state.stop_text is not None:
            return await self._finish(state, state.stop_text)
        return await self._drive(state)

    # -- the loop -------------------------------------------------------------------------

    async def _drive(self, state: _State) -> TurnResult:
        while state.iteration < self.max_iterations:
            state.iteration += 1
            tools = self._definitions(state.ctx)
            reply = await self._request(state, tools)
            if not reply.tool_calls:
                return await self._finish(state, reply.content or FALLBACK_TEXT)
            calls = reply.tool_calls
            await state.add(Message("assistant", reply.content, [_sanitised(c) for c in calls]))
            if reply.finish_reason == "length":
                for c in calls:
                    await self._add_result(state, c, ToolResult.fail(TRUNCATED, retryable=True))
                continue
            halted = await self._process_calls(state, calls)
            if halted is not None:
                return halted
            if state.stop_text is not None:
                return await self._finish(state, state.stop_text)
        reply = await self._request(state, None, extra=Message("system", SUM_UP))
        return await self._finish(state, reply.content or FALLBACK_TEXT)

    async def _finish(self, state: _State, text: str) -> TurnResult:
        await state.add(Message("assistant", text))
        return TurnResult(text, state.produced)

    def _definitions(self, ctx: TurnContext) -> list[dict[str, Any]] | None:
        defs = self.registry.definitions(strict=self.strict, only=ctx.tools)
        return defs or None

    async def _request(
        self, state: _State, tools: list[dict[str, Any]] | None, extra: Message | None = None
    ):
        messages = ensure_pairing(state.history)
        if extra is not None:
            messages = [*messages, extra]
        return await self.llm.complete(
            messages, tools, stream=self.stream, on_text=state.ctx.on_text if self.stream else None
        )

    # -- tool calls -----------------------------------------------------------------------

    async def _process_calls(self, state: _State, calls: list[ToolCall]) -> TurnResult | None:
        """Run `calls` in order: consecutive safe ones together, an exclusive one alone; halt at
        the first destructive call with valid arguments."""
        batch: list[tuple[ToolCall, PreparedCall | ToolResult]] = []
        for i, call in enumerate(calls):
            prepared = self._prepare(state, call)
            if isinstance(prepared, PreparedCall) and prepared.tool.destructive:
                await self._run_batch(state, batch)
                if state.stop_text is not None:
                    rest = calls[i:]
                    for c in rest:
                        await self._add_result(state, c, ToolResult.fail("Not run: turn stopped."))
                    return None
                return self._halt(state, call, prepared, calls[i + 1 :])
            if isinstance(prepared, PreparedCall) and prepared.tool.exclusive:
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
        if state.failures[call.name] >= self.retry_budget:
            return ToolResult.fail(
                f"Tool {call.name!r} has failed {state.failures[call.name]} times in this turn; "
                "do not call it again. Explain the problem to the user instead."
            )
        return self.registry.prepare(call.name, call.arguments, strict=self.strict)

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

    async def _run_one(self, state: _State, call: ToolCall, prepared: PreparedCall) -> ToolResult:
        callback = None
        if isinstance(prepared.tool, AsyncTool):
            callback = self.jobs.callback(state.ctx.key, f"{prepared.tool.name}-{call.id}")
        async with self._slots:
            result = await self.registry.run(
                prepared, self._tool_context(state, call), callback=callback
            )
        if result.for_user and not result.silent:
            try:
                await state.ctx.send(result.for_user)
            except Exception:
                log.exception("could not show a tool result to the user")
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
        )
        return TurnResult(None, state.produced, pending)

    async def _add_result(self, state: _State, call: ToolCall, result: ToolResult) -> None:
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
        await state.add(Message("tool", text, tool_call_id=call.id))


def _safe_summary(prepared: PreparedCall) -> str:
    try:
        return prepared.tool.describe_call(prepared.json_args)
    except Exception:
        log.exception("describe_call failed for %s", prepared.tool.name)
        return f"{prepared.tool.name} {json.dumps(prepared.json_args, default=str)[:300]}"


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n] + "…"


def _sanitised(call: ToolCall) -> ToolCall:
    """The call as it is stored: arguments that are not a JSON object become a valid one."""
    raw = call.arguments.strip()
    if not raw:
        return ToolCall(call.id, call.name, "{}")
    try:
        if isinstance(json.loads(raw), dict):
            return call
    except json.JSONDecodeError:
        pass
    return ToolCall(call.id, call.name, json.dumps({"invalid_json": raw[:2000]}))


def ensure_pairing(history: list[Message]) -> list[Message]:
    """Every assistant tool call followed by exactly one result; orphans dropped.

    Providers reject a history that breaks this. A repaired copy is returned (and logged);
    the common case returns `history` itself.
    """
    out: list[Message] = []
    open_ids: list[str] = []
    seen: set[str] = set()
    repaired = False

    def close_open() -> None:
        nonlocal repaired
        for cid in open_ids:
            out.append(Message("tool", "No result was recorded for this call.", tool_call_id=cid))
            repaired = True
        open_ids.clear()

    for msg in history:
        if msg.role == "tool":
            if msg.tool_call_id in open_ids:
                open_ids.remove(msg.tool_call_id)
                out.append(msg)
            else:
                repaired = True  # an orphan or duplicate result
            continue
        close_open()
        if msg.role == "assistant" and msg.tool_calls:
            ids = [c.id for c in msg.tool_calls if c.id not in seen]
            if len(ids) != len(msg.tool_calls):
                repaired = True
                msg = Message(
                    msg.role, msg.content, [c for c in msg.tool_calls if c.id in ids], None
                )
            seen.update(ids)
            open_ids.extend(ids)
        out.append(msg)
    close_open()
    if not repaired:
        return history
    log.error("conversation history broke the tool-call pairing; repaired before sending")
    return out
