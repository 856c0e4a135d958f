"""The `[discord]` config section, kept apart from the adapter so that reading a config never
imports discord.py."""

from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, ConfigDict, SecretStr, field_validator, model_validator

from tools import ConfigError

DEFAULT_DISCORD_API = "https://discord.com/api/v10"


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
    # Sync slash commands to these guilds only (instant, for trying things out); empty: global.
    command_guilds: list[str] = []

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
        return self

    def resolve_token(self) -> str:
        """The bot token, from the config or the environment variable it names."""
        if self.token is not None:
            return self.token.get_secret_value()
        value = os.environ.get(self.token_env or "", "").strip()
        if not value:
            raise ConfigError(
                "discord.token_env", f"the environment variable {self.token_env} is not set"
            )
        return value
