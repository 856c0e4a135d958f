"""Configuration: one TOML file validated by pydantic. Errors name the key and the reason.

    config = load_config(path)        # find_config's file, parsed; ConfigError when it is wrong

The schema is :class:`Config`, made of the sections in bot/_sections.py (and [telegram],
[discord] from channels, [tools], [mcp] from tools.config); bot/_config_errors.py words a
mistake: the key, the reason, and what the right form looks like.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import PrivateAttr, SecretStr, ValidationError, model_validator

from bot._config_errors import explain, loose_booleans, model_in
from bot._config_secrets import hide_secrets, pasted_secrets
from bot._renamed_keys import carry_over
from bot._sections import (
    AccessConfig,
    ConsoleConfig,
    ContextSection,
    EngineConfig,
    InstanceConfig,
    LimitsConfig,
    LogConfig,
    MediaConfig,
    MemoryConfig,
    MetricsConfig,
    PriceConfig,
    SchedulesConfig,
    Section,
    SkillsConfig,
    WebConfig,
)
from bot._sections_llm import LLMConfig, ModelEndpoint
from bot._shipped import SHOW_EXAMPLE
from bot._store_place import StorageConfig, default_state_dir, xdg_config_home
from channels import DiscordConfig, TelegramConfig, read_secret, resolve_secret
from tools.config import McpConfig, ToolsConfig
from tools.errors import ConfigError

__all__ = [
    "AccessConfig",
    "Config",
    "ConsoleConfig",
    "ContextSection",
    "EngineConfig",
    "InstanceConfig",
    "LLMConfig",
    "LimitsConfig",
    "LogConfig",
    "MediaConfig",
    "MemoryConfig",
    "MetricsConfig",
    "ModelEndpoint",
    "PriceConfig",
    "SchedulesConfig",
    "SkillsConfig",
    "StorageConfig",
    "WebConfig",
    "default_state_dir",
    "find_config",
    "load_config",
    "model_in",
    "parse_config",
]

# An MCP server's `env` entry whose name says it holds a secret (GITHUB_TOKEN, API_KEY, ...).
_SECRET_NAME = re.compile(r"(?i)token|key|secret|pass|auth|cred")


class Config(Section):
    llm: LLMConfig = LLMConfig()
    storage: StorageConfig = StorageConfig()
    instance: InstanceConfig = InstanceConfig()
    engine: EngineConfig = EngineConfig()
    context: ContextSection = ContextSection()
    access: AccessConfig = AccessConfig()
    limits: LimitsConfig = LimitsConfig()
    media: MediaConfig = MediaConfig()
    pricing: dict[str, PriceConfig] = {}  # [pricing."MODEL"], over the built-in prices
    schedules: SchedulesConfig = SchedulesConfig()
    memory: MemoryConfig = MemoryConfig()
    skills: SkillsConfig = SkillsConfig()
    telegram: TelegramConfig = TelegramConfig()
    discord: DiscordConfig = DiscordConfig()
    console: ConsoleConfig = ConsoleConfig()
    tools: ToolsConfig = ToolsConfig()
    mcp: McpConfig = McpConfig()
    log: LogConfig = LogConfig()
    metrics: MetricsConfig = MetricsConfig()
    web: WebConfig = WebConfig()
    _path: Path | None = PrivateAttr(None)  # the file it was loaded from (load_config)
    _renamed: list[str] = PrivateAttr(default_factory=list)  # old keys read (bot/_renamed_keys)

    @model_validator(mode="after")
    def _numeric_user_ids(self) -> Config:
        for name in ("telegram", "discord"):
            for user in getattr(self, name).allowed_users:
                if user != "*" and not _USER_ID.match(user):
                    raise ConfigError(f"{name}.allowed_users", _not_an_id(name, user))
        return self

    @model_validator(mode="after")
    def _room_in_the_window(self) -> Config:
        window = self.llm.context_window
        output = self.llm.output_reserve()
        if window is None:
            return self
        if output is not None and output >= window // 2:
            raise ConfigError(
                "llm.max_output_tokens",
                f"{output:,} tokens for the answer leave too little of context_window "
                f"({window:,}) for the conversation; keep it under half, e.g. "
                f"max_output_tokens = {window // 4}",
            )
        budget = self.context.budget
        if budget is not None and budget + (output or 0) > window:
            raise ConfigError(
                "context.budget",
                f"{budget:,} prompt tokens plus {output or 0:,} for the answer exceed "
                f"context_window ({window:,}); leave budget unset to derive it from the window",
            )
        return self

    def secrets(self) -> list[str]:
        """Every secret this config can reach (inline, or from a credential or the environment),
        for log redaction."""
        found = []
        for section in (
            self.llm,
            *self.llm.fallback,
            self.telegram,
            self.discord,
            self.tools.web_search,
        ):
            for attr in ("api_key", "token"):
                value = getattr(section, attr, None)
                if isinstance(value, SecretStr):
                    found.append(value.get_secret_value())
            for attr in ("api_key_env", "token_env", "webhook_secret_env"):
                name = getattr(section, attr, None)
                value = read_secret(name) if name else None
                if value:
                    found.append(value)
        storage = self.storage
        url = storage.url.get_secret_value() if storage.url is not None else None
        url = url or (read_secret(storage.url_env) if storage.url_env else None)
        if url:
            from engine.store import passwords  # the store's URLs are the store's to read

            found += passwords(url)
        for server in self.mcp.servers:  # what a server is given to authenticate with
            found += server.headers.values()
            found += [v for k, v in server.env.items() if _SECRET_NAME.search(k)]
        return [s for s in found if s]

    def plugin_dirs(self) -> list[Path]:
        """Where plugin modules are looked for besides the import path: the config file's
        directory, then $XDG_CONFIG_HOME/relaybot (where `relaybot init` writes the config of
        an installed relaybot; a config not loaded from a file has only that one)."""
        found = [] if self._path is None else [self._path.parent.absolute()]
        return list(dict.fromkeys([*found, xdg_config_home() / "relaybot"]))

    def skill_dirs(self) -> tuple[list[Path], list[Path]]:
        """Where skills are looked for, and those of them that must exist (the ones named in
        `[skills] dirs`; the default folders may be absent)."""
        here = None if self._path is None else self._path.parent.absolute()
        if self.skills.dirs is not None:
            named = [d.expanduser() for d in self.skills.dirs]
            dirs = [d if d.is_absolute() or here is None else here / d for d in named]
            return dirs, dirs
        found = [xdg_config_home() / "relaybot" / "skills"]
        if here is not None:
            found.append(here / "skills")
        return list(dict.fromkeys(found)), []

    def search_key(self) -> str:
        """web_search's API key (Brave, Tavily; "" for SearXNG or no backend)."""
        search = self.tools.web_search
        if search.backend not in ("brave", "tavily"):
            return ""
        return resolve_secret("tools.web_search.api_key_env", search.api_key, search.api_key_env)


