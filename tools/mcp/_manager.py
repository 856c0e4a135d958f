"""McpManager: registers the tools of the configured MCP servers, under names and tiers of
relaybot's, for as long as it is entered; and, for a server that offers resources, its
`<server>__read_resource` (safe unless the server's annotations are not trusted: it reads
only what the server listed or linked)."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import mcp.types as types

from tools._base import Tier, Tool, current_context
from tools._result import ToolResult
from tools.builtins._text import clip
from tools.config import McpServerConfig
from tools.errors import ToolDefinitionError
from tools.mcp._client import McpClient
from tools.mcp._server import Server
from tools.mcp._tasks import run_task
from tools.registry import ToolRegistry

log = logging.getLogger("tools.mcp")

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
MAX_INSTRUCTIONS = 2_000  # characters of one server's instructions in the system prompt
INSTRUCTIONS_HEAD = "# MCP servers\nWhat the MCP servers whose tools you have say about using them:"


class LeftOut(NamedTuple):
    """One tool of a server that is not offered, and why (for `relaybot tools`)."""

    server: str
    name: str  # the server's own name for it
    reason: str


class McpToolInfo(NamedTuple):
    """One registered MCP tool, for `relaybot tools`: `for server, name, tier in mcp.tools()`."""

    server: str
    name: str  # the registered name, "<server>__<tool>" (the tool's `remote_name` is the server's)
    tier: Tier


def tool_name(server: str, tool: str) -> str:
    """`<server>__<tool>` with only [A-Za-z0-9_-], at most 64 characters (a long name keeps
    its start and gets a short hash, so two long names stay distinct)."""
    name = _UNSAFE.sub("_", f"{server}__{tool}")
    if len(name) > 64:
        name = f"{name[:55]}_{hashlib.sha1(name.encode()).hexdigest()[:8]}"
    return name


def tool_tier(config: McpServerConfig, spec: types.Tool) -> Tier:
    if spec.name in config.trusted_tools:
        return Tier.SAFE
    read_only = spec.annotations is not None and spec.annotations.read_only_hint is True
    return Tier.SAFE if config.trust_annotations and read_only else Tier.DESTRUCTIVE


def runs_as_task(spec: types.Tool) -> bool:
    """The server runs the tool only as an MCP task (`execution.taskSupport: required`). One
    that may run either way ("optional") is called plainly: its answer comes in the turn."""
    return spec.execution is not None and spec.execution.task_support == "required"


def _not_offered(server: Server, spec: types.Tool) -> str | None:
    """Why the server's tool `spec` is not offered to the model; None when it is."""
    if not server.config.offers(spec.name):
        return "left out by tools/exclude"
    if runs_as_task(spec) and not server.tasks_ok:
        # called plainly it fails every time; as a task, the server must say it takes one
        return (
            "it runs only as an MCP task, and the server does not announce tasks for "
            "tools/call (its tasks.requests.tools.call capability)"
        )
    return None


class McpTool(Tool):
    """One tool of one MCP server; its schema and description are the server's own. A tool the
    server runs only as a task is a background job that resumes after a restart
    (tools/mcp/_tasks.py): the model hears it started, and its result comes as a follow-up."""

    def __init__(self, server: Server, spec: types.Tool) -> None:
        self.server = server
        self.remote_name = spec.name
        self.mcp_server = server.config.name
        self.name = tool_name(server.config.name, spec.name)
        self.description = spec.description or f"{spec.name} (MCP server {server.config.name})"
        self.parameters = spec.input_schema
        self.tier = tool_tier(server.config, spec)
        annotations = spec.annotations
        self.safety = (
            annotations.model_dump(by_alias=True, exclude_none=True) if annotations else {}
        )
        self.timeout_s = server.config.call_timeout_s + 5  # the SDK's timeout answers first
        self.title = spec.title or (annotations.title if annotations else None)
        if runs_as_task(spec):  # as long as the task takes; a restart polls it again
            self.background = self.resumable = True
            self.timeout_s = None

    async def execute(self, args: dict[str, Any]) -> ToolResult:
        if self.background:
            return await run_task(self.server, self.remote_name, args, current_context())
        return await self.server.call(self.remote_name, args, current_context())

    def describe_step(self, args: dict[str, Any]) -> str | None:
        """The server's title for the tool, for people ("Step Counter"), with its first text
        argument; None without a title (the tool's name is shown)."""
        if not self.title:
            return None
        detail = next((v for v in args.values() if isinstance(v, str) and v.strip()), "")
        return f"{self.title}: {detail}" if detail else self.title

    def describe_call(self, args: dict[str, Any]) -> str:
        said = super().describe_call(args)
        return f"{self.title}: {said}" if self.title else said


class ReadResource(Tool):
    """`<server>__read_resource`: a resource the server listed, or linked or embedded in a
    tool's result, read by its URI (text for the model, a binary one sent as a file)."""

    def __init__(self, server: Server) -> None:
        self.server = server
        name = server.config.name
        self.name = tool_name(name, "read_resource")
        self.description = (
            f"Read a resource of MCP server {name} by its URI, exactly as the server listed it "
            "or a tool result linked it (e.g. '[resource test://static/resource/1 ...]')."
        )
        self.parameters = {
            "type": "object",
            "properties": {"uri": {"type": "string", "description": "The resource's URI."}},
            "required": ["uri"],
            "additionalProperties": False,
        }
        # it only reads; yet a server whose annotations are not trusted has every tool ask
        config = server.config
        trusted = config.trust_annotations or "read_resource" in config.trusted_tools
        self.tier = Tier.SAFE if trusted else Tier.DESTRUCTIVE
        self.safety = {"readOnlyHint": True}
        self.timeout_s = server.config.call_timeout_s + 5

    async def execute(self, args: dict[str, Any]) -> ToolResult:
        return await self.server.read(args["uri"])


