"""`relaybot install-service`: the systemd unit for this installation, printed or installed.

The units in deploy/ are the source (their sandbox is rated and tested: tests/test_unit_file.py);
a wheel carries them to ``<environment>/share/relaybot/deploy`` (pyproject.toml's data-files),
a source checkout has them next to the packages. Only ExecStart= changes: it names the
`relaybot` of the environment this command runs from (a pipx or `uv tool` venv, a checkout's
.venv; for a generation of `relaybot upgrade`, <home>/current/bin/relaybot, whichever is
current) and the config file, so the unit starts what was installed, wherever that is.

    relaybot install-service                    # the system unit, on standard output
    relaybot install-service --user --install   # ~/.config/systemd/user/relaybot.service
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from pathlib import Path

from bot._shipped import shipped
from bot.config import find_config

SYSTEM_CONFIG = Path("/etc/relaybot/config.toml")
SYSTEM_ENV = Path("/etc/relaybot/relaybot.env")  # both units' EnvironmentFile=
_UNITS = {"system": "relaybot.service", "user": "relaybot-user.service"}
_EXEC = re.compile(r"^ExecStart=.*$", re.M)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    text = "print the systemd unit for this installation, or install it (--install)"
    sp = sub.add_parser("install-service", help=text, description=text)
    sp.add_argument("--user", action="store_true", help="a user unit (no root needed)")
    sp.add_argument(
        "--install",
        action="store_true",
        help="write it to /etc/systemd/system (or ~/.config/systemd/user with --user)",
    )
    sp.add_argument("-c", "--config", default=argparse.SUPPRESS, metavar="PATH")


def deploy_file(name: str) -> Path:
    """A file of deploy/: the checkout's, else the one the installed wheel carries."""
    return shipped("deploy", name)


def executable() -> str:
    """This installation's `relaybot`, as an absolute path (symlinks kept: a venv needs them);
    for a generation `relaybot upgrade` installed, the stable path: `current`'s."""
    from bot._generations import home, running_from, stable_relaybot

    if running_from(home()):
        return str(stable_relaybot(home()))
    beside = Path(sys.executable).parent / "relaybot"
    if beside.is_file():
        return str(beside.absolute())
    found = shutil.which("relaybot")
    return str(Path(found).absolute()) if found else f"{sys.executable} -m bot"


def _quoted(path: str) -> str:
    return f'"{path}"' if any(c.isspace() for c in path) else path


def unit_text(user: bool, config: Path) -> str:
    """The unit of deploy/, its ExecStart= naming this installation and `config`."""
    text = deploy_file(_UNITS["user" if user else "system"]).read_text(encoding="utf-8")
    command = f"ExecStart={_quoted(executable())} run -c {_quoted(str(config))}"
    return _EXEC.sub(lambda _: command, text, count=1)


def _target(user: bool) -> Path:
    if not user:
        return Path("/etc/systemd/system/relaybot.service")
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(xdg) / "systemd" / "user" / "relaybot.service"


def _notes(user: bool, config: Path) -> list[str]:
    """What to do next, and what would keep the unit from starting."""
    notes = []
    found = find_config().absolute()
    if not config.exists() and found.exists():
        notes.append(f"note: copy your config there: install -D -m 644 {found} {config}")
    elif not config.exists():
        notes.append(f"note: {config} does not exist yet: relaybot init -c {config}")
    exe = executable()
    if not user and exe.startswith(("/home/", "/root/")):
        notes.append(
            f"note: the system unit's sandbox hides home directories, and {exe} is in one: "
            "install relaybot outside them (e.g. PIPX_HOME=/opt/pipx PIPX_BIN_DIR=/usr/local/bin "
            "pipx install relaybot), or use --user"
        )
    env = _target(user).parents[2] / "relaybot" / "relaybot.env" if user else SYSTEM_ENV
    if not env.exists():
        notes.append(
            f"note: the unit reads the secrets from {env} (NAME=value lines, mode 600); "
            f"an example: {deploy_file('relaybot.env.example')}"
        )
    ctl = "systemctl --user" if user else "systemctl"
    notes.append(f"then: {ctl} daemon-reload && {ctl} enable --now relaybot")
    if user:
        notes.append('and: sudo loginctl enable-linger "$USER"   # runs while you are logged out')
    return notes


def install_service(args: argparse.Namespace) -> int:
    user = bool(args.user)
    given = getattr(args, "config", None)
    if given:
        config = Path(given).expanduser().absolute()
    else:
        config = SYSTEM_CONFIG if not user else find_config().expanduser().absolute()
    try:
        text = unit_text(user, config)
    except FileNotFoundError as exc:
        print(f"relaybot: {exc}", file=sys.stderr)
        return 1
    notes = _notes(user, config)
    if not args.install:
        sys.stdout.write(text)
        for line in notes:
            print(line, file=sys.stderr)  # the unit alone on stdout: `> relaybot.service`
        return 0
    target = _target(user)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        replaced = target.exists()
        target.write_text(text, encoding="utf-8")
        target.chmod(0o644)
    except OSError as exc:
        hint = "" if user else " (a system unit needs root: sudo, or --user)"
        print(f"relaybot: cannot write {target}: {exc.strerror}{hint}", file=sys.stderr)
        return 1
    print(f"{'Replaced' if replaced else 'Wrote'} {target} (ExecStart: {executable()})")
    for line in notes:
        print(line)
    return 0
