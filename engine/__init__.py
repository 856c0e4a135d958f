"""The engine: LLM client, tool loop, background jobs, store and dispatcher.

It also defines the contract chat adapters implement (`Channel`) and call (`Engine`).
"""

from engine._backoff import Backoff as Backoff  # re-exported for the adapters
from engine._channel import (
    Capabilities,
    Channel,
    Choice,
    Command,
    ConfirmationPrompt,
    Decision,
    DecisionStatus,
    Engine,
    InboundMessage,
    MessageRef,
    Press,
    encode_decision,
    parse_decision,
)
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
    "Capabilities",
    "Channel",
    "Choice",
    "Command",
    "Completion",
    "ConfirmationPrompt",
    "ConversationKey",
    "Decision",
    "DecisionStatus",
    "Dispatcher",
    "Engine",
    "InboundMessage",
    "Job",
    "JobRunner",
    "LLMClient",
    "Message",
    "MessageRef",
    "PendingCall",
    "Press",
    "Settings",
    "Store",
    "ToolCall",
    "ToolLoop",
    "TurnContext",
    "TurnResult",
    "encode_decision",
    "ensure_pairing",
    "parse_decision",
]