class ServerDown(NamedTuple):
    """A configured server that is not connected, and why (the last attempt's error)."""

    server: str
    reason: str


class McpManager:
    """Connects the configured MCP servers and registers their tools; an async context manager
    (leaving it unregisters the tools and stops the servers).

    A server's tools are registered when it starts, and registered anew whenever its list
    changes (a restart that lists other tools); a server that cannot start is tried again with
    backoff and its tools appear once it does. `on_change` runs after each such change (the
    daemon applies `[tools] confirm` there again)."""

    def __init__(
        self,
        servers: Sequence[McpServerConfig],
        registry: ToolRegistry,
        *,
        on_change: Callable[[], object] = lambda: None,
        backoff_s: Sequence[float] = (1.0, 2.0, 5.0, 15.0, 60.0),
        connect_timeout_s: float = 30.0,
        keepalive_s: float = 30.0,
        client: McpClient | None = None,
    ) -> None:
        self.registry = registry
        self.on_change = on_change
        self._servers = [
            Server(
                cfg,
                backoff_s=backoff_s,
                connect_timeout_s=connect_timeout_s,
                keepalive_s=keepalive_s,
                client=client,
                on_tools=self._sync,
            )
            for cfg in servers
        ]
        self._tools: dict[str, list[McpTool | ReadResource]] = {}  # by server
        self._left_out: dict[str, list[LeftOut]] = {}

    async def __aenter__(self) -> McpManager:
        try:
            await asyncio.gather(*(s.start() for s in self._servers))
        except BaseException:
            await self._stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stop()

    def tools(self) -> list[McpToolInfo]:
        return [McpToolInfo(name, t.name, t.tier) for name, ts in self._tools.items() for t in ts]

    def left_out(self) -> list[LeftOut]:
        """The servers' tools not offered, each with the reason."""
        return [each for left in self._left_out.values() for each in left]

    async def prompt(self, channel: str, chat_id: str, user_id: str, is_private: bool) -> str:
        """The servers' instructions for the system prompt (engine.chat.PromptPart), each cut
        at MAX_INSTRUCTIONS characters; "" when none gives any (or each has them turned off)."""
        given = [
            f"## {s.config.name} (tools named {s.config.name}__*)\n"
            f"{clip(s.instructions.strip(), MAX_INSTRUCTIONS)}"
            for s in self._servers
            if s.config.instructions and s.instructions.strip() and self._tools.get(s.config.name)
        ]
        if not given:
            return ""
        return "\n\n".join([INSTRUCTIONS_HEAD, *given])

    def down(self) -> list[ServerDown]:
        """The servers not connected now, each with the last attempt's error."""
        return [
            ServerDown(s.config.name, s.error or "not connected")
            for s in self._servers
            if not s.connected
        ]

    def _sync(self, server: Server) -> None:
        """Register `server`'s tools as it lists them now, in place of those it listed before."""
        self._unregister(server.config.name)
        config = server.config
        tools: list[McpTool | ReadResource] = []
        left: list[LeftOut] = []
        for spec in server.specs:
            if reason := _not_offered(server, spec):
                left.append(LeftOut(config.name, spec.name, reason))
                continue
            try:
                tools.append(McpTool(server, spec))
            except ToolDefinitionError as exc:
                log.error("MCP server %s: tool %s left out: %s", config.name, spec.name, exc)
                left.append(LeftOut(config.name, spec.name, str(exc)))
        if server.has_resources and not config.offers("read_resource"):
            left.append(LeftOut(config.name, "read_resource", "left out by tools/exclude"))
        elif server.has_resources:
            reader = ReadResource(server)
            if any(t.name == reader.name for t in tools):
                log.warning(
                    "MCP server %s has a tool of its own named read_resource: resource links "
                    "from it cannot be read",
                    config.name,
                )
            else:
                tools.append(reader)
                server.reader = reader.name
        registered: list[McpTool | ReadResource] = []
        for tool in tools:
            try:
                self.registry.register(tool)
            except ToolDefinitionError as exc:
                log.error("MCP server %s: tool %s left out: %s", config.name, tool.name, exc)
                left.append(LeftOut(config.name, tool.name, str(exc)))
                continue
            registered.append(tool)
        self._tools[config.name], self._left_out[config.name] = registered, left
        listed = {s.name for s in server.specs} | ({"read_resource"} if server.reader else set())
        for key in ("tools", "trusted_tools", "exclude"):
            if unknown := set(getattr(config, key) or ()) - listed:
                log.warning(
                    "MCP server %s: %s names no such tool: %s",
                    config.name,
                    key,
                    ", ".join(sorted(unknown)),
                )
        self.on_change()

    def _unregister(self, server: str) -> None:
        for tool in self._tools.pop(server, []):
            if self.registry.get(tool.name) is tool:
                self.registry.unregister(tool.name)
        self._left_out.pop(server, None)

    async def _stop(self) -> None:
        for name in list(self._tools):
            self._unregister(name)
        await asyncio.gather(*(s.stop() for s in self._servers))
