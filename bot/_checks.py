"""What `relaybot run` refuses and what it warns about, decided in one place.

`run`, `chat`, `check-config` and `doctor` all call :func:`validate`, so a config that
`check-config` passes is one `run` starts with, and the other way round. Parsing
(bot/config.py) catches what is malformed; this catches what is well-formed but unusable:
an unknown built-in, a workspace tool without a workspace, a secret that is not set, no
channel to run. Warnings are for configs that start but cannot work as meant, such as a
channel nobody may use, or run_command left out for want of bubblewrap.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot._config_secrets import hide_secrets
from bot._mcp_oauth import oauth_problems
from bot.config import Config, find_config
from channels import DiscordConfig, TelegramConfig
from tools import ToolDefinitionError
from tools.builtins import builtin_tools, sandbox_missing
from tools.config import DEFAULT_BUILTINS, apply_policy, check_tools
from tools.errors import ConfigError
from tools.plugins import load_plugins
from tools.registry import ToolRegistry
from tools.skills import Skills, load_skills

CHAT_ONLY = (
    "no channel is enabled: `relaybot chat` works with this config; `relaybot run` needs "
    "enabled = true under [telegram] or [discord] (and its token_env)"
)
NO_CHANNEL = (
    "no channel is enabled, so `relaybot run` has nothing to serve: set enabled = true under "
    "[telegram] or [discord] (and its token_env). `relaybot chat` needs no channel."
)


def validate(
    config: Config,
    *,
    need_channel: bool = True,
    resolve_secrets: bool = True,
    channels_used: bool = True,
) -> list[str]:
    """Raise ConfigError for what `run` would refuse (`need_channel=False` for a chat-only
    config); return the warnings, each naming its key. `resolve_secrets=False` leaves the API
    key and tokens to the caller (doctor checks each against its service);
    `channels_used=False` (`relaybot chat`, which runs none) leaves the channels' tokens out."""
    check_tools(config.tools)
    _skills_apart(config)
    channels: dict[str, TelegramConfig | DiscordConfig] = {
        "telegram": config.telegram,
        "discord": config.discord,
    }
    if resolve_secrets:
        _secrets_set(config, channels if channels_used else {})
    if need_channel and not any(section.enabled for section in channels.values()):
        raise ConfigError("", NO_CHANNEL)
    warnings = list(config._renamed)  # keys read under the names an earlier release gave them
    if "web_search" in config.tools.builtins and config.tools.web_search.backend is None:
        if tuple(config.tools.builtins) != DEFAULT_BUILTINS:  # named by the operator
            warnings.append(
                "tools.builtins names web_search, but [tools.web_search] sets no backend, so it "
                'is not offered: set backend = "searxng" and url, or "brave" / "tavily" and '
                "api_key_env"
            )
    if missing := sandbox_missing(config.tools):
        warnings.append(missing)
    for name, section in channels.items():
        if section.enabled and not section.allowed_users and not _pairs(config, name):
            warnings.append(
                f"{name}.allowed_users is empty, so nobody can use the bot on {name.title()}: "
                f'add your numeric user id, e.g. allowed_users = ["123456789"] (the bot tells '
                "you yours when you write to it)"
            )
    return warnings


def _secrets_set(config: Config, channels: dict[str, TelegramConfig | DiscordConfig]) -> None:
    """Every secret the config names is there; else one error naming each one missing."""
    checks: list[Callable[[], object]] = [
        functools.partial(endpoint.resolve_api_key, where)
        for where, endpoint in config.llm.endpoints()
    ]
    checks.append(config.search_key)
    checks += [section.resolve_token for section in channels.values() if section.enabled]
    if "telegram" in channels and config.telegram.enabled:
        checks.append(config.telegram.resolve_webhook_secret)  # webhook mode only
    missing = []
    for check in checks:
        try:
            check()
        except ConfigError as exc:
            missing.append(exc)
    if len(missing) == 1:
        raise missing[0]
    if missing:
        raise ConfigError("", "; ".join(str(exc) for exc in missing))


@dataclass(frozen=True, slots=True)
class ToolReport:
    plugin_tools: list[str]  # names of the tools the plugins gave
    problems: list[str]  # one line per plugin left out, with the likely fix
    unknown: list[str]  # `confirm` / `dm_only` names that match no tool


