"""The engine: the model layer, the tool loop, background jobs, the store and the dispatcher.

It also defines the contract chat adapters implement (`Channel`) and call (`Engine`), and the
one model providers implement (`Model`: OpenAI, Anthropic, and failover over several). Arrows
point inward: channels → engine → tools.
"""

from engine._anthropic import AnthropicModel
from engine._backoff import Backoff
from engine._budget import ContextBudget, ContextSettings, budget_for
from engine._channel import (
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
    Receiver,
    Reply,
    encode_action,
    encode_decision,
    parse_action,
    parse_decision,
)
from engine._clock import Clock, SystemClock
from engine._context import ensure_pairing
from engine._dispatcher import Dispatcher
from engine._failover import FailoverModel
from engine._housekeeping import Retention
from engine._jobs import Job, JobRunner
from engine._limits import LimitSettings
from engine._loop import ToolLoop
from engine._media import MediaSettings
from engine._metrics import ErrorLog, enable_metrics, set_state, use_error_log
from engine._model import (
    FinishReason,
    Image,
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    Role,
    Text,
    ToolCall,
    ToolOutput,
    ToolSpec,
    Usage,
)
from engine._openai import OpenAIModel
from engine._schedules import Schedules, ScheduleSettings
from engine._scripted import ScriptedModel, reply
from engine._settings import LoopOptions, Settings
from engine._store import SqliteStore, Store
from engine._transcribe import OpenAITranscriber
from engine._types import ConversationKey, PendingCall, TurnContext, TurnResult
from engine._window import WindowInfo, WindowSource, discover_window

__all__ = [
    "Action",
    "AnthropicModel",
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
    "ContextBudget",
    "ContextSettings",
    "ConversationKey",
    "Decision",
    "DecisionStatus",
    "Dispatcher",
    "Engine",
    "ErrorLog",
    "FailoverModel",
    "FinishReason",
    "Image",
    "InboundMessage",
    "Job",
    "JobRunner",
    "LimitSettings",
    "LoopOptions",
    "MediaKind",
    "MediaSettings",
    "Message",
    "MessageRef",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "OpenAIModel",
    "OpenAITranscriber",
    "OutgoingFile",
    "PendingCall",
    "Press",
    "Receiver",
    "Reply",
    "Retention",
    "Role",
    "ScheduleSettings",
    "Schedules",
    "ScriptedModel",
    "Settings",
    "SqliteStore",
    "Store",
    "SystemClock",
    "Text",
    "ToolCall",
    "ToolLoop",
    "ToolOutput",
    "ToolSpec",
    "TurnContext",
    "TurnResult",
    "Usage",
    "WindowInfo",
    "WindowSource",
    "budget_for",
    "discover_window",
    "enable_metrics",
    "encode_action",
    "encode_decision",
    "ensure_pairing",
    "parse_action",
    "parse_decision",
    "reply",
    "set_state",
    "use_error_log",
]
