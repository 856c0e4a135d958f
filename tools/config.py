"""The `[tools]` and `[mcp]` configuration (the MCP servers' in tools/_mcp_config.py), and the
tier/chat-type policy it sets.

[tools]
builtins = ["current_time", "fetch_url", "remind_me"]
confirm = ["fetch_url"]        # always ask before these run
dm_only = ["recall"]           # never offered in group chats (default: the notes tools)
plugins = ["my_tools"]
workspace = "/srv/relaybot/workspace"

[[mcp.servers]]
name = "files"
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv/share"]
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from tools._base import Tier
from tools._mcp_config import McpConfig, McpServerConfig
from tools.errors import ConfigError
from tools.registry import ToolRegistry

# The built-ins enabled when `[tools] builtins` is not set: all safe, none needs a workspace.
DEFAULT_BUILTINS = (
    "current_time",
    "fetch_url",
    "remind_me",
    "send_message",
    "remember",
    "recall",
    "forget",
    "schedule_task",
    "list_schedules",
    "cancel_schedule",
    "web_search",  # offered only once [tools.web_search] names a backend
)
# Tools that read or write one user's own data: in a group, any member's message (an injected
# one too) runs the turn, so they are offered in DMs only unless the operator sets `dm_only`.
PERSONAL_TOOLS = ("remember", "recall", "forget")


NOTES_TOOLS = ("remember", "recall", "forget")
WORKSPACE_TOOLS = (
    "list_files",
    "read_file",
    "write_file",
    "delete_file",
    "send_file",
    "run_command",
)
SCHEDULE_TOOLS = ("schedule_task", "list_schedules", "cancel_schedule")
BUILTIN_NAMES = (
    "current_time",
    "fetch_url",
    "remind_me",
    "send_message",
    *NOTES_TOOLS,
    *WORKSPACE_TOOLS,
    *SCHEDULE_TOOLS,
    "web_search",
    "delegate",  # made by the engine (engine/chat/_jobs/_delegate.py): it runs a tool loop
)
SEARCH_URLS = {  # the public APIs; a SearXNG instance has no default
    "brave": "https://api.search.brave.com/res/v1/web/search",
    "tavily": "https://api.tavily.com/search",
}


class WebSearchConfig(BaseModel):
    """`[tools.web_search]`: the search backend web_search asks (none: the tool is not offered).

    The operator's own `url` is trusted (a self-hosted SearXNG on a private address is normal);
    the public APIs are reached through fetch_url's SSRF guard. Results are not fetched.
    """

    model_config = ConfigDict(extra="forbid")

    backend: Literal["searxng", "brave", "tavily"] | None = None
    url: str | None = None  # searxng: the instance's base URL; brave, tavily: their API's
    api_key: SecretStr | None = Field(None, repr=False)  # brave, tavily: better api_key_env
    api_key_env: str | None = None  # brave, tavily: the environment variable holding the key
    max_results: int = Field(5, ge=1, le=20)
    safe_search: Literal["off", "moderate", "strict"] = "moderate"  # SearXNG, Brave
    timeout_s: float = Field(10, gt=0)

    @model_validator(mode="after")
    def _complete(self) -> WebSearchConfig:
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError("`url` must start with http:// or https://")
        if self.backend == "searxng" and self.url is None:
            raise ValueError(
                'backend "searxng" needs `url`, the base URL of your instance, e.g. '
                'url = "http://127.0.0.1:8888" (its JSON format must be enabled)'
            )
        if self.api_key is not None and self.api_key_env:
            raise ValueError("set api_key or api_key_env, not both")
        if self.backend in SEARCH_URLS and not (self.api_key_env or self.api_key):
            raise ValueError(
                f'backend "{self.backend}" needs `api_key_env`, the environment variable '
                f'holding its API key, e.g. api_key_env = "{self.backend.upper()}_API_KEY"'
            )
        return self

    @property
    def endpoint(self) -> str:
        """The URL web_search requests."""
        if self.url is not None:
            return self.url
        assert self.backend in SEARCH_URLS
        return SEARCH_URLS[self.backend]


class RunCommandConfig(BaseModel):
    """`[tools.run_command]`: the sandbox its commands run in (tools/builtins/_bwrap.py) and
    their limits, each per process of the command except `processes`."""

    model_config = ConfigDict(extra="forbid")

    sandbox: Literal["bwrap", "none"] = "bwrap"  # "none": not offered without bubblewrap
    network: bool = False  # the host's network, 127.0.0.1 included
    readable: list[Path] = []  # folders shown read-only besides the system's
    cpu_s: int = Field(60, gt=0)  # CPU seconds
    memory_mb: int = Field(1024, gt=0)  # address space
    file_size_mb: int = Field(256, gt=0)  # the largest file it may write
    processes: int = Field(64, gt=0)  # alive at once, all of the command's together

    @field_validator("readable")
    @classmethod
    def _absolute(cls, value: list[Path]) -> list[Path]:
        paths = [p.expanduser() for p in value]
        relative = [str(p) for p in paths if not p.is_absolute()]
        if relative:
            raise ValueError(f"readable folders must be absolute paths: {', '.join(relative)}")
        return paths


class ToolsConfig(BaseModel):
    """`[tools]`: which tools exist, which always ask, which are offered only in DMs."""

    model_config = ConfigDict(extra="forbid")

    builtins: list[str] = Field(default_factory=lambda: list(DEFAULT_BUILTINS))
    confirm: list[str] = []  # force confirmation (never lowers a built-in's destructive tier)
    # tools not offered in group chats; a list set here replaces the default (`[]`: none)
    dm_only: list[str] = Field(default_factory=lambda: list(PERSONAL_TOOLS))
    plugins: list[str] = []  # importable module names
    # destructive tools whose confirmation never offers "Always in this chat"
    always_ask: list[str] = ["run_command", "delete_file"]
    # what containment trusts (SECURITY.md): domains whose pages, "mcp:NAME" servers whose
    # output, may steer calls without the requester's press
    trusted_sources: list[str] = []
    confirmation_timeout_s: float = Field(300, gt=0)
    workspace: Path | None = None  # the only directory the file tools and run_command touch
    allow_private_urls: bool = False  # turn fetch_url's SSRF guard off (tests, trusted LANs)
    fetch_allow_hosts: list[str] = []  # host names fetch_url may reach even if private
    fetch_max_bytes: int = Field(2_000_000, gt=0)  # download cap per fetch
    fetch_max_chars: int = Field(8_000, gt=0)  # text given to the model per fetch
    fetch_timeout_s: float = Field(20, gt=0)
    command_timeout_s: float = Field(60, gt=0)
    command_output_max: int = Field(8_000, gt=0)  # characters of run_command output kept
    default_timeout_s: float = Field(60, gt=0)
    strict_schemas: bool = False
    delegate_max_iterations: int = Field(8, ge=1, le=50)  # model requests of a delegated task
    delegate_max_tokens: int = Field(60_000, ge=1_000)  # its tokens, counted in the user's usage
    web_search: WebSearchConfig = WebSearchConfig()
    run_command: RunCommandConfig = RunCommandConfig()

    @field_validator("trusted_sources")
    @classmethod
    def _sources(cls, value: list[str]) -> list[str]:
        for source in value:
            if "://" in source or not source.strip():
                raise ValueError(
                    f"{source!r} is not a source: write a domain without its scheme "
                    "('example.org'), 'mcp:NAME' for an MCP server, or a skills folder "
                    "with a slash ('./skills')"
                )
        return value

    @field_validator("workspace")
    @classmethod
    def _expand(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None

    def offered(self, names: Iterable[str], *, group: bool) -> list[str]:
        """The tools from `names` to offer in a chat (`dm_only` ones are left out of groups)."""
        hidden = set(self.dm_only) if group else set()
        return [n for n in names if n not in hidden]


def check_tools(config: ToolsConfig) -> None:
    """Raise ConfigError for a `[tools]` table the daemon cannot start with: an unknown
    built-in, a workspace tool without an existing `workspace` directory, or a
    `[tools.run_command] readable` folder that does not exist.

    The one check behind `relaybot run` (through `builtin_tools`), `check-config` and `doctor`.
    """
    for name in config.builtins:
        if name not in BUILTIN_NAMES:
            import difflib  # only for a mistake

            close = difflib.get_close_matches(name, BUILTIN_NAMES, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(
                "tools.builtins",
                f"unknown built-in tool {name!r}; {hint}the built-ins are "
                f"{', '.join(BUILTIN_NAMES)} (other tools come from plugins or MCP servers)",
            )
    needing = [n for n in dict.fromkeys(config.builtins) if n in WORKSPACE_TOOLS]
    if needing and config.workspace is None:
        raise ConfigError(
            "tools.workspace",
            f"{', '.join(needing)} need a workspace directory: set tools.workspace, "
            "or remove them from tools.builtins",
        )
    if needing and config.workspace is not None and not config.workspace.is_dir():
        raise ConfigError("tools.workspace", f"{config.workspace} is not an existing directory")
    missing = [str(p) for p in config.run_command.readable if not p.exists()]
    if "run_command" in needing and missing:
        raise ConfigError("tools.run_command.readable", f"no such folder: {', '.join(missing)}")


def apply_policy(registry: ToolRegistry, config: ToolsConfig) -> list[str]:
    """Force confirmation on the `confirm` tools; return a warning for each name in `confirm`
    or `dm_only` that matches no registered tool. Call it once every tool is registered."""
    warnings = []
    for name in config.confirm:
        tool = registry.get(name)
        if tool is None:
            warnings.append(f"tools.confirm: no tool named {name!r}")
        else:
            tool.tier = Tier.DESTRUCTIVE
    if "dm_only" in config.model_fields_set:  # the default names tools that may be disabled
        unknown = [n for n in config.dm_only if n not in registry]
        warnings += [f"tools.dm_only: no tool named {n!r}" for n in unknown]
    return warnings


__all__ = [
    "BUILTIN_NAMES",
    "McpConfig",
    "McpServerConfig",
]
