"""What a chat sees of the engine: the dispatcher (the engine as adapters call it), a message's
way in (``_intake``), turns and their delivery, commands, confirmations, background jobs, each
chat's settings, schedules, media, limits and permissions, pairing (strangers asking to be
let in), forgetting and housekeeping; the settings in force (``Live``) and the model and tools
a turn runs with (``Tooling``), which a reload swaps.
"""

from __future__ import annotations

from engine.chat._background import Background
from engine.chat._bots import BotSettings
from engine.chat._chat_settings import ChatSettings
from engine.chat._commands import Commands
from engine.chat._confirmations import Confirmations
from engine.chat._delegate import Delegate, DelegateSettings
from engine.chat._dispatcher import Dispatcher, Parts
from engine.chat._forget import ForgetMe
from engine.chat._housekeeping import Housekeeping, Retention
from engine.chat._intake import Intake
from engine.chat._limits import Limits, LimitSettings
from engine.chat._media import MediaIntake, MediaSettings
from engine.chat._memory import MemorySettings, Remembered
from engine.chat._notices import Notices
from engine.chat._pairing import Pairing
from engine.chat._permissions import Permissions, Policy
from engine.chat._schedules import Schedules, ScheduleSettings
from engine.chat._settings import Live, LoopOptions, PairingSettings, Settings
from engine.chat._speech import VoiceAnswers
from engine.chat._spend import DailyPictures, Meter, Payer, charged
from engine.chat._tooling import PromptPart, Tooling
from engine.chat._turns import TurnRunner, TurnSettings

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
