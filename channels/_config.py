"""The `[telegram]` and `[discord]` config sections, kept apart from the adapters so that
reading a config imports neither python-telegram-bot nor discord.py."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from channels._receiving_config import (
    SECRET_KEY,
    check_shards,
    check_webhook,
    listen_address_of,
    webhook_secret_of,
    webhook_url_of,
)
from tools.errors import ConfigError

DEFAULT_DISCORD_API = "https://discord.com/api/v10"


def read_secret(name: str) -> str | None:
    """The secret called `name`: the systemd credential ``$CREDENTIALS_DIRECTORY/<name>``
    (``LoadCredential=``) first, else the environment variable; None when neither holds one."""
    folder = os.environ.get("CREDENTIALS_DIRECTORY")
    if folder and name not in ("", ".", "..") and "/" not in name:
        try:
            found = (Path(folder) / name).read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            found = ""
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError("", f"cannot read the credential {name}: {exc}") from None
        if found:
            return found
    return os.environ.get(name, "").strip() or None


def resolve_secret(key: str, value: SecretStr | None, env: str | None) -> str:
    """A secret from the config, else the credential or environment variable `env` names
    (config key `key`)."""
    if value is not None:
        return value.get_secret_value()
    if not env:
        return ""
    found = read_secret(env)
    if found is None:
        creds = "CREDENTIALS_DIRECTORY" in os.environ
        also = " (nor is there a credential of that name)" if creds else ""
        raise ConfigError(key, f"the environment variable {env} is not set{also}")
    return found


class DiscordConfig(BaseModel):
    """The ``[discord]`` table."""

    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)

    enabled: bool = False
    token: SecretStr | None = None
    token_env: str | None = None
    api_base_url: str = DEFAULT_DISCORD_API
    allowed_users: list[str] = []
    allowed_guilds: list[str] = []  # empty: every guild the bot is in
    respond_in_guilds: Literal["mentions", "all"] = "mentions"
    # A mention in a server's text channel starts a thread on it and the answer goes there; in
    # the threads the bot started it answers every message, mentioned or not.
    reply_in_thread: bool = False
    # Sync slash commands to these guilds only (instant, for trying things out); empty: global.
    command_guilds: list[str] = []
    # Besides members with Manage Server, these roles (ids or names) may change /settings.
    admin_roles: list[str] = []
    shard_count: int | None = Field(None, ge=1)  # unset: Discord's recommended count
    shard_ids: list[int] | None = None  # the shards this instance connects; unset: all
    # 👀 on a message while a turn works on it, taken off once answered, ⚠️ when the turn failed.
    status_reactions: bool = False
    # A gateway connection silent this long (no event, no heartbeat ACK) is closed and resumed.
    gateway_timeout_s: float = Field(60.0, ge=1)

    @field_validator("api_base_url")
    @classmethod
    def _no_trailing_slash(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError("must be an http(s) URL")
        return url.rstrip("/")

    @model_validator(mode="after")
    def _one_token_source(self) -> DiscordConfig:
        if self.enabled and (self.token is None) == (not self.token_env):
            raise ValueError("set exactly one of token or token_env")
        check_shards(self.shard_count, self.shard_ids)
        return self

    def resolve_token(self) -> str:
        """The bot token, from the config or the environment variable it names."""
        return resolve_secret("discord.token_env", self.token, self.token_env)


class TelegramConfig(BaseModel):
    """The ``[telegram]`` section."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    token: SecretStr | None = None
    token_env: str | None = None  # name of the environment variable holding the token
    api_base_url: str = "https://api.telegram.org/bot"
    api_file_url: str | None = None  # derived from api_base_url: /bot → /file/bot
    allowed_users: list[str] = []  # read by the engine; "*" = everyone
    group_mode: Literal["mentions", "all"] = "mentions"
    poll_timeout_s: int = Field(30, ge=0, le=50)  # long-poll length of getUpdates
    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str | None = None  # the public URL Telegram posts updates to
    webhook_listen: str = "127.0.0.1:8443"  # host:port the daemon binds (behind a proxy)
    webhook_secret_env: str | None = None  # the variable holding the webhook's secret token
    # 👀 on a message while a turn works on it, taken off once answered, 😱 when the turn failed.
    status_reactions: bool = False
    # In groups, what is meant for one member (confirmations, refusals, limit notices, errors,
    # /usage, /memory, /settings, /permissions, pairing codes) only to them (ephemeral messages).
    private_replies: bool = True

    _listen = field_validator("webhook_listen")(staticmethod(listen_address_of))
    _url = field_validator("webhook_url")(staticmethod(webhook_url_of))

    @field_validator("allowed_users", mode="before")
    @classmethod
    def _ids_as_text(cls, value: Any) -> Any:
        return [str(v) for v in value] if isinstance(value, list) else value

    @model_validator(mode="after")
    def _check(self) -> TelegramConfig:
        if self.token is not None and self.token_env:
            raise ValueError("set token or token_env, not both")
        if self.enabled and self.token is None and not self.token_env:
            raise ValueError("set token or token_env when the Telegram channel is enabled")
        if self.api_file_url is None:
            head, sep, tail = self.api_base_url.rpartition("/bot")
            if not sep:
                raise ValueError("api_base_url has no /bot; set api_file_url as well")
            self.api_file_url = f"{head}/file/bot{tail}"
        check_webhook(self.mode, self.webhook_url, self.webhook_secret_env)
        return self

    def resolve_token(self) -> str:
        """The bot token, from `token` or the `token_env` environment variable."""
        return resolve_secret("telegram.token_env", self.token, self.token_env)

    def resolve_webhook_secret(self) -> str | None:
        """The secret Telegram sends with each update (None in polling mode)."""
        if self.mode != "webhook":
            return None
        return webhook_secret_of(resolve_secret(SECRET_KEY, None, self.webhook_secret_env))

    def listen_address(self) -> tuple[str, int]:
        """`webhook_listen` as (host, port)."""
        host, _, port = self.webhook_listen.rpartition(":")
        return host.strip("[]"), int(port)
