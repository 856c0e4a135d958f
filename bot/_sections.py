"""The sections of relaybot's config file, one pydantic model each ([storage], [access], ...;
[llm] in bot/_sections_llm.py).

bot/config.py puts them together into :class:`bot.config.Config` (with [telegram] and [discord]
from channels, [tools] and [mcp] from tools.config); every model refuses unknown keys.
"""

from __future__ import annotations

import os
import socket
import typing
from pathlib import Path

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
)


class Section(BaseModel):
    """A table of the config file: unknown keys are refused."""

    model_config = ConfigDict(extra="forbid")


class InstanceConfig(Section):
    """This process among several sharing one PostgreSQL store (unused with SQLite)."""

    id: str | None = None  # default: hostname:pid
    lease_s: float = Field(5.0, ge=1, le=60)  # a dead instance's chats move after this long

    def name(self) -> str:
        return self.id or f"{socket.gethostname()}:{os.getpid()}"


class MetricsConfig(Section):
    listen: str | None = None  # e.g. "127.0.0.1:9464": serves /metrics there; unset: off

    @field_validator("listen")
    @classmethod
    def _host_port(cls, listen: str | None) -> str | None:
        if listen is not None:
            host, _, port = listen.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(
                    f'{listen!r} must be a host and a port, e.g. listen = "127.0.0.1:9464"'
                )
        return listen

    def address(self) -> tuple[str, int]:
        assert self.listen is not None
        host, _, port = self.listen.rpartition(":")
        return host.strip("[]"), int(port)


