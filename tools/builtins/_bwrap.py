"""The bubblewrap sandbox a command (run_command, a stdio MCP server) runs in: what it sees.

    keeper_argv(bwrap_argv(bwrap_path(), Jail((workspace,)), ["/bin/sh", "-c", cmd]), ...)

A new mount namespace built from nothing: the system read-only (/usr and the /bin, /lib*, /sbin
beside it, and from /etc only the files programs need: an allowlist, because a denylist misses
the secret a package adds tomorrow: shadow files, SSH host keys, TLS private keys, relaybot's
own config); the `writable` directories at their own paths; a fresh /proc of its own PID
namespace and a minimal /dev. Nothing else: not the store, the config, the credentials
directory, any home directory, /run, /var or the daemon's /proc; the root itself is read-only.
/tmp and /var/tmp are links to `<first writable>/.tmp` (also $TMPDIR; when a shown folder is
below /tmp, only $TMPDIR), so a file made in a temp directory can be renamed into the
workspace (a rename across mounts fails with "Invalid cross-device link").

Namespaces of its own: user (capabilities only over itself, no nested user namespaces), PID,
IPC, UTS, cgroup, and the network unless `network` (then it shares the host's, 127.0.0.1 too).
The keeper (_sandbox.py) stays outside as the reaper and the process counter. Its child is
bwrap's own process; --die-with-parent kills the sandbox's init when that dies, and the
init's death kills everything in the PID namespace.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tools.config import ToolsConfig

# /etc entries a program may need (names, users, DNS, TLS roots, time zone, the loader,
# Debian's alternatives), and nothing that holds a secret.
ETC_SHOWN = (
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "crypto-policies",
    "debian_version",
    "gai.conf",
    "gitconfig",
    "group",
    "host.conf",
    "hosts",
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "locale.alias",
    "locale.conf",
    "localtime",
    "magic",
    "magic.mime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "passwd",
    "pki/ca-trust",
    "pki/tls/certs",
    "protocols",
    "python3",
    "resolv.conf",
    "services",
    "ssl/certs",
    "ssl/openssl.cnf",
    "timezone",
    "zoneinfo",
)
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
TMP = ".tmp"  # the temp directory, inside the first writable directory
_SANDBOX_UID = 65534  # who a command run by root is inside (nobody): the same user outside


def nproc_argv(program: Sequence[str], processes: int) -> list[str]:
    """`program` with RLIMIT_NPROC set inside the sandbox by util-linux's `prlimit` (as it is
    when `prlimit` is not installed), room left for bwrap's init and one process more, so
    the keeper's count sees the excess and kills the command.

    Inside, because the kernel counts a user's processes per user namespace: the sandbox's
    own are counted there, where outside it would be every process of the daemon's user (its
    threads too). It binds no one running as root (uid 0 is exempt), and it counts threads.
    """
    prlimit = shutil.which("prlimit")
    if prlimit is None or not prlimit.startswith(("/usr/", "/bin/")):
        return list(program)
    return [prlimit, f"--nproc={processes + 2}", "--", *program]


@dataclass(frozen=True, slots=True)
class Jail:
    """What a sandboxed command may see: `writable` directories (the first is its working
    directory and holds its temp directory), `readable` ones, and the network or not."""

    writable: tuple[Path, ...]
    readable: tuple[Path, ...] = ()
    network: bool = False


def secret_paths() -> list[str]:
    """What a tool process must never read: the daemon's systemd credentials directory, the
    env file its secrets came from (bot/_envfile.py sets RELAYBOT_ENV_FILE), and the key of the
    MCP servers' OAuth tokens (bot/_mcp_oauth.py sets RELAYBOT_MCP_OAUTH_KEY), when there are.
    The keeper hides them under Landlock (sandbox = "none"); bubblewrap shows neither."""
    names = ("CREDENTIALS_DIRECTORY", "RELAYBOT_ENV_FILE", "RELAYBOT_MCP_OAUTH_KEY")
    return [os.environ[name] for name in names if os.environ.get(name)]


def bwrap_path() -> str | None:
    """Where bubblewrap is installed; None when it is not."""
    return shutil.which("bwrap")


def bwrap_argv(bwrap: str, jail: Jail, program: Sequence[str]) -> list[str]:
    """The command line that runs `program` inside `jail` (creating its temp directory)."""
    args = [bwrap, "--unshare-user", "--disable-userns", "--unshare-pid", "--unshare-ipc"]
    args += ["--unshare-uts", "--hostname", "sandbox", "--unshare-cgroup-try"]
    args += [] if jail.network else ["--unshare-net"]
    args += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if os.getuid() == 0:  # root outside; inside, not root (programs act differently as root)
        args += ["--uid", str(_SANDBOX_UID), "--gid", str(_SANDBOX_UID)]
    for folder in SYSTEM_DIRS:
        if os.path.islink(folder):  # merged /usr: /bin -> usr/bin
            args += ["--symlink", os.readlink(folder), folder]
        elif os.path.isdir(folder):
            args += ["--ro-bind", folder, folder]
    for name in ETC_SHOWN:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    args += ["--proc", "/proc", "--dev", "/dev"]
    for path in jail.readable:
        args += ["--ro-bind", str(path), str(path)]
    for path in jail.writable:
        args += ["--bind", str(path), str(path)]
    if jail.writable:
        home = jail.writable[0]
        tmp = home / TMP
        tmp.mkdir(exist_ok=True)
        bound = [*jail.readable, *jail.writable]
        for link in ("/tmp", "/var/tmp"):  # unless a bound path is below it (tests: /tmp)
            if not any(path.is_relative_to(link) for path in bound):
                args += ["--symlink", str(tmp), link]
        args += ["--setenv", "TMPDIR", str(tmp), "--setenv", "HOME", str(home)]
        args += ["--chdir", str(home)]
    else:
        args += ["--tmpfs", "/tmp", "--chdir", "/"]
    args += ["--remount-ro", "/"]  # bwrap's root is a tmpfs: nothing may land there
    return [*args, "--", *program]


def sandbox_missing(config: ToolsConfig) -> str | None:
    """Why run_command, named in `config.builtins`, is not offered; None when it is."""
    if "run_command" not in config.builtins or config.run_command.sandbox == "none":
        return None
    if bwrap_path() is not None:
        return None
    return (
        "run_command is not offered: bubblewrap is not installed (apt-get install bubblewrap), "
        'and it runs commands only in its sandbox unless [tools.run_command] sandbox = "none"'
    )


def sandbox_refused(config: ToolsConfig) -> str | None:
    """Why run_command is not offered although bubblewrap is installed: it cannot make a sandbox
    in this process's place (user namespaces turned off, a systemd unit's RestrictNamespaces=).
    Tried once per process (the place does not change while it runs)."""
    if "run_command" not in config.builtins or config.run_command.sandbox == "none":
        return None
    bwrap = bwrap_path()
    if bwrap is None or (problem := _bwrap_works_here(bwrap)) is None:
        return None
    return (
        f"run_command is not offered: bubblewrap cannot make a sandbox here ({problem}); "
        "`relaybot doctor` says how to allow it (deploy/DEPLOY.md under the systemd units)"
    )


@functools.cache
def _bwrap_works_here(bwrap: str) -> str | None:
    return bwrap_works(bwrap)


def bwrap_works(bwrap: str) -> str | None:
    """None if bwrap can make a sandbox here; else what it says (user namespaces turned off,
    a seccomp filter, a container without the rights). Blocks: call it in a thread."""
    try:
        done = subprocess.run(
            bwrap_argv(bwrap, Jail(writable=()), ["/bin/true"]),
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode == 0:
        return None
    return done.stderr.decode(errors="replace").strip() or f"exit code {done.returncode}"
