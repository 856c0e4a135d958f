"""The tool-call loop: ask the model, run the tools it asks for (``_calls``), feed the results
back, repeat; background tools run as jobs (``_jobs``). ``_types`` holds the values a turn is
made of; ``_containment`` what it has read that nobody in the chat wrote, and what then asks.
"""

from __future__ import annotations

from engine.loop._containment import (
    EFFECTS,
    OWN_QUOTE,
    Containment,
    Effect,
    Taint,
    page_label,
    result_source,
    urls_in,
)
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
    "EFFECTS",
    "OWN_QUOTE",
    "Containment",
    "ConversationKey",
    "Effect",
    "Job",
    "JobRunner",
    "PendingCall",
    "SendFiles",
    "Taint",
    "ToolLoop",
    "TurnContext",
    "TurnResult",
    "page_label",
    "result_source",
    "urls_in",
]
