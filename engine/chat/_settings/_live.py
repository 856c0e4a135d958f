"""What the engine is told by the config: the dispatcher's settings (bot/app.py builds them from
config.toml, each part's from engine/chat/_settings/_sections.py), :class:`Live`, the settings in
force, which a reload (bot/_reload.py) swaps whole, and :class:`Policy`, the owners and the tools
that always ask as the settings in force say."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine._clock import wall
from engine.chat._settings._sections import (
    BotSettings,
    DelegateSettings,
    LimitSettings,
    MediaSettings,
    MemorySettings,
    PairingSettings,
    Retention,
    ScheduleSettings,
)
from engine.chat._settings._tooling import Tooling
from engine.context import ContextSettings
from engine.models import Model, Prices


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
    max_quote_chars: int = 1_000  # of a message replied to (_intake/_quotes.py); 0: none
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
    bots: BotSettings = field(default_factory=BotSettings)  # [access] bots and the loop guard
    prices: Prices = field(default_factory=Prices)  # the built-in table and [pricing]
    console_url: str | None = None  # the web console's address ([web]); None: /console is off
    console_link_s: float = 600.0  # a /console link works this long, once

    def allowed(self, channel: str, user_id: str) -> bool:
        users = self.allowed_users.get(channel, set())
        return "*" in users or user_id in users


class Live:
    """The settings in force, and the tooling (the model and tools,
    engine/chat/_settings/_tooling.py).
    The parts that hold settings read them here, where a message, a press or a turn starts; a
    reload replaces them whole with :meth:`swap` (assignments between two steps of the event
    loop: a turn never sees half of each). `source` is what they were made from (the config
    file, as the composition root reads it: bot/app.py), swapped with them, for the parts
    outside the engine."""

    tooling: Tooling  # set by the composition root once the loop is built

    def __init__(self, settings: Settings, source: object = None) -> None:
        self.settings = settings
        self.source = source
        self.loaded_at = wall()

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
        self.loaded_at = wall()
        return old


class Policy:
    """The owners and the tools that always ask, as the settings in force say."""

    def __init__(self, live: Live) -> None:
        self.live = live

    @property
    def admins(self) -> set[str]:  # "<channel>:<user id>"
        return self.live.settings.admins

    @property
    def always_ask(self) -> set[str]:  # tools that never offer "Always"
        return self.live.settings.always_ask

    def is_admin(self, channel: str, user_id: str) -> bool:
        return f"{channel}:{user_id}" in self.admins
