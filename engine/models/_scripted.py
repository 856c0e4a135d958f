"""An in-process model for fast tests of the loop: answers come from a list or a function.

Like pydantic-ai's FunctionModel: no HTTP, no SDK, the requests the loop sent are kept in
:attr:`ScriptedModel.requests` in the neutral shape. SDK-level behaviour is tested against the
fake provider servers instead.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from engine.models._stream import emit
from engine.models._types import (
    FinishReason,
    ModelRequest,
    ModelResponse,
    OnText,
    ToolCall,
    Usage,
)
from tools.errors import LLMError

Answer = ModelResponse | LLMError
AnswerFn = Callable[[ModelRequest], Answer | Awaitable[Answer]]


def reply(text: str | None = None, *calls: tuple[str, dict[str, Any] | str]) -> ModelResponse:
    """A scripted answer: text, or tool calls given as (name, arguments) pairs."""
    import json

    tool_calls = [
        ToolCall(f"call_{i}", name, args if isinstance(args, str) else json.dumps(args))
        for i, (name, args) in enumerate(calls, start=1)
    ]
    finish = FinishReason.TOOL_CALLS if tool_calls else FinishReason.STOP
    return ModelResponse(text, tool_calls, finish, Usage(10, 5))


class ScriptedModel:
    """A :class:`engine.Model` whose answers are scripted. An LLMError in the script is raised."""

    def __init__(
        self, answers: Iterable[Answer] | AnswerFn = (), *, name: str = "scripted"
    ) -> None:
        self.name = name
        self.requests: list[ModelRequest] = []
        self._fn: AnswerFn | None = answers if callable(answers) else None
        self._queue: list[Answer] = [] if callable(answers) else list(answers)

    def script(self, *answers: Answer) -> None:
        self._queue.extend(answers)

    async def complete(self, request: ModelRequest, on_text: OnText | None = None) -> ModelResponse:
        self.requests.append(request)
        if self._fn is not None:
            answer = self._fn(request)
            if inspect.isawaitable(answer):
                answer = await answer
        elif self._queue:
            answer = self._queue.pop(0)
        else:
            raise AssertionError("the scripted model has no answer left")
        if isinstance(answer, LLMError):
            raise answer
        if request.stream and answer.text:
            await emit(on_text, answer.text)
        return answer

    async def warm_up(self) -> None:
        return None

    async def aclose(self) -> None:
        return None
