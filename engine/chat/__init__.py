"""What a chat sees of the engine, in rooms by idea, all entered through this surface:

- ``_dispatch/``: the dispatcher (the engine as adapters call it), recovery, stalled chats;
- ``_intake/``: a message's way in, what is accepted, media, albums, quotes;
- ``_turns/``: running a turn, its delivery, streaming, progress, voice, notices, memory;
- ``_confirmations/``: confirmations asked, held and answered, standing permissions;
- ``_access/``: pairing (strangers asking to be let in), limits, who pays;
- ``_commands/``: the chat commands, /help, /console, /forget_me;
- ``_settings/``: the settings in force (``Live``, each part's in ``_sections``), the model and
  tools a turn runs with (``Tooling``), which a reload swaps, and each chat's own settings;
- ``_jobs/``: background jobs, delegation, schedules, housekeeping.
"""

from __future__ import annotations

from engine.chat._access._limits import Limits
from engine.chat._access._pairing import Pairing
from engine.chat._access._spend import DailyPictures, Meter, Payer, charged
from engine.chat._commands._commands import Commands
from engine.chat._commands._forget import ForgetMe
from engine.chat._confirmations._confirmations import Confirmations
from engine.chat._confirmations._permissions import Permissions
from engine.chat._confirmations._questions import Questions
from engine.chat._dispatch._dispatcher import Dispatcher, Parts
from engine.chat._intake._intake import Intake
from engine.chat._intake._media import MediaIntake
from engine.chat._jobs._background import Background
from engine.chat._jobs._delegate import Delegate
from engine.chat._jobs._housekeeping import Housekeeping
from engine.chat._jobs._schedules import Schedules
from engine.chat._settings._chat import ChatSettings
from engine.chat._settings._live import Live, Policy, Settings
from engine.chat._settings._sections import (
    BotSettings,
    DelegateSettings,
    LimitSettings,
    LoopOptions,
    MediaSettings,
    MemorySettings,
    PairingSettings,
    Retention,
    ScheduleSettings,
    TurnSettings,
)
from engine.chat._settings._tooling import PromptPart, Tooling
from engine.chat._turns._memory import Remembered
from engine.chat._turns._notices import Notices
from engine.chat._turns._runner import TurnRunner
from engine.chat._turns._speech import VoiceAnswers

__all__ = [
    "Background",
    "BotSettings",
    "ChatSettings",
    "Commands",
    "Confirmations",
    "DailyPictures",
    "Delegate",
    "DelegateSettings",
    "Dispatcher",
    "ForgetMe",
    "Housekeeping",
    "Intake",
    "LimitSettings",
    "Limits",
    "Live",
    "LoopOptions",
    "MediaIntake",
    "MediaSettings",
    "MemorySettings",
    "Meter",
    "Notices",
    "Pairing",
    "PairingSettings",
    "Parts",
    "Payer",
    "Permissions",
    "Policy",
    "PromptPart",
    "Questions",
    "Remembered",
    "Retention",
    "ScheduleSettings",
    "Schedules",
    "Settings",
    "Tooling",
    "TurnRunner",
    "TurnSettings",
    "VoiceAnswers",
    "charged",
]
