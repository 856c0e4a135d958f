"""ToolRegistry: the tools one engine offers; it defines them for the model and runs them
without ever raising.

    registry = ToolRegistry()
    registry.register(my_tool)
    registry.definitions()          # [ToolDefinition(name, description, parameters, ...)]
    prepared = registry.prepare("my_tool", '{"a": 1}')   # a PreparedCall, or an error result
    result = await registry.run(prepared, ToolContext("telegram", "42", "7", send))

A :class:`ToolDefinition` is the one canonical description of a tool: each provider maps it to
its own format (engine/models), `relaybot tools` prints it, an integrator lists it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tools._base import (
    AsyncTool,
    Callback,
    ContextualTool,
    Send,
    Tier,
    Tool,
    ToolContext,
    _current,
    current_context,
    no_send,
)
from tools._result import ToolResult
from tools.errors import ToolDefinitionError, ToolRetry

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "Callback",
    "PreparedCall",
    "Send",
    "ToolDefinition",
    "ToolRegistry",
    "current_context",
    "no_send",
    "summary",
]

log = logging.getLogger(__name__)

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
DEFAULT_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class PreparedCall:
    """A call whose tool exists and whose arguments passed validation."""

    tool: Tool
    args: dict[str, Any]  # validated values, as the tool receives them
    json_args: dict[str, Any]  # the same arguments as plain JSON (stored, shown, re-validated)


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A tool as every model is offered it: the one definition each provider maps to its format.

    `parameters` is the tool's JSON Schema (an object); `strict_parameters` the variant for a
    provider's strict mode (every property required, optional ones nullable; see tools._schema),
    None when strict mode cannot express the schema; `tier` says whether a call asks first.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    strict_parameters: dict[str, Any] | None = None
    tier: Tier = Tier.SAFE

    @property
    def strict(self) -> bool:
        """Whether a provider may enforce this schema in its strict mode."""
        return self.strict_parameters is not None


# The end of a sentence: . ! or ? then a space and a capital, not after "e.g." or "i.e.".
_SENTENCE_END = re.compile(r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<=[.!?])\s+(?=[A-Z])")


def summary(description: str | None, *, sentence: bool = False) -> str:
    """A tool description's first paragraph on one line (a docstring's lines joined, never cut
    where the source wrapped), or only its first sentence."""
    text = (description or "").strip().split("\n\n")[0]
    text = " ".join(text.split())
    if sentence:
        text = _SENTENCE_END.split(text, maxsplit=1)[0]
    return text


def _snippet(raw: str, limit: int = 200) -> str:
    return raw if len(raw) <= limit else raw[:limit] + "…"


class ToolRegistry:
    """The tools one engine offers. Decorated functions and Tool classes share it."""

    def __init__(self, *, default_timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self._tools: dict[str, Tool] = {}
        self._definitions: dict[str, tuple[Tool, ToolDefinition]] = {}  # made once per tool
        self.default_timeout_s = default_timeout_s

    def register(self, tool: Tool, *, replace: bool = False) -> Tool:
        if not isinstance(tool, Tool):
            raise ToolDefinitionError(f"{tool!r} is not a Tool (decorate it with @tool)")
        if not _NAME.match(getattr(tool, "name", "") or ""):
            raise ToolDefinitionError(
                f"tool name {getattr(tool, 'name', '')!r} must match [a-zA-Z0-9_-]{{1,64}}"
            )
        if tool.name in self._tools and not replace:
            raise ToolDefinitionError(f"a tool named {tool.name!r} is already registered")
        params = getattr(tool, "parameters", None)
        if not isinstance(params, dict) or params.get("type", "object") != "object":
            raise ToolDefinitionError(f"tool {tool.name!r}: parameters must be an object schema")
        self._tools[tool.name] = tool
        return tool

    def unregister(self, name: str) -> None:
        self._tools.pop(name, None)
        self._definitions.pop(name, None)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def select(self, only: Iterable[str] | None = None) -> list[Tool]:
        """The registered tools, or those named in `only` (unknown names are skipped)."""
        if only is None:
            return list(self._tools.values())
        return [self._tools[n] for n in only if n in self._tools]

    def definitions(self, only: Iterable[str] | None = None) -> list[ToolDefinition]:
        """The definitions of the registered tools, or of those named in `only` (in that order;
        unknown names are skipped). Each is computed once per tool and tier."""
        out = []
        for tool in self.select(only):
            made = self._definitions.get(tool.name)
            if made is None or made[0] is not tool or made[1].tier is not tool.tier:
                made = self._definitions[tool.name] = (tool, _definition(tool))
            out.append(made[1])
        return out

    def summaries(self) -> list[str]:
        """One line per tool: name, tier and the first line of its description."""
        return [f"{t.name} [{t.tier}] {summary(t.description)}" for t in self._tools.values()]

    def prepare(
        self, name: str, raw_arguments: str | dict[str, Any] | None
    ) -> PreparedCall | ToolResult:
        """Find the tool and validate its arguments; an is_error ToolResult says what to fix."""
        tool = self._tools.get(name)
        if tool is None:
            return ToolResult.fail(
                f"Unknown tool {name!r}. Available tools: {', '.join(self.names()) or 'none'}.",
                retryable=True,
            )
        if isinstance(raw_arguments, dict):
            args: Any = raw_arguments
        else:
            raw = (raw_arguments or "").strip() or "{}"
            try:
                args = json.loads(raw)
            except json.JSONDecodeError as exc:
                return ToolResult.fail(
                    f"Arguments for {name!r} are not valid JSON ({exc.msg} at position "
                    f"{exc.pos}). Received: {_snippet(raw)!r}. Send a JSON object.",
                    retryable=True,
                )
        if not isinstance(args, dict):
            return ToolResult.fail(
                f"Arguments for {name!r} must be a JSON object, got {type(args).__name__}: "
                f"{_snippet(json.dumps(args))!r}.",
                retryable=True,
            )
        args = tool.from_strict(args)  # a null for an optional argument means "left out"
        try:
            validated = tool.validate(args)
        except ToolRetry as exc:
            return ToolResult.fail(f"Invalid arguments for {name!r}: {exc}", retryable=True)
        except Exception as exc:  # a broken validator is the tool's fault, not the model's
            log.exception("validating arguments for tool %s failed", name)
            return ToolResult.fail(f"Tool {name!r} failed: {type(exc).__name__}: {exc}", error=exc)
        return PreparedCall(tool, validated, args)

    async def run(
        self,
        call: PreparedCall,
        context: ToolContext | None = None,
        *,
        callback: Callback | None = None,
        timeout_s: float | None = None,
    ) -> ToolResult:
        """Run a prepared call in its own task with its own context and timeout. Never raises
        (except cancellation)."""
        tool = call.tool
        timeout = timeout_s or tool.timeout_s or self.default_timeout_s

        async def invoke() -> ToolResult:
            # Runs in a fresh task: these context variables are private to this call.
            ctx = context or ToolContext()
            _current.set(ctx)
            if isinstance(tool, ContextualTool):
                tool.set_context(ctx.channel, ctx.chat_id)
            if isinstance(tool, AsyncTool) and callback is not None:
                tool.set_callback(callback)
            result = await tool.execute(call.args)
            if not isinstance(result, ToolResult):
                result = ToolResult.ok(result)
            return result

        try:
            return await asyncio.wait_for(asyncio.ensure_future(invoke()), timeout)
        except TimeoutError as exc:
            return ToolResult.fail(
                f"Tool {tool.name!r} timed out after {timeout:g} s.", retryable=True, error=exc
            )
        except ToolRetry as exc:
            return ToolResult.fail(str(exc), retryable=True, error=exc)
        except Exception as exc:
            log.error("tool %s raised", tool.name, exc_info=exc)
            msg = f"Tool {tool.name!r} failed: {type(exc).__name__}: {exc}"
            return ToolResult.fail(msg, error=exc)

    async def execute(
        self,
        name: str,
        raw_arguments: str | dict[str, Any] | None,
        context: ToolContext | None = None,
    ) -> ToolResult:
        """Validate and run one call; every failure comes back as an is_error result."""
        prepared = self.prepare(name, raw_arguments)
        if isinstance(prepared, ToolResult):
            return prepared
        return await self.run(prepared, context)


def _definition(tool: Tool) -> ToolDefinition:
    try:
        strict: dict[str, Any] | None = tool.strict_parameters()
    except Exception:  # a schema strict mode cannot express: providers send the plain one
        log.warning("tool %s has no strict-mode schema; sending the plain one", tool.name)
        strict = None
    return ToolDefinition(tool.name, tool.description, tool.parameters, strict, tool.tier)
