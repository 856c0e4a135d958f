"""The engine: the model layer, the tool loop, background jobs, the store and the dispatcher.

It also defines the contract chat adapters implement (`Channel`) and call (`Engine`), and the
one model providers implement (`Model`: OpenAI, Anthropic, and failover over several). Arrows
point inward: channels → engine → tools.
"""

from engine._backoff import Backoff
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
from engine._metrics import ErrorLog, enable_metrics, set_state, use_error_log
from engine._store import SqliteStore, Store
from engine.chat._dispatcher import Dispatcher
from engine.chat._housekeeping import Retention
from engine.chat._limits import LimitSettings
from engine.chat._media import MediaSettings
from engine.chat._schedules import Schedules, ScheduleSettings
from engine.chat._settings import LoopOptions, Settings
from engine.context._budget import ContextBudget, ContextSettings, budget_for
from engine.context._prompt import ensure_pairing
from engine.context._window import WindowInfo, WindowSource, discover_window
from engine.loop._jobs import Job, JobRunner
from engine.loop._loop import ToolLoop
from engine.loop._types import ConversationKey, PendingCall, TurnContext, TurnResult
from engine.models._anthropic import AnthropicModel
from engine.models._failover import FailoverModel
from engine.models._openai import OpenAIModel
from engine.models._scripted import ScriptedModel, reply
from engine.models._transcribe import OpenAITranscriber
from engine.models._types import (
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
