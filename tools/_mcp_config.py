"""`[mcp]`: the MCP servers relaybot connects (tools/mcp/), each a `[[mcp.servers]]` entry:
a local server started by `command` or a remote one reached by `url`, and what of it is offered."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class McpServerConfig(BaseModel):
    """One `[[mcp.servers]]` entry: a local server (`command`) or a remote one (`url`)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=32, pattern=r"^[A-Za-z0-9_-]+$")
    command: str | None = None
    args: list[str] = []
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    transport: Literal["streamable-http", "sse"] = "streamable-http"  # of a `url` server
    tools: list[str] | None = None  # only these of the server's tools are offered (all: None)
    exclude: list[str] = []  # these of its tools are not offered
    # "oauth": a `url` server's OAuth 2.1 sign-in (tools/mcp/_oauth.py): the link goes to an
    # owner in private, the callback is served by [web], the tokens are kept encrypted
    auth: Literal["none", "oauth"] = "none"
    scopes: list[str] = []  # asked for at sign-in (default: what the server says it needs)
    client_name: str = Field("relaybot", min_length=1, max_length=100)
    trusted_tools: list[str] = []  # the server's tool names that never ask
    trust_annotations: bool = True  # false: every tool of this server asks
    instructions: bool = True  # false: the server's instructions stay out of the system prompt
    call_timeout_s: float = Field(60, gt=0)
    # the server may ask relaybot's model (MCP sampling), charged to the user whose call it is
    sampling: bool = False
    # "bwrap": a `command` server runs in run_command's sandbox (tools/builtins/_bwrap.py),
    # seeing the system read-only and these folders, the network only if sandbox_network
    sandbox: Literal["none", "bwrap"] = "none"
    sandbox_network: bool = False
    sandbox_writable: list[Path] = []  # the first is its working directory
    sandbox_readable: list[Path] = []
    cwd: Path | None = None  # a `command` server's working directory (absolute)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                "set exactly one of `command` (a local server over stdio) "
                "or `url` (a streamable HTTP server)"
            )
        if self.url is not None:
            if not self.url.startswith(("http://", "https://")):
                raise ValueError("`url` must start with http:// or https://")
            if self.args or self.env or self.sandbox != "none":
                raise ValueError(
                    "`args`, `env` and `sandbox` apply only to servers started with `command`"
                )
        folders = [*self.sandbox_writable, *self.sandbox_readable]
        if any(not p.is_absolute() for p in folders):
            raise ValueError("sandbox_writable and sandbox_readable take absolute paths")
        if self.command is not None and (self.headers or "transport" in self.model_fields_set):
            raise ValueError("`headers` and `transport` apply only to servers reached by `url`")
        if self.cwd is not None:
            if self.command is None or not self.cwd.is_absolute():
                raise ValueError("`cwd` takes an absolute path, for a server started by `command`")
            if self.sandbox == "bwrap":
                raise ValueError(
                    'with sandbox = "bwrap" the working directory is the first of '
                    "sandbox_writable: leave `cwd` out"
                )
        if self.command is not None and (self.auth != "none" or self.scopes):
            raise ValueError("`auth` and `scopes` apply only to servers reached by `url`")
        return self

    def offers(self, tool: str) -> bool:
        """Whether `tools` and `exclude` let the server's tool `tool` be offered."""
        return (self.tools is None or tool in self.tools) and tool not in self.exclude


class McpConfig(BaseModel):
    """`[mcp]`: the MCP servers whose tools the bot may use."""

    model_config = ConfigDict(extra="forbid")

    servers: list[McpServerConfig] = []

    @field_validator("servers")
    @classmethod
    def _unique_names(cls, servers: list[McpServerConfig]) -> list[McpServerConfig]:
        names = [s.name for s in servers]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"server names must be unique; repeated: {', '.join(dupes)}")
        return servers
