"""The env file beside the config (``relaybot.env`` next to ``config.toml``): the secrets a config
names by variable (``api_key_env``, ``token_env``, ...), kept out of the config and out of the
shell's startup files, so a new shell (or a service) needs no exports.

`relaybot init` writes it (mode 600, ``NAME=value`` lines, the format of systemd's
``EnvironmentFile=``: the user unit reads the same file when the config is in
~/.config/relaybot), and every `relaybot` command reads it at start. A variable already set in
the environment wins over the file, so an export or a unit's own ``Environment=`` still decides.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from pathlib import Path

ENV_FILE = "relaybot.env"
_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")


def env_file(config: Path) -> Path:
    """Where the env file of `config` is: beside it."""
    return config.expanduser().absolute().parent / ENV_FILE


def read_env(path: Path) -> dict[str, str]:
    """The file's ``NAME=value`` lines (quotes around a value removed; comments, blank and
    other lines skipped); empty when there is no file or it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    found = {}
    for line in text.splitlines():
        if (m := _LINE.match(line)) is None or line.lstrip().startswith("#"):
            continue
        value = m.group(2)
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        found[m.group(1)] = value
    return found


def load_env(config: Path) -> list[str]:
    """Set the variables of `config`'s env file that the environment does not set already;
    the names set. The file is named in RELAYBOT_ENV_FILE, so the commands and MCP servers the
    daemon starts cannot read it (tools/builtins/_sandbox.py hides it, with Landlock)."""
    path = env_file(config)
    found = read_env(path)
    if found:
        os.environ.setdefault("RELAYBOT_ENV_FILE", str(path))
        if (mode := stat.S_IMODE(path.stat().st_mode)) & 0o077:
            print(
                f"relaybot: note: {path} holds secrets and others may read it (mode "
                f"{mode:o}): chmod 600 {path}",
                file=sys.stderr,
            )
    taken = []
    for name, value in found.items():
        if name not in os.environ:
            os.environ[name] = value
            taken.append(name)
    return taken


def write_env(path: Path, values: dict[str, str]) -> None:
    """Put `values` into the env file at `path` (mode 600): a name already there gets the new
    value in its line, the others are added; the file's other lines stay."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    left = dict(values)
    for i, line in enumerate(lines):
        if (m := _LINE.match(line)) is not None and m.group(1) in left:
            lines[i] = f"{m.group(1)}={left.pop(m.group(1))}"
    lines += [f"{name}={value}" for name, value in left.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # also when it existed with a wider mode
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