class WebConfig(MetricsConfig):
    """[web]: the operator's console in the browser (bot/web/); off unless `listen` is set."""

    listen: str | None = None  # e.g. "127.0.0.1:8765"; behind a reverse proxy for the rest
    public_url: str | None = None  # the address people open (default: http://<listen>)
    link_minutes: float = Field(10, gt=0, le=1440)  # a sign-in link works this long, once
    session_hours: float = Field(12, gt=0, le=24 * 30)

    @field_validator("public_url")
    @classmethod
    def _url(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(("http://", "https://")):
            raise ValueError(
                f'{url!r} must start with http:// or https://, e.g. "https://bot.example"'
            )
        return url.rstrip("/") if url else url

    def base_url(self) -> str | None:
        """Where a sign-in link points (None: the console is off)."""
        if self.listen is None:
            return None
        return self.public_url or f"http://{self.listen}"


class ConsoleConfig(Section):
    allowed_users: list[str] = ["*"]  # the terminal is local: everyone at it is trusted


class EngineConfig(Section):
    history_limit: int = Field(200, ge=2)  # messages loaded per turn
    max_tool_output_chars: int = Field(16_000, ge=200)
    retry_budget: int = Field(3, ge=1)
    max_parallel_tools: int = Field(8, ge=1)
    shutdown_grace_s: float = Field(20.0, ge=0)
    max_quote_chars: int = Field(1_000, ge=0)  # of a message replied to, shown with it; 0: none
    tool_progress: bool = True  # a status message with a line per tool step while a turn runs
    language: typing.Literal["en", "de", "es", "fr", "ru", "zh"] = "en"  # engine.i18n: where unsaid


class ContextSection(Section):
    """[context]: how a conversation stays within the model's window (engine/context/_budget.py)."""

    budget: int | None = Field(None, ge=500)  # prompt tokens per request; None: from the window
    keep_recent_turns: int = Field(6, ge=1)  # sent whole; older tool results are cut
    tool_result_chars: int = Field(2_000, ge=200)  # older tool results are cut to this


class AccessConfig(Section):
    max_message_chars: int = Field(8_000, ge=100)  # longer messages get a short reply instead
    admins: list[str] = []  # owners: "telegram:123456789", "discord:80351110224678912"
    pairing: bool = True  # a stranger may ask; each admin gets Allow / Deny (needs admins)
    # Other bots answered in groups: "telegram:<id>", "telegram:@name", "discord:<id>".
    bots: list[str] = []
    bot_turns_per_minute: int = Field(4, ge=1)  # the loop guard, per chat: bot turns a minute
    bot_chain: int = Field(3, ge=1)  # bot messages in a row answering us that are answered
    bot_cooldown_s: float = Field(600.0, ge=0)  # once tripped, no bot is answered for this long

    @field_validator("admins", "bots")
    @classmethod
    def _qualified(cls, admins: list[str]) -> list[str]:
        for entry in admins:
            channel, _, user_id = entry.partition(":")
            if not channel.isalpha() or not user_id or " " in user_id:
                raise ValueError(
                    f"{entry!r} must name the platform and the user id, e.g. "
                    '"telegram:123456789" or "discord:80351110224678912"'
                )
        return admins


class LimitsConfig(Section):
    messages_per_minute: int = Field(20, ge=1)  # per user; more are held and answered together
    tokens_per_day: int | None = Field(None, ge=1)  # per user (prompt + completion); off: unset
    tool_calls_per_turn: int = Field(25, ge=1)
    usd_per_day: float | None = Field(None, gt=0)  # what a user's requests may cost a day
    images_per_day: int | None = Field(None, ge=0)  # pictures generate_image makes per user


class MediaConfig(Section):
    """Pictures, files and voice users send (see engine/chat/_intake/_media.py)."""

    max_image_mb: float = Field(10, gt=0)  # per picture
    max_images_per_turn: int = Field(4, ge=1)
    max_text_kb: int = Field(200, gt=0)  # per text file
    max_audio_s: int = Field(300, gt=0)  # per voice message
    transcription_model: str | None = None  # e.g. "whisper-1"; unset: voice is not accepted
    speech_model: str | None = None  # e.g. "tts-1": answers to voice are spoken too; unset: off
    speech_voice: str = "alloy"
    max_speech_chars: int = Field(1_500, ge=50)  # of an answer spoken; a longer one is cut
    image_model: str | None = None  # e.g. "dall-e-3": the generate_image tool; unset: off
    image_size: str = "1024x1024"  # the size a picture is made at unless the model asks


class PriceConfig(Section):
    """[pricing."MODEL"]: what the model costs in USD (over the built-in table's price)."""

    input_per_mtok: float | None = Field(None, ge=0)
    output_per_mtok: float | None = Field(None, ge=0)
    cached_input_per_mtok: float | None = Field(None, ge=0)  # unset: as input
    cache_write_per_mtok: float | None = Field(None, ge=0)  # unset: as input
    per_image: float | None = Field(None, ge=0)  # a picture made
    per_mchar: float | None = Field(None, ge=0)  # speech: a million characters
    per_minute: float | None = Field(None, ge=0)  # transcription: a minute of audio


class SchedulesConfig(Section):
    catch_up_s: float = Field(3600, ge=0)  # a run missed while down is run once if this late
    max_per_chat: int = Field(10, ge=1)
    min_interval_s: float = Field(300, ge=1)  # the shortest time between two runs


class MemoryConfig(Section):
    """What the bot remembers about its users (engine/chat/_turns/_memory.py)."""

    max_tokens: int = Field(600, ge=0, le=20_000)  # of each private prompt; 0: never put in


class SkillsConfig(Section):
    """Skills in the SKILL.md format (tools/skills/)."""

    # folders of skill folders; default: $XDG_CONFIG_HOME/relaybot/skills and skills/ next to
    # the config file (a relative path is taken from the config file's folder)
    dirs: list[Path] | None = None
    only_in: dict[str, list[str]] = {}  # a skill's name -> the chats it is offered in
    max_file_kb: int = Field(256, ge=1, le=10_240)  # a page of a skill's file use_skill reads
    listing_tokens: int = Field(2000, ge=100, le=50_000)  # each request's list of skills, at most

    @field_validator("only_in")
    @classmethod
    def _chats(cls, only_in: dict[str, list[str]]) -> dict[str, list[str]]:
        for name, chats in only_in.items():
            for chat in chats:
                if chat.count(":") < 1 or not chat.split(":", 1)[1]:
                    raise ValueError(
                        f"{name}: {chat!r} is not a chat; write '<platform>:<chat id>', "
                        'e.g. "telegram:-1001234567890"'
                    )
        return only_in


class LogConfig(Section):
    level: str = "INFO"
