"""The settings of each part of a chat, as the config gives them (bot/app.py builds them from
config.toml): a leaf, so that the parts and :class:`~engine.chat._settings._live.Settings`, which
holds them all, import it and not each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine._channel import InboundMessage

MB = 1024 * 1024
DAY_S = 86_400.0


@dataclass(frozen=True, slots=True)
class LoopOptions:
    """How the tool loop runs (see engine/loop/_loop.py)."""

    max_iterations: int = 10
    max_output_chars: int = 16_000
    retry_budget: int = 3
    confirmation_timeout_s: float = 300.0
    max_parallel_tools: int = 8
    trusted_sources: tuple[str, ...] = ()  # [tools] trusted_sources (engine/loop/_containment.py)


@dataclass(frozen=True, slots=True)
class PairingSettings:
    """Strangers asking the owners to let them in (engine/chat/_access/_pairing.py)."""

    enabled: bool = True
    expiry_s: float = 86_400.0  # an unanswered request lapses after a day
    per_hour: int = 10  # requests the owners are told of per hour, from everyone together


@dataclass(frozen=True, slots=True)
class LimitSettings:
    messages_per_minute: int = 20
    tokens_per_day: int | None = None
    usd_per_day: float | None = None  # what a user's requests may cost per day (UTC)
    images_per_day: int | None = None  # pictures generate_image makes per user and day
    window_s: float = 60.0  # the rate window (tests shorten it)


@dataclass(frozen=True, slots=True)
class MediaSettings:
    """``[media]`` and ``[llm] vision``: what is accepted, and how much of it."""

    vision: bool = False
    max_image_mb: float = 10.0
    max_images_per_turn: int = 4
    max_text_kb: int = 200
    max_audio_s: int = 300
    max_speech_chars: int = 1_500  # of an answer spoken (engine/chat/_turns/_speech.py)

    @property
    def max_image_bytes(self) -> int:
        return int(self.max_image_mb * MB)

    @property
    def max_text_bytes(self) -> int:
        return self.max_text_kb * 1024


@dataclass(frozen=True, slots=True)
class MemorySettings:
    """`[memory]`: how much of it goes into a prompt (0: none)."""

    max_tokens: int = 600


@dataclass(frozen=True, slots=True)
class ScheduleSettings:
    catch_up_s: float = 3600.0  # a run missed by less than this is run once after downtime


@dataclass(frozen=True, slots=True)
class DelegateSettings:
    max_iterations: int = 8  # model requests of one delegated task
    max_tokens: int = 60_000  # prompt and completion tokens of one delegated task


@dataclass(frozen=True, slots=True)
class Retention:
    """How long settled rows (`settled_days`) and conversation history (`keep_days`, None:
    forever) are kept."""

    settled_days: float = 7.0
    keep_days: float | None = None

    @property
    def prune_every_s(self) -> float:
        shortest = min(d for d in (self.settled_days, self.keep_days) if d is not None) * DAY_S
        return min(3600.0, max(10.0, shortest / 10))


@dataclass(slots=True)
class TurnSettings:
    system_prompt: str = ""
    history_limit: int = 200
    stream: bool = False
    dm_only: set[str] = field(default_factory=set)  # tools never offered in group chats
    tool_calls_per_turn: int | None = 25  # admins are exempt
    tool_progress: bool = True  # a status line per tool step while the turn runs (_progress)


@dataclass(frozen=True, slots=True)
class BotSettings:
    """``[access] bots`` and the loop guard's bounds."""

    allowed: frozenset[str] = frozenset()  # "<channel>:<id>" or "<channel>:@<username>"
    per_minute: int = 4
    chain: int = 3
    cooldown_s: float = 600.0

    def lets_in(self, msg: InboundMessage) -> bool:
        names = {f"{msg.channel}:{msg.user_id}"}
        if msg.username:
            names.add(f"{msg.channel}:@{msg.username.lower()}")
        return bool(names & self.allowed)
