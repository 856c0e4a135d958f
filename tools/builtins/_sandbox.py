"""The keeper of a tool process (a run_command command, a stdio MCP server): nothing it starts
outlives it, and what it starts cannot reach the daemon.

    python3 -I -S _sandbox.py [--hide PATH]... -- PROGRAM [ARG]...

It is a program of its own (standard library only; with -I -S it starts in about 15 ms) because
what it guarantees are properties of a process, which the daemon cannot take on itself:

- It is a child subreaper (PR_SET_CHILD_SUBREAPER), so everything PROGRAM starts stays its
  descendant however it detaches (`setsid`, a double fork). When PROGRAM exits, when the daemon
  sends SIGTERM (a time limit, a cancelled call) and when the daemon dies (PR_SET_PDEATHSIG),
  it kills every descendant with SIGKILL, reaps them, and exits with PROGRAM's status.
- PROGRAM runs in a Landlock domain when the kernel has Landlock (Linux 5.13; signal scoping
  6.12). Then it cannot open /proc/<pid>/environ or mem of the daemon or of its keeper, nor
  ptrace them, even as root; it cannot signal them (so it cannot kill its keeper and escape);
  and it cannot read the --hide paths (the daemon passes its systemd credentials directory and
  the env file beside its config: :func:`secret_paths`).
  Landlock lists what is allowed, so hiding a path means allowing every other entry of each
  directory above it: an entry created later right in one of those directories (not below
  them) is unreadable to the command too. Without Landlock the command runs unconfined, and
  the daemon's non-dumpable flag (bot/_secrets.py) still keeps its /proc entries from it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import stat
import sys
from collections.abc import Iterable, Sequence

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
# Landlock (include/uapi/linux/landlock.h); the system call numbers are the same on every arch.
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_READ_FILE, _READ_DIR = 1 << 2, 1 << 3
_SCOPE_SIGNAL = 1 << 1
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_LINUX = sys.platform == "linux"


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _syscall(number: int, *args: object) -> int:
    call = _libc().syscall
    call.restype = ctypes.c_long
    return int(call(ctypes.c_long(number), *args))


def _prctl(option: int, value: int) -> bool:
    return _libc().prctl(option, ctypes.c_ulong(value), 0, 0, 0) == 0


def secret_paths() -> list[str]:
    """What a tool process must not read: the daemon's systemd credentials directory and the
    env file its secrets came from (bot/_envfile.py sets RELAYBOT_ENV_FILE), when there are."""
    names = ("CREDENTIALS_DIRECTORY", "RELAYBOT_ENV_FILE")
    return [os.environ[name] for name in names if os.environ.get(name)]


def keeper_argv(program: Sequence[str], hidden: Iterable[str] = ()) -> list[str]:
    """The command line that runs `program` under a keeper hiding `hidden`."""
    hide = [arg for path in hidden for arg in ("--hide", str(path))]
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), *hide, "--", *program]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when there is none (or a seccomp filter hides it)."""
    if not _LINUX:
        return 0
    return max(_syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION), 0)


def readable_roots(hidden: Iterable[str]) -> list[str]:
    """The paths below which a confined process may read: "/" when nothing is hidden, else
    every entry (not a symbolic link) of each directory above a hidden path that is neither
    hidden nor above one."""
    hide = {os.path.realpath(h) for h in hidden if os.path.lexists(h)} - {"/"}
    hide = {h for h in hide if not any(h.startswith(o + "/") for o in hide)}
    if not hide:
        return ["/"]
    above = {os.path.dirname(h) for h in hide}
    for path in list(above):
        while path != "/":
            path = os.path.dirname(path)
            above.add(path)
    allowed = []
    for folder in sorted(above):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        allowed += [e.path for e in entries if e.path not in above | hide and not e.is_symlink()]
    return allowed


def confine(hidden: Iterable[str]) -> bool:
    """Put this process in a Landlock domain (see the module docstring); False if the kernel
    cannot. Call it in the child, just before exec."""
    abi = landlock_abi()
    if abi < 1:
        return False
    attr = _RulesetAttr(handled_access_fs=_READ_FILE | _READ_DIR)
    size = 8  # ABI 1-3 know only handled_access_fs
    if abi >= 6:
        attr.scoped, size = _SCOPE_SIGNAL, ctypes.sizeof(attr)
    ruleset = _syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        return False
    try:
        for path in readable_roots(hidden):
            try:
                fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
                rule = _PathBeneathAttr(_READ_FILE | (_READ_DIR if is_dir else 0), fd)
                _syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0)
            finally:
                os.close(fd)
        if not _prctl(_PR_SET_NO_NEW_PRIVS, 1):
            return False
        return _syscall(_SYS_RESTRICT_SELF, ruleset, 0) == 0
    finally:
        os.close(ruleset)


def _children() -> list[int]:
    """This process's children, from /proc (the orphans it adopted included)."""
    me, found = os.getpid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == me:
            found.append(int(name))
    return found


def _kill_children() -> None:
    for pid in _children():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _kill_all() -> None:
    """Kill every descendant: the children, then the orphans each death hands over."""
    while True:
        _kill_children()
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _start(program: list[str], hidden: list[str]) -> int:
    pid = os.fork()
    if pid:
        return pid
    try:  # the child: Python's signal dispositions undone, confined, then the program
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
        if _LINUX:
            confine(hidden)
        os.execvp(program[0], program)
    except OSError as exc:
        os.write(2, f"{program[0]}: {exc.strerror}\n".encode())
    finally:
        os._exit(127)


def main(argv: list[str]) -> int:
    hidden: list[str] = []
    while argv and argv[0] == "--hide":
        hidden.append(argv[1])
        argv = argv[2:]
    if argv[:1] != ["--"] or len(argv) < 2:
        print("usage: _sandbox.py [--hide PATH]... -- PROGRAM [ARG]...", file=sys.stderr)
        return 2
    parent = os.getppid()
    if _LINUX:
        _prctl(_PR_SET_CHILD_SUBREAPER, 1)
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the daemon died before PDEATHSIG was set
            return 1
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    pid = _start(argv[1:], hidden)
    for sig in _STOP_SIGNALS:
        signal.signal(sig, lambda *_: _kill_children())
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    status = 0
    while True:  # reap adopted orphans as they die, until the program itself ends
        try:
            reaped, status = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        if reaped == pid:
            break
    _kill_all()
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
