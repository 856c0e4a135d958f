"""The engine: LLM client, tool loop, background jobs, store and dispatcher."""

from engine._dispatcher import Dispatcher, Settings
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
from engine._store import Store

__all__ = [
    "Completion",
    "ConversationKey",
    "Dispatcher",
    "Job",
    "JobRunner",
    "LLMClient",
    "Message",
    "PendingCall",
    "Settings",
    "Store",
    "ToolCall",
    "ToolLoop",
    "TurnContext",
    "TurnResult",
    "ensure_pairing",
]