def tool_problems(config: Config, *, fresh: bool = False) -> ToolReport:
    """What loading the tools would report, without starting MCP servers: a name of an MCP
    server's tool (`<server>__<tool>`) in `confirm` or `dm_only` is taken on trust. `fresh`
    imports the plugin modules again (a reload)."""
    registry = ToolRegistry()
    for tool in builtin_tools(config.tools, memory=None):
        registry.register(tool)
    plugin_tools, problems = load_plugins(
        config.tools.plugins, plugin_dirs=config.plugin_dirs(), log_problems=False, fresh=fresh
    )
    loaded = []
    for tool in plugin_tools:
        try:
            registry.register(tool)
        except ToolDefinitionError as exc:  # e.g. the name of a built-in: run leaves it out
            problems.append(f"tool {tool.name!r} not registered: {exc}")
        else:
            loaded.append(tool.name)
    problems += oauth_problems(config)
    servers = tuple(f"{s.name}__" for s in config.mcp.servers)
    warnings = apply_policy(registry, config.tools)
    unknown = [w for w in warnings if not any(f"'{prefix}" in w for prefix in servers)]
    return ToolReport(loaded, problems, unknown)


def servers_startable(config: Config) -> None:
    """Raise ConfigError naming each `[[mcp.servers]]` entry that cannot even start (no such
    command, a `cwd` that is no folder, a sandbox that cannot run it). `check-config` fails on
    it; `run` starts without the server and tries it again with backoff, as it does a server
    that fails later (the program may be installed meanwhile)."""
    if not any(s.command for s in config.mcp.servers):
        return
    from tools.mcp import launch_problem  # imports the mcp SDK: only when there are servers

    problems = [
        f"server {s.name!r} cannot start: {problem}"
        for s in config.mcp.servers
        if (problem := launch_problem(s))
    ]
    if problems:
        raise ConfigError("mcp.servers", "; ".join(problems))


def configured_skills(config: Config) -> Skills:
    """The skills `[skills]` names, with their problems (reads files: call it in a thread)."""
    dirs, required = config.skill_dirs()
    return load_skills(
        dirs,
        only_in=config.skills.only_in,
        required=required,
        max_file_bytes=config.skills.max_file_kb * 1024,
        listing_tokens=config.skills.listing_tokens,
        trusted=None if config.skills.dirs is None else trusted_dirs(config, dirs),
    )


def trusted_dirs(config: Config, dirs: list[Path]) -> list[Path]:
    """The `[skills] dirs` that `[tools] trusted_sources` names (an entry with a slash is a
    folder, written as in `[skills] dirs` or as the full path)."""
    named = {Path(s).expanduser() for s in config.tools.trusted_sources if "/" in s}
    written = [d.expanduser() for d in config.skills.dirs or ()]
    return [d for d, w in zip(dirs, written, strict=True) if w in named or d in named]


def _skills_apart(config: Config) -> None:
    """Refuse a skills folder inside the workspace (or a workspace inside one): the file tools
    and run_command may write there, so a command could change what a skill tells the model."""
    workspace = config.tools.workspace
    if workspace is None:
        return
    ws = workspace.resolve()
    for folder in config.skill_dirs()[0]:
        if not folder.exists():
            continue
        where = folder.resolve()
        if where.is_relative_to(ws) or ws.is_relative_to(where):
            raise ConfigError(
                "skills.dirs",
                f"the skills folder {folder} and tools.workspace {workspace} overlap: commands "
                "could change the skills; keep the skills outside the workspace",
            )


def _pairs(config: Config, channel: str) -> bool:
    """Strangers on `channel` can ask to be let in: pairing is on and an owner can answer."""
    return config.access.pairing and bool(config.access.admins)


async def check_config(config: Config, args: argparse.Namespace) -> int:
    """`relaybot check-config`: OK and what the config sets, then every warning."""
    warnings = validate(config, need_channel=False)  # a chat-only config is one: noted below
    servers_startable(config)
    tools = await asyncio.to_thread(tool_problems, config)  # imports the plugins
    path = find_config(args.config)
    enabled = [n for n in ("telegram", "discord") if getattr(config, n).enabled]
    print(f"{path}: OK")
    print(hide_secrets(f"  model: {config.llm.model} at {config.llm.base_url}"))
    print(f"  channels: {', '.join(enabled) or 'none (relaybot chat only)'}")
    if not enabled:
        print(f"note: {CHAT_ONLY}")
    print(f"  store: {config.storage.describe()}")
    for warning in [*warnings, *tools.problems, *tools.unknown]:
        print(f"warning: {warning}")
    return 0
