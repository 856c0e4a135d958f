"""ToolResult: what a tool gives back, for the model and (optionally) for the user.

A result can carry files (:class:`File`: a chart, an export, a report) that the user receives in
the chat as files, pictures as pictures; the model is told they were sent.
"""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydantic_core


def to_text(value: Any) -> str:
    """Serialise a tool's return value for the model: str as is, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return "done"
    return pydantic_core.to_json(value, fallback=str).decode()


@dataclass(frozen=True, slots=True)
class File:
    """A file for the user: its content (`data`) or where it is (`path`, read when it is sent).

    `name` defaults to the path's name; `mime_type` is guessed from the name when not given.
    """

    name: str = ""
    data: bytes | None = field(default=None, repr=False)
    path: Path | None = None
    mime_type: str = ""

    def __post_init__(self) -> None:
        if (self.data is None) == (self.path is None):
            raise ValueError("a File needs exactly one of data or path")
        name = self.name or (self.path.name if self.path is not None else "")
        if not name:
            raise ValueError("a File made from bytes needs a name")
        object.__setattr__(self, "name", name)
        if not self.mime_type:
            guessed = mimetypes.guess_type(name)[0] or "application/octet-stream"
            object.__setattr__(self, "mime_type", guessed)


@dataclass(slots=True)
class ToolResult:
    """The outcome of one tool call.

    `for_llm` always goes back to the model; `for_user`, when set, is shown to the user as it is
    (unless `silent`); `files` are sent to the user as files, in order, as soon as the call ends.
    `error` keeps the underlying exception for logs; it is never serialised.
    """

    for_llm: str
    for_user: str | None = None
    silent: bool = False
    is_error: bool = False
    is_async: bool = False
    retryable: bool = False
    error: BaseException | None = field(default=None, repr=False, compare=False)
    files: tuple[File, ...] = ()
    # the text holds words nobody in the chat wrote: where from ("the skill pdf"); the engine
    # then treats what follows as it treats a web page (SECURITY.md, the model of trust)
    untrusted: str | None = None

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
    def with_files(cls, for_llm: str, *files: File) -> ToolResult:
        """Files for the user (sent as soon as the call ends); `for_llm` tells the model."""
        return cls(for_llm, files=files)

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
