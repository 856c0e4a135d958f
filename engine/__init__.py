"""The engine: LLM client, tool loop, background jobs, store and dispatcher."""

from engine._jobs import Job, JobRunner
from engine._llm import Completion, LLMClient, Message, ToolCall
from engine._loop import (
    ConversationKey,
    PendingCall,
    ToolLoop,
    TurnContext,
    TurnResult,
    ensure_pairing,
)

__all__ = [
    "Completion",
    "ConversationKey",
    "Job",
    "JobRunner",
    "LLMClient",
    "Message",
    "PendingCall",
    "ToolCall",
    "ToolLoop",
    "TurnContext",
    "TurnResult",
    "ensure_pairing",
]
