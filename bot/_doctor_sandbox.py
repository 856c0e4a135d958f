"""`relaybot doctor`'s sandbox check: can run_command's commands run in bubblewrap here?

Finding `bwrap` is not enough: user namespaces may be turned off (a sysctl, an AppArmor
policy, a container without the rights, a systemd unit's RestrictNamespaces=), so the check
makes a sandbox for real, the one run_command would make, and runs /bin/true in it.
"""

from __future__ import annotations

import asyncio
import subprocess

from bot._doctor_base import Check, Status
from bot.config import Config
from tools.builtins import bwrap_path, bwrap_works, sandbox_missing

_NAME = "run_command"
_NONE = (
    'runs commands without a sandbox ([tools.run_command] sandbox = "none"): they can read '
    "what the daemon's user can and use the network"
)
_FIX_MISSING = 'install bubblewrap (apt-get install bubblewrap), or set sandbox = "none"'
_FIX_BROKEN = (
    "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; under the "
    "systemd unit, the drop-in in deploy/DEPLOY.md), or set [tools.run_command] "
    'sandbox = "none"'
)


async def check_sandbox(config: Config) -> list[Check]:
    """Nothing when run_command is not configured; else whether it runs in bubblewrap."""
    tools = config.tools
    if "run_command" not in tools.builtins or tools.workspace is None:
        return []
    if tools.run_command.sandbox == "none":
        return [Check(_NAME, Status.WARNING, _NONE, 'remove sandbox = "none"')]
    if sandbox_missing(tools):  # the config check says it in full
        return [Check(_NAME, Status.WARNING, "not offered: no bubblewrap", _FIX_MISSING)]
    bwrap = bwrap_path()
    assert bwrap is not None  # sandbox_missing made sure
    problem = await asyncio.to_thread(bwrap_works, bwrap)
    if problem:
        return [Check(_NAME, Status.FAILED, f"bwrap cannot make a sandbox: {problem}", _FIX_BROKEN)]
    version = await asyncio.to_thread(_version, bwrap)
    network = "with" if tools.run_command.network else "without"
    return [Check(_NAME, Status.OK, f"runs commands in {version}, {network} the network")]


def _version(bwrap: str) -> str:
    done = subprocess.run([bwrap, "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip() or "bubblewrap"
