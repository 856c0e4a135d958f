"""The engine's contracts: what a chat adapter implements and calls, what a model provider
implements, and the time they share.

An adapter (channels/) implements :class:`Channel` and calls the :class:`Engine` it is given;
a provider implements :class:`Model` over :class:`ModelRequest` and :class:`ModelResponse`.
The engine itself lives in rooms named for its layers, each with its own small surface for the
daemon's wiring (bot/): ``engine.models`` (the model layer and providers), ``engine.context``
(what a request holds), ``engine.loop`` (the tool loop), ``engine.work`` (per-chat work and the
cluster), ``engine.chat`` (what a chat sees: intake, turns, commands, confirmations, ...),
``engine.store`` (the store and its backends) and ``engine.metrics``. Arrows point inward:
bot → channels → engine → tools.
"""

from engine._backoff import Backoff
from engine._channel import (
    ACTION_PATTERN,
    DECISION_PATTERN,
    Action,
    Attachment,
    Button,
    Capabilities,
    Channel,
    Choice,
    Claim,
    Command,
    ConfirmationPrompt,
    Decision,
    DecisionStatus,
    Engine,
    InboundMessage,
    MediaKind,
    MessageRef,
    OutgoingFile,
    Press,
    Quote,
    Reaction,
    Receiver,
    Reply,
    Untrusted,
    chat_of,
    encode_action,
    encode_decision,
    parse_action,
    parse_decision,
)
from engine._clock import Clock, SystemClock
from engine.models import (
    FinishReason,
    Image,
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    OnText,
    Role,
    Text,
    ToolCall,
    ToolOutput,
    ToolSpec,
    Usage,
)

__all__ = [
    "ACTION_PATTERN",
    "DECISION_PATTERN",
    "Action",
    "Attachment",
    "Backoff",
    "Button",
    "Capabilities",
    "Channel",
    "Choice",
    "Claim",
    "Clock",
    "Command",
    "ConfirmationPrompt",
    "Decision",
    "DecisionStatus",
    "Engine",
    "FinishReason",
    "Image",
    "InboundMessage",
    "MediaKind",
    "Message",
    "MessageRef",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "OnText",
    "OutgoingFile",
    "Press",
    "Quote",
    "Reaction",
    "Receiver",
    "Reply",
    "Role",
    "SystemClock",
    "Text",
    "ToolCall",
    "ToolOutput",
    "ToolSpec",
    "Untrusted",
    "Usage",
    "chat_of",
    "encode_action",
    "encode_decision",
    "parse_action",
    "parse_decision",
]
