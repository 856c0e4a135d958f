"""The tool-call loop: ask the model, run the tools it asks for (``_calls``), feed the results
back, repeat; background tools run as jobs (``_jobs``). ``_types`` holds the values a turn is
made of.
"""

from __future__ import annotations

from engine.loop._jobs import Job, JobRunner
from engine.loop._loop import ToolLoop
from engine.loop._types import (
    ConversationKey,
    PendingCall,
    SendFiles,
    TurnContext,
    TurnResult,
)

__all__ = [
    "ConversationKey",
    "Job",
    "JobRunner",
    "PendingCall",
    "SendFiles",
    "ToolLoop",
    "TurnContext",
    "TurnResult",
]
