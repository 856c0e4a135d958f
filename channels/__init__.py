"""Chat platform adapters and the interface they share with the engine."""

from channels._base import (
    Capabilities,
    Channel,
    Command,
    ConfirmationPrompt,
    Decision,
    DecisionStatus,
    Engine,
    InboundMessage,
    MessageRef,
    encode_decision,
    parse_decision,
)
from channels._split import split_text

__all__ = [
    "Capabilities",
    "Channel",
    "Command",
    "ConfirmationPrompt",
    "Decision",
    "DecisionStatus",
    "Engine",
    "InboundMessage",
    "MessageRef",
    "encode_decision",
    "parse_decision",
    "split_text",
]
