"""What the engine is told by the config: the dispatcher's settings and the tool loop's options
(bot/app.py builds them from config.toml), and :class:`Live`, the settings in force, which a
reload (bot/_reload.py) swaps whole."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from engine.chat._delegate import DelegateSettings
from engine.chat._housekeeping import Retention
from engine.chat._limits import LimitSettings
from engine.chat._media import MediaSettings
from engine.chat._memory import MemorySettings
from engine.chat._schedules import ScheduleSettings
from engine.chat._tooling import Tooling
from engine.context import ContextSettings
from engine.models import Model, Prices


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
    """Strangers asking the owners to let them in (engine/chat/_pairing.py)."""

    enabled: bool = True
    expiry_s: float = 86_400.0  # an unanswered request lapses after a day
    per_hour: int = 10  # requests the owners are told of per hour, from everyone together


@dataclass(slots=True)
class Settings:
    system_prompt: str | None = None
    allowed_users: dict[str, set[str]] = field(default_factory=dict)  # channel -> ids or "*"
    dm_only: set[str] = field(default_factory=set)
    history_limit: int = 200
    shutdown_grace_s: float = 20.0
    expiry_check_s: float = 5.0
    stream: bool = False
    max_message_chars: int = 8_000
    max_quote_chars: int = 1_000  # of a message replied to (engine/chat/_quotes.py); 0: none
    tool_progress: bool = True  # a status line per tool step while a turn runs
    language: str = "en"  # relaybot's own words where the platform does not say (engine.i18n)
    admins: set[str] = field(default_factory=set)  # "<channel>:<user id>": owners
    always_ask: set[str] = field(default_factory=lambda: {"run_command", "delete_file"})
    limits: LimitSettings = field(default_factory=LimitSettings)
    tool_calls_per_turn: int | None = 25
    media: MediaSettings = field(default_factory=MediaSettings)
    schedules: ScheduleSettings = field(default_factory=ScheduleSettings)
    models: dict[str, Model] = field(default_factory=dict)  # what /settings may choose, by name
    context: ContextSettings | None = None  # None: whole histories are sent, no budget
    retention: Retention = field(default_factory=Retention)  # [storage] keep_days, retention_days
    memory: MemorySettings = field(default_factory=MemorySettings)  # [memory]
    delegate: DelegateSettings | None = None  # the delegate tool's bounds; None: no such tool
    pairing: PairingSettings = field(default_factory=PairingSettings)
    prices: Prices = field(default_factory=Prices)  # the built-in table and [pricing]
    console_url: str | None = None  # the web console's address ([web]); None: /console is off
    console_link_s: float = 600.0  # a /console link works this long, once

    def allowed(self, channel: str, user_id: str) -> bool:
        users = self.allowed_users.get(channel, set())
        return "*" in users or user_id in users


class Live:
    """The settings in force, and the tooling (the model and tools, engine/chat/_tooling.py).
    The parts that hold settings read them here, where a message, a press or a turn starts; a
    reload replaces them whole with :meth:`swap` (assignments between two steps of the event
    loop: a turn never sees half of each). `source` is what they were made from (the config
    file, as the composition root reads it: bot/app.py), swapped with them, for the parts
    outside the engine."""

    tooling: Tooling  # set by the composition root once the loop is built

    def __init__(self, settings: Settings, source: object = None) -> None:
        self.settings = settings
        self.source = source
        self.loaded_at = time.time()

    def swap(
        self, settings: Settings, tooling: Tooling | None = None, source: object = None
    ) -> Settings:
        """Put `settings` (and `tooling`, and their `source`) in force; returns the settings
        they replace."""
        old, self.settings = self.settings, settings
        if tooling is not None:
            self.tooling = tooling
        if source is not None:
            self.source = source
        self.loaded_at = time.time()
        return old
