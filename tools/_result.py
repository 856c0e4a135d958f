"""ToolResult: what a tool gives back, for the model and (optionally) for the user."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pydantic_core


def to_text(value: Any) -> str:
    """Serialise a tool's return value for the model: str as is, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return "done"
    return pydantic_core.to_json(value, fallback=str).decode()


@dataclass(slots=True)
class ToolResult:
    """The outcome of one tool call.

    `for_llm` always goes back to the model; `for_user`, when set, is shown to the user as it is
    (unless `silent`). `error` keeps the underlying exception for logs; it is never serialised.
    """

    for_llm: str
    for_user: str | None = None
    silent: bool = False
    is_error: bool = False
    is_async: bool = False
    retryable: bool = False
    error: BaseException | None = field(default=None, repr=False, compare=False)

    @classmethod
    def ok(cls, value: Any) -> ToolResult:
        """A plain result for the model."""
        return cls(to_text(value))

    @classmethod
    def quiet(cls, value: Any) -> ToolResult:
        """A result for the model that is never shown to the user."""
        return cls(to_text(value), silent=True)

    @classmethod
    def user(cls, text: str, for_llm: str | None = None) -> ToolResult:
        """Text shown to the user as it is; the model is told it was shown."""
        return cls(for_llm if for_llm is not None else f"Shown to the user: {text}", for_user=text)

    @classmethod
    def started(cls, job_id: str, what: str = "") -> ToolResult:
        """A background job started; its real result arrives later as a follow-up."""
        detail = f" ({what})" if what else ""
        return cls(
            f"Started in the background{detail}, job id {job_id}. The result will arrive "
            "as a follow-up message; tell the user it is running.",
            is_async=True,
        )

    @classmethod
    def fail(
        cls, message: str, *, retryable: bool = False, error: BaseException | None = None
    ) -> ToolResult:
        """An error result; `retryable` ones tell the model what to fix."""
        return cls(message, is_error=True, retryable=retryable, error=error)
