"""relaybot's built-in tools, chosen by `[tools] builtins`, and what the daemon gives them.

    tools = builtin_tools(
        config.tools, memory=MemoryAccess(store.memory, is_admin), schedules=..., clock=clock
    )

Besides the assembly, the names the engine and the store meet the built-ins by: the stores the
tools read and write (MemoryBook, ScheduleBook, ScheduleView), whose memory a chat reads
(user_owner, group_owner), how a stored schedule is put in words (describe_schedule,
recurrence_of), and the clock remind_me tells the time by (WallClock).

A tool's module is imported when the tool is made, so a daemon imports only those it offers
(fetch_url brings an HTML parser, run_command the sandbox); the names exported from them are
imported on first use (:func:`__getattr__`).
"""

from __future__ import annotations

import copy
import importlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tools._base import Tool
from tools.builtins._images import GenerateImage, Painter, PictureRefused
from tools.builtins._memory import (
    MemoryAccess,
    MemoryBook,
    group_owner,
    memory_tools,
    user_owner,
)
from tools.builtins._recurrence import Recurrence
from tools.builtins._reminders import RemindMe, SystemWallClock, WallClock
from tools.builtins._schedules import (
    ScheduleAccess,
    ScheduleBook,
    ScheduleView,
    describe_schedule,
    recurrence_of,
    schedule_tools,
)
from tools.config import (
    BUILTIN_NAMES,
    NOTES_TOOLS,
    SCHEDULE_TOOLS,
    WORKSPACE_TOOLS,
    ToolsConfig,
    check_tools,
)

if TYPE_CHECKING:
    from tools.builtins._bwrap import bwrap_path, bwrap_works, sandbox_missing
    from tools.builtins._command import RunCommand
    from tools.builtins._fetch import FetchUrl
    from tools.builtins._netguard import refusal
    from tools.builtins._sandbox import landlock_abi
    from tools.builtins._search import SearchFailed, WebSearch
    from tools.builtins._workspace import Workspace, workspace_tools

_LATER = {  # exported, imported on first use: name -> module
    "FetchUrl": "_fetch",
    "RunCommand": "_command",
    "SearchFailed": "_search",
    "WebSearch": "_search",
    "Workspace": "_workspace",
    "bwrap_path": "_bwrap",
    "bwrap_works": "_bwrap",
    "sandbox_missing": "_bwrap",
    "landlock_abi": "_sandbox",
    "refusal": "_netguard",
    "workspace_tools": "_workspace",
}

log = logging.getLogger(__name__)


def __getattr__(name: str) -> Any:
    if name not in _LATER:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_LATER[name]}"), name)


def builtin_tools(
    config: ToolsConfig,
    *,
    memory: MemoryAccess | MemoryBook | None,
    schedules: ScheduleAccess | None = None,
    search_key: str = "",
    clock: WallClock | None = None,
    kept: Sequence[Path] = (),
) -> list[Tool]:
    """The built-ins named in `config.builtins`, in that order, as fresh instances.

    `memory` backs remember/recall/forget and `schedules` the schedule tools (None only to list
    tools: their calls then fail). web_search is left out while `[tools.web_search]` names no
    backend; `search_key` is its API key (Brave, Tavily). `clock` is what remind_me waits by
    (the system clock when not given). run_command's sandbox shows the folders `kept` (the
    skills folders) read-only.
    Raises ConfigError for an unknown name, or a workspace tool without a usable
    `tools.workspace` directory.
    """
    check_tools(config)
    wanted = list(dict.fromkeys(config.builtins))
    made: dict[str, Tool] = {}
    if "current_time" in wanted:
        from tools.builtins._time import current_time

        made["current_time"] = copy.copy(current_time)
    if "send_message" in wanted:
        from tools.builtins._chat import send_message

        made["send_message"] = copy.copy(send_message)
    if "remind_me" in wanted:
        made["remind_me"] = RemindMe(clock)
    if "fetch_url" in wanted:
        from tools.builtins._fetch import FetchUrl

        made["fetch_url"] = FetchUrl(
            max_bytes=config.fetch_max_bytes,
            max_chars=config.fetch_max_chars,
            timeout_s=config.fetch_timeout_s,
            allow_private=config.allow_private_urls,
            allow_hosts=config.fetch_allow_hosts,
        )
    if any(n in NOTES_TOOLS for n in wanted):
        made.update((t.name, t) for t in memory_tools(memory))
    if any(n in SCHEDULE_TOOLS for n in wanted):
        made.update((t.name, t) for t in schedule_tools(schedules))
    if "web_search" in wanted and config.web_search.backend is not None:
        from tools.builtins._search import WebSearch

        made["web_search"] = WebSearch(config.web_search, search_key)
    if any(n in WORKSPACE_TOOLS for n in wanted):
        from tools.builtins._bwrap import sandbox_missing, sandbox_refused
        from tools.builtins._command import RunCommand
        from tools.builtins._workspace import Workspace, workspace_tools

        assert config.workspace is not None  # check_tools made sure
        workspace = Workspace(config.workspace)
        made.update(workspace_tools(workspace))
        if missing := sandbox_missing(config) or sandbox_refused(config):
            log.warning("%s", missing)
        else:
            made["run_command"] = RunCommand(
                workspace.root,
                timeout_s=config.command_timeout_s,
                output_max=config.command_output_max,
                config=config.run_command,
                kept=kept,
            )
    return [made[name] for name in wanted if name in made]


__all__ = [
    "BUILTIN_NAMES",
    "NOTES_TOOLS",
    "WORKSPACE_TOOLS",
    "FetchUrl",
    "GenerateImage",
    "MemoryAccess",
    "MemoryBook",
    "Painter",
    "PictureRefused",
    "Recurrence",
    "RemindMe",
    "RunCommand",
    "ScheduleAccess",
    "ScheduleBook",
    "ScheduleView",
    "SearchFailed",
    "SystemWallClock",
    "WallClock",
    "WebSearch",
    "Workspace",
    "builtin_tools",
    "bwrap_path",
    "bwrap_works",
    "describe_schedule",
    "group_owner",
    "landlock_abi",
    "memory_tools",
    "recurrence_of",
    "refusal",
    "sandbox_missing",
    "schedule_tools",
    "user_owner",
    "workspace_tools",
]
