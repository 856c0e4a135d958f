"""McpManager: registers the tools of the configured MCP servers, under names and tiers of
relaybot's, for as long as it is entered; and, for a server that offers resources, its
`<server>__read_resource` (safe unless the server's annotations are not trusted: it reads
only what the server listed or linked)."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

import mcp.types as types

from tools._base import Tier, Tool, current_context
from tools._result import ToolResult
from tools.config import McpServerConfig
from tools.errors import ToolDefinitionError
from tools.mcp._client import McpClient
from tools.mcp._server import Server
from tools.registry import ToolRegistry

log = logging.getLogger("tools.mcp")

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


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


class McpTool(Tool):
    """One tool of one MCP server; its schema and description are the server's own."""

    def __init__(self, server: Server, spec: types.Tool) -> None:
        self.server = server
        self.remote_name = spec.name
        self.name = tool_name(server.config.name, spec.name)
        self.description = spec.description or f"{spec.name} (MCP server {server.config.name})"
        self.parameters = spec.input_schema
        self.tier = tool_tier(server.config, spec)
        annotations = spec.annotations
        self.safety = (
            annotations.model_dump(by_alias=True, exclude_none=True) if annotations else {}
        )
        self.timeout_s = server.config.call_timeout_s + 5  # the SDK's timeout answers first

    async def execute(self, args: dict[str, Any]) -> ToolResult:
        return await self.server.call(self.remote_name, args, current_context())


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


class McpManager:
    """Connects the configured MCP servers and registers their tools; an async context manager
    (leaving it unregisters the tools and stops the servers)."""

    def __init__(
        self,
        servers: Sequence[McpServerConfig],
        registry: ToolRegistry,
        *,
        backoff_s: Sequence[float] = (1.0, 2.0, 5.0, 15.0, 60.0),
        connect_timeout_s: float = 30.0,
        keepalive_s: float = 30.0,
        client: McpClient | None = None,
    ) -> None:
        self.registry = registry
        self._servers = [
            Server(
                cfg,
                backoff_s=backoff_s,
                connect_timeout_s=connect_timeout_s,
                keepalive_s=keepalive_s,
                client=client,
            )
            for cfg in servers
        ]
        self._tools: list[McpTool | ReadResource] = []

    async def __aenter__(self) -> McpManager:
        try:
            started = await asyncio.gather(*(s.start() for s in self._servers))
            for server, ok in zip(self._servers, started, strict=True):
                if ok:
                    self._register(server)
                elif server.sign_in is not None:  # registered once an owner has signed in
                    server.joined = lambda server=server: self._register(server)
        except BaseException:
            await self._stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stop()

    def tools(self) -> list[McpToolInfo]:
        return [McpToolInfo(t.server.config.name, t.name, t.tier) for t in self._tools]

    def _register(self, server: Server) -> None:
        tools: list[McpTool | ReadResource] = []
        for spec in server.specs:
            try:
                tools.append(McpTool(server, spec))
            except ToolDefinitionError as exc:
                log.error("MCP server %s: tool %s left out: %s", server.config.name, spec.name, exc)
        if server.has_resources:
            reader = ReadResource(server)
            if any(t.name == reader.name for t in tools):
                log.warning(
                    "MCP server %s has a tool of its own named read_resource: resource links "
                    "from it cannot be read",
                    server.config.name,
                )
            else:
                tools.append(reader)
                server.reader = reader.name
        for tool in tools:
            try:
                self.registry.register(tool)
            except ToolDefinitionError as exc:
                log.error("MCP server %s: tool %s left out: %s", server.config.name, tool.name, exc)
                continue
            self._tools.append(tool)
        unknown = set(server.config.trusted_tools) - {s.name for s in server.specs}
        unknown.discard("read_resource" if server.reader else "")
        if unknown:
            log.warning(
                "MCP server %s: trusted_tools names no such tool: %s",
                server.config.name,
                ", ".join(sorted(unknown)),
            )

    async def _stop(self) -> None:
        for tool in self._tools:
            if self.registry.get(tool.name) is tool:
                self.registry.unregister(tool.name)
        self._tools.clear()
        await asyncio.gather(*(s.stop() for s in self._servers))
