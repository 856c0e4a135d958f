"""What a plugin author writes: the @tool decorator, the Tool classes, and what a tool returns.

    from tools import ToolContext, tool

    @tool
    async def add_numbers(a: int, b: int) -> int:
        \"\"\"Add two integers.\"\"\"
        return a + b

tools/PLUGINS.md shows each form (the decorator, `Tool`, `ContextualTool`, `AsyncTool`) with a
working example. This package is cheap to import: nothing here loads an HTTP client, the MCP
SDK or the built-in tools.

The daemon's side lives in small public modules of its own:
    tools.errors     relaybot's one error tree (RelaybotError and every subclass)
    tools.registry   ToolRegistry, ToolDefinition (what a model is offered), PreparedCall
    tools.config     the `[tools]` and `[mcp]` config models and the tier policy they set
    tools.plugins    plugins from modules and the `relaybot.tools` entry points
    tools.builtins   the built-in tools and their assembly from `[tools] builtins`
    tools.mcp        MCP servers' tools (imports the mcp SDK: only when servers are configured)
"""

from tools._base import AsyncTool, BackgroundJob, ContextualTool, Tier, Tool, ToolContext
from tools._function import tool
from tools._result import File, ToolResult
from tools.errors import ToolDefinitionError, ToolRetry

__all__ = [
    "AsyncTool",
    "BackgroundJob",
    "ContextualTool",
    "File",
    "Tier",
    "Tool",
    "ToolContext",
    "ToolDefinitionError",
    "ToolResult",
    "ToolRetry",
    "tool",
]
