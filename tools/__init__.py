"""The tool contract, the @tool decorator and the registry.

from tools import tool, ToolContext

@tool
async def add_numbers(a: int, b: int) -> int:
    \"\"\"Add two integers.\"\"\"
    return a + b
"""

from tools._base import AsyncTool, ContextualTool, Tier, Tool, ToolContext, current_context
from tools._errors import (
    ConfigError,
    LLMError,
    RelaybotError,
    StoreError,
    ToolDefinitionError,
    ToolRetry,
)
from tools._function import FunctionTool, tool
from tools._registry import PreparedCall, ToolRegistry
from tools._result import ToolResult, to_text

__all__ = [
    "AsyncTool",
    "ConfigError",
    "ContextualTool",
    "FunctionTool",
    "LLMError",
    "PreparedCall",
    "RelaybotError",
    "StoreError",
    "Tier",
    "Tool",
    "ToolContext",
    "ToolDefinitionError",
    "ToolRegistry",
    "ToolResult",
    "ToolRetry",
    "current_context",
    "to_text",
    "tool",
]