_USER_ID = re.compile(r"^\d+$")
_FIND_ID = {
    "telegram": "send /start to your bot in Telegram: it answers with your id",
    "discord": "in Discord turn on Developer Mode (Settings → Advanced), then right-click "
    "your name → Copy User ID",
}


def _not_an_id(channel: str, user: str) -> str:
    return (
        f"{user!r} is not a numeric user id; allowed_users takes user ids in quotes, "
        f'e.g. allowed_users = ["123456789"] ("*" allows everyone). To find yours, '
        f"{_FIND_ID[channel]}; the bot's refusal message shows it too."
    )


def parse_config(data: dict[str, Any]) -> Config:
    """`data` (a parsed TOML file) as a Config; a ConfigError naming every problem at once, with
    any key-shaped value in it hidden (bot/_config_secrets.py). Keys a release renamed are read
    under their old names (bot/_renamed_keys.py), each noted in `renamed`."""
    data, renamed = carry_over(data)
    problems = [(e.key, e.reason) for e in pasted_secrets(data)]
    for loose in loose_booleans(Config, data):
        reason = f"must be true or false, without quotes, e.g. {loose[-1]} = true"
        problems.append((".".join(loose), reason))
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors(include_url=False):
            key = ".".join(str(p) for p in err["loc"])
            if all(key != k for k, _ in problems):
                problems.append((key, explain(err, Config)))
    except ConfigError as exc:  # a rule across keys, checked once each key is right
        problems.append((exc.key, exc.reason))
    if not problems:
        config._renamed = renamed
        return config
    if len(problems) == 1:
        raise ConfigError(problems[0][0], hide_secrets(problems[0][1]))
    lines = [f"  {key}: {reason}" if key else f"  {reason}" for key, reason in problems]
    raise ConfigError("", hide_secrets(f"{len(problems)} problems:\n" + "\n".join(lines)))


def find_config(explicit: str | Path | None = None) -> Path:
    """-c PATH, else $RELAYBOT_CONFIG, else ./config.toml, else $XDG_CONFIG_HOME/relaybot/."""
    if explicit:
        return Path(explicit)
    if os.environ.get("RELAYBOT_CONFIG"):
        return Path(os.environ["RELAYBOT_CONFIG"])
    local = Path("config.toml")
    if local.exists():
        return local
    return xdg_config_home() / "relaybot" / "config.toml"


def load_config(path: str | Path | None = None) -> Config:
    file = find_config(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            "",
            f"no config file at {file}: run `relaybot init` to write one (it asks for the "
            f"essentials), or `{SHOW_EXAMPLE} > {file}` and edit that, or pass -c PATH",
        ) from None
    except OSError as exc:
        raise ConfigError("", f"cannot read {file}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        line = exc.object[: exc.start].count(b"\n") + 1
        raise ConfigError(
            "",
            f"{file} is not UTF-8 text: byte {exc.object[exc.start]:#04x} on line {line} "
            "(save it as UTF-8)",
        ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("", f"{file} is not valid TOML: {exc}") from None
    config = parse_config(data)
    config._path = file
    config.storage._config_file = file
    return config
