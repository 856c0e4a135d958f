"""The tool contract, the @tool decorator and the registry.

from tools import tool, ToolContext

@tool
async def add_numbers(a: int, b: int) -> int:
    \"\"\"Add two integers.\"\"\"
    return a + b
"""

from tools._base import AsyncTool, ContextualTool, Tier, Tool, ToolContext, current_context
from tools._config import McpConfig, McpServerConfig, ToolsConfig, apply_policy
from tools._errors import (
    ConfigError,
    ContextOverflow,
    DownloadError,
    LLMError,
    ModelAuthError,
    ModelRateLimited,
    ModelRefused,
    ModelServerError,
    ModelTimedOut,
    ModelUnavailable,
    ModelUnreachable,
    PromptTooLarge,
    RelaybotError,
    StoreError,
    StoreUnavailable,
    ToolDefinitionError,
    ToolRetry,
)
from tools._function import FunctionTool, tool
from tools._plugins import load_plugins
from tools._registry import PreparedCall, ToolRegistry
from tools._result import File, ToolResult, to_text
from tools.builtins import NotesStore, builtin_tools

__all__ = [
    "AsyncTool",
    "ConfigError",
    "ContextOverflow",
    "ContextualTool",
    "DownloadError",
    "File",
    "FunctionTool",
    "LLMError",
    "McpConfig",
    "McpManager",
    "McpServerConfig",
    "McpToolInfo",
    "ModelAuthError",
    "ModelRateLimited",
    "ModelRefused",
    "ModelServerError",
    "ModelTimedOut",
    "ModelUnavailable",
    "ModelUnreachable",
    "NotesStore",
    "PreparedCall",
    "PromptTooLarge",
    "RelaybotError",
    "StoreError",
    "StoreUnavailable",
    "Tier",
    "Tool",
    "ToolContext",
    "ToolDefinitionError",
    "ToolRegistry",
    "ToolResult",
    "ToolRetry",
    "ToolsConfig",
    "apply_policy",
    "builtin_tools",
    "current_context",
    "load_plugins",
    "to_text",
    "tool",
]


def __getattr__(name: str) -> object:  # the mcp SDK is heavy: import it only when used
    if name in ("McpManager", "McpToolInfo"):
        from tools import _mcp

        return getattr(_mcp, name)
    raise AttributeError(f"module 'tools' has no attribute {name!r}")
