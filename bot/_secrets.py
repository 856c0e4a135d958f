"""The daemon's secrets kept out of reach of the processes it starts.

    config = load_config(path)
    seal_secrets(config)   # the config holds the values; the environment no longer does
    harden_process()       # /proc/<pid>/environ, mem, ... of the daemon: root only

Tool commands and stdio MCP servers run as the daemon's user. A child environment built from a
short list keeps secrets out of what they inherit, but not out of what they can read:
``/proc/<daemon>/environ`` shows the environment the daemon started with (removing a variable
from ``os.environ`` does not change it), and ``/proc/<daemon>/mem`` holds every value read.

- ``seal_secrets`` reads each secret the config names once, from a systemd credential
  (``$CREDENTIALS_DIRECTORY/<name>``, ``LoadCredential=``) or else the environment; the config
  keeps the value (a ``SecretStr``), the variable leaves ``os.environ`` (so no child inherits
  it, whatever its environment is built from) and its value is overwritten with zero bytes in
  the start-up environment block (so ``/proc/<daemon>/environ`` no longer shows it, even to
  root).
- ``harden_process`` makes the daemon non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``): the kernel
  then gives its ``/proc`` entries to root and refuses ptrace and ``/proc/<pid>/mem`` to other
  processes of the same user. It also means no core dumps, and that debuggers such as py-spy
  need root.

Reading memory as root is stopped by the Landlock domain tool processes run in
(``tools/builtins/_sandbox.py``), not here.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from collections.abc import Collection

from pydantic import SecretStr

from bot.config import Config
from channels import read_secret

log = logging.getLogger(__name__)

_PR_SET_DUMPABLE = 4
_sealed: dict[str, str] = {}  # what was sealed, by variable: a reload's config names them again


def seal_secrets(config: Config) -> list[str]:
    """Move every secret `config` names by variable into the config itself, and forget the
    variables (see the module docstring). A secret that is missing stays named, so using it
    reports the config key as before. Returns the names sealed."""
    sealed = []
    sources: list[tuple[object, str, str]] = [(config.llm, "api_key", "api_key_env")]
    sources += [(s, "token", "token_env") for s in (config.telegram, config.discord)]
    sources.append((config.tools.web_search, "api_key", "api_key_env"))
    for section, value_attr, name_attr in sources:
        name = getattr(section, name_attr)
        value = (read_secret(name) or _sealed.get(name)) if name else None
        if name and value:
            _sealed[name] = value
            setattr(section, value_attr, SecretStr(value))
            setattr(section, name_attr, None)
            sealed.append(name)
    forget_variables(sealed)
    return sealed


def forget_variables(names: Collection[str]) -> None:
    """Remove `names` from the environment, and their values from the start-up block that
    ``/proc/<pid>/environ`` shows."""
    if names and sys.platform == "linux":
        try:
            _zero_startup_values(names)
        except (OSError, ValueError, IndexError) as exc:  # an unusual /proc: the flag still holds
            log.debug("could not clear the start-up environment block: %s", exc)
    for name in names:
        os.environ.pop(name, None)


def _zero_startup_values(names: Collection[str]) -> None:
    with open("/proc/self/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    start, end = int(fields[47]), int(fields[48])  # env_start, env_end (proc(5) fields 50, 51)
    if not 0 < start < end:  # hidden (no access) or empty
        return
    wanted = {n.encode() for n in names}
    offset = 0
    for entry in ctypes.string_at(start, end - start).split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep and name in wanted:
            ctypes.memset(start + offset + len(name) + 1, 0, len(value))
        offset += len(entry) + 1


def harden_process() -> None:
    """Make this process non-dumpable (Linux; elsewhere a no-op, logged at DEBUG)."""
    if sys.platform != "linux":
        log.debug("not on Linux: the process stays dumpable")
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        reason = os.strerror(ctypes.get_errno())
        log.warning("could not make the process non-dumpable: %s", reason)
        return
    log.debug("process is non-dumpable: its /proc entries are root's")
