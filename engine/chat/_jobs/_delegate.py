"""delegate: the model hands a sub-task to a helper that runs as a background job.

The helper starts from a fresh context, the task alone, with the tools the model names (of those
offered in the chat; never delegate itself or a background tool), under its own bounds: at most
`max_iterations` requests and `max_tokens` tokens, counted in the user's usage like a turn's.
Its answer comes back into the conversation as any background job's result does
(engine/chat/_jobs/_background.py), and the chat's turn that follows tells the user. A destructive
call in it asks the requesting user with buttons like any other (unless always allowed in the chat),
and the helper waits for the answer (Confirmations.wait_for). The job is resumable: after a
restart the task runs again from its start, and any action in it asks again.
"""

from __future__ import annotations

import functools
import logging
import secrets
from collections.abc import Collection
from dataclasses import replace
from typing import Any

from engine.chat._access._limits import today
from engine.chat._confirmations._confirmations import DELEGATED, Confirmations
from engine.chat._confirmations._permissions import Permissions
from engine.chat._settings._sections import DelegateSettings
from engine.loop import ConversationKey, ToolLoop, TurnContext, TurnResult
from engine.models import Message, Model, ModelRequest, ModelResponse, OnText, Usage
from engine.store import Store
from tools import Tool, ToolResult
from tools.errors import LLMError
from tools.registry import ToolRegistry, current_context

log = logging.getLogger(__name__)

SYSTEM = (
    "You do one task for an assistant that is talking with a user; you see only the task. Use "
    "your tools when they help, then answer with the result, complete and self-contained: it "
    "goes back to the assistant, which tells the user."
)


class _OverBudget(LLMError):
    pass


class _Bounded:
    """The chat's model, refusing requests once `limit` tokens are spent."""

    def __init__(self, model: Model, limit: int) -> None:
        self.model = model
        self.name = model.name
        self.limit = limit
        self.spent = Usage()

    async def complete(self, request: ModelRequest, on_text: OnText | None = None) -> ModelResponse:
        if self.spent.total >= self.limit:
            raise _OverBudget(f"the task used its {self.limit:,} tokens")
        reply = await self.model.complete(request, on_text)
        self.spent += reply.usage
        return reply

    async def warm_up(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


class Delegate(Tool):
    name = "delegate"
    description = (
        "Hand a self-contained sub-task to a helper that works on it in the background with a "
        "fresh context (it sees only the task) and the tools you name. Its answer comes back "
        "into this conversation when it is done. Use it for longer research or multi-step "
        "work that would otherwise hold up the conversation."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "task": {
                "type": "string",
                "minLength": 1,
                "maxLength": 8000,
                "description": "The task in full: everything the helper needs to know.",
            },
            "tools": {
                "type": "array",
                "items": {"type": "string"},
                "maxItems": 30,
                "description": "Names of your tools the helper may use (none when omitted).",
            },
        },
        "required": ["task"],
        "additionalProperties": False,
    }
    background = True
    resumable = True  # run again from the start after a restart

    def __init__(
        self,
        model: Model,
        registry: ToolRegistry,
        store: Store,
        confirmations: Confirmations,
        permissions: Permissions,
        settings: DelegateSettings,
        *,
        dm_only: Collection[str] = (),
        confirmation_timeout_s: float = 300.0,
    ) -> None:
        self.model = model
        self.registry = registry
        self.store = store
        self.confirmations = confirmations
        self.permissions = permissions
        self.settings = settings
        self.dm_only = frozenset(dm_only)
        self.confirmation_timeout_s = confirmation_timeout_s

    async def execute(self, args: dict[str, Any]) -> ToolResult:
        ctx = current_context()
        if not (ctx.channel and ctx.chat_id and ctx.user_id):
            return ToolResult.fail("delegate needs to know the chat and the user; unknown here.")
        names = list(dict.fromkeys(args.get("tools") or []))
        refused = [n for n in names if not self._may_use(n, ctx.is_private)]
        if refused:
            usable = [n for n in self.registry.names() if self._may_use(n, ctx.is_private)]
            return ToolResult.fail(
                f"The helper cannot use {', '.join(refused)}. It may use: "
                f"{', '.join(usable) or 'no tools'}.",
                retryable=True,
            )
        key = ConversationKey(ctx.channel, ctx.chat_id)
        turn = TurnContext(
            key,
            ctx.user_id,
            send=ctx.send,
            tools=names,
            system=SYSTEM,
            grants=functools.partial(self.permissions.granted, key),
            is_private=ctx.is_private,
        )
        model = _Bounded(self.model, self.settings.max_tokens)
        loop = ToolLoop(
            model,
            self.registry,
            max_iterations=self.settings.max_iterations,
            confirmation_timeout_s=self.confirmation_timeout_s,
        )
        calls: list[str] = []
        try:
            result = await self._run(loop, turn, str(args["task"]), calls)
        except _OverBudget as exc:
            return ToolResult.fail(f"The delegated task stopped unfinished: {exc}.")
        except LLMError as exc:
            return ToolResult.fail(f"The delegated task stopped: the model failed ({exc}).")
        finally:
            u = model.spent
            await self.store.usage.add(
                key.channel, ctx.user_id, today(), u.prompt_tokens, u.completion_tokens, len(calls)
            )
        return ToolResult.ok(f"The delegated task's answer: {result.text}")

    def _may_use(self, name: str, is_private: bool) -> bool:
        tool = self.registry.get(name)
        if tool is None or tool.background or name == self.name:
            return False
        return is_private or name not in self.dm_only

    async def _run(
        self, loop: ToolLoop, turn: TurnContext, task: str, calls: list[str]
    ) -> TurnResult:
        """The task's loop; each destructive call not allowed here asks and waits."""
        history = [Message.user(task)]
        result = await loop.run(history, turn)
        calls += result.tool_calls
        while result.pending is not None:
            history += result.messages
            pending = replace(result.pending, call_id=f"{DELEGATED}{secrets.token_hex(6)}")
            conv = await self.store.conversations.active(turn.key.channel, turn.key.chat_id)
            row, reason = await self.confirmations.wait_for(conv, pending, "")
            starting = None if row is None else functools.partial(self.confirmations.started, row)
            result = await loop.resume(
                history, result.pending, row is not None, turn, reason=reason, starting=starting
            )
            calls += result.tool_calls
            if row is not None:
                await self.confirmations.finish(row, result.approved)
        return result
