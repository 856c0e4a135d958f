# Left whole: a program of its own, started with python -I -S: standard library only, in one file.
"""The keeper of a tool process (a run_command command, a stdio MCP server): nothing it starts
outlives it, and what it starts cannot reach the daemon.

    python3 -I -S _sandbox.py [--hide PATH]... [--limit NAME=N]... [--procs N [--every MS]]
                              -- PROGRAM [ARG]...

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
  the env file beside its config: _bwrap.secret_paths).
  Landlock lists what is allowed, so hiding a path means allowing every other entry of each
  directory above it: an entry created later right in one of those directories (not below
  them) is unreadable to the command too. Renames across directories work from ABI 2 (Linux
  5.19: REFER). Without Landlock the command runs unconfined, and the daemon's non-dumpable
  flag (bot/_secrets.py) still keeps its /proc entries from it.
  Under bubblewrap (PROGRAM is `bwrap`, see _bwrap.py) the keeper confines nothing itself:
  Landlock would forbid bwrap's mounts, and the sandbox's own namespaces hide more.
- PROGRAM starts with the --limit rlimits (cpu seconds, as and fsize bytes) and no core
  dumps: each process of the command has them, and cannot raise them. If they cannot be set
  the command does not run.
- It counts its descendants (through /proc/<pid>/task/<tid>/children, so the cost grows with
  the command's tree, not the machine's) every --every ms (10); past --procs it kills them
  all and says so on stderr. A count, because RLIMIT_NPROC does not bind uid 0 (whatever
  namespace it is in); for other users _bwrap.nproc_argv sets it inside the sandbox too.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import stat
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
# Landlock (include/uapi/linux/landlock.h); the system call numbers are the same on every arch.
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_READ_FILE, _READ_DIR, _REFER = 1 << 2, 1 << 3, 1 << 13
_SCOPE_SIGNAL = 1 << 1
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_EVERY_MS = 10  # how often the processes are counted, unless --every says
_NICE = 10  # the command's niceness: the keeper (and the daemon) run first when it competes
_RLIMITS = {"cpu": resource.RLIMIT_CPU, "as": resource.RLIMIT_AS, "fsize": resource.RLIMIT_FSIZE}
_BWRAP_OWN = 2  # bwrap's own processes above the command: its monitor and the namespace's init
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


def keeper_argv(
    program: Sequence[str],
    hidden: Iterable[str] = (),
    *,
    limits: dict[str, int] | None = None,
    procs: int | None = None,
    every_ms: int = _EVERY_MS,
) -> list[str]:
    """The command line that runs `program` under a keeper hiding `hidden`, with the rlimits
    `limits` ("cpu" seconds, "as" and "fsize" bytes) and at most `procs` processes, counted
    every `every_ms` (a fork bomb makes hundreds in 10 ms as root; a count costs ~0.1 ms)."""
    args = [arg for path in hidden for arg in ("--hide", str(path))]
    args += [a for name, n in (limits or {}).items() for a in ("--limit", f"{name}={n}")]
    args += ["--procs", str(procs), "--every", str(every_ms)] if procs is not None else []
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), *args, "--", *program]


def set_limits(limits: dict[str, int]) -> None:
    """Set `limits` on this process (for CPU time: SIGXCPU at it, SIGKILL a second later), no
    higher than the hard limits it has; no core dumps; a lower priority (nice 10), so the
    keeper gets the CPU to count a fork bomb. Raises OSError if the kernel refuses."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.setpriority(os.PRIO_PROCESS, 0, max(os.getpriority(os.PRIO_PROCESS, 0), _NICE))
    for name, value in limits.items():
        which = _RLIMITS[name]
        _, ceiling = resource.getrlimit(which)
        hard = value + 1 if which == resource.RLIMIT_CPU else value
        if ceiling != resource.RLIM_INFINITY:
            value, hard = min(value, ceiling), min(hard, ceiling)
        resource.setrlimit(which, (value, hard))


def descendants(root: int, most: int) -> int:
    """How many descendants `root` has, counted until there are more than `most`."""
    count, todo = 0, [root]
    while todo and count <= most:
        pid = todo.pop()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:  # it just died
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                    kids = f.read().split()
            except OSError:
                continue
            count += len(kids)
            todo += map(int, kids)
    return count


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
    # REFER (ABI 2) handled and granted: else Landlock refuses every rename across directories
    refer = _REFER if abi >= 2 else 0
    attr = _RulesetAttr(handled_access_fs=_READ_FILE | _READ_DIR | refer)
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
                rule = _PathBeneathAttr(_READ_FILE | (_READ_DIR | refer if is_dir else 0), fd)
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


def _start(program: list[str], hidden: list[str], limits: dict[str, int]) -> int:
    pid = os.fork()
    if pid:
        return pid
    try:  # the child: Python's signal dispositions undone, limited, confined, then the program
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD, *_STOP_SIGNALS})
        try:
            set_limits(limits)
        except (OSError, ValueError) as exc:  # never run without them
            os.write(2, f"relaybot: cannot set the command's limits: {exc}\n".encode())
            os._exit(126)
        if _LINUX and os.path.basename(program[0]) != "bwrap":
            confine(hidden)
        os.execvp(program[0], program)
    except OSError as exc:
        os.write(2, f"{program[0]}: {exc.strerror}\n".encode())
    finally:
        os._exit(127)


def _wait(pid: int, procs: int | None, every_s: float) -> int | None:
    """Reap the children as they die until `pid` ends, and return its wait status; None if
    the processes grew past `procs` (then they are all killed)."""
    while True:
        while True:
            try:
                reaped, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return 0
            if reaped == pid:
                return status
            if reaped == 0:
                break
        if procs is not None and descendants(os.getpid(), procs) > procs:
            os.kill(pid, signal.SIGKILL)  # first: bwrap's init follows it, with its namespace
            _kill_all()
            return None
        signal.sigtimedwait({signal.SIGCHLD}, every_s if procs is not None else 3600)


@dataclass
class _Options:
    hidden: list[str] = field(default_factory=list)
    limits: dict[str, int] = field(default_factory=dict)
    procs: int | None = None
    every_ms: int = _EVERY_MS
    program: list[str] = field(default_factory=list)


def _options(argv: list[str]) -> _Options:
    """--hide paths, --limit rlimits, --procs, --every and the program; ValueError for
    anything else."""
    opts = _Options()
    while len(argv) >= 2 and argv[0] in ("--hide", "--limit", "--procs", "--every"):
        option, value, argv = argv[0], argv[1], argv[2:]
        if option == "--hide":
            opts.hidden.append(value)
        elif option == "--procs":
            opts.procs = int(value)
        elif option == "--every":
            opts.every_ms = int(value)
        else:
            name, _, number = value.partition("=")
            if name not in _RLIMITS:
                raise ValueError(f"unknown limit {name!r}")
            opts.limits[name] = int(number)
    if argv[:1] != ["--"] or len(argv) < 2:
        raise ValueError("no program")
    opts.program = argv[1:]
    return opts


def main(argv: list[str]) -> int:
    try:
        opts = _options(argv)
    except ValueError:
        print(
            "usage: _sandbox.py [--hide PATH]... [--limit cpu|as|fsize=N]... "
            "[--procs N [--every MS]] -- PROGRAM [ARG]...",
            file=sys.stderr,
        )
        return 2
    parent = os.getppid()
    if _LINUX:
        _prctl(_PR_SET_CHILD_SUBREAPER, 1)
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the daemon died before PDEATHSIG was set
            return 1
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD, *_STOP_SIGNALS})
    pid = _start(opts.program, opts.hidden, opts.limits)
    for sig in _STOP_SIGNALS:
        signal.signal(sig, lambda *_: _kill_children())
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)  # SIGCHLD stays: waited for
    own = _BWRAP_OWN if os.path.basename(opts.program[0]) == "bwrap" else 0
    procs = opts.procs
    status = _wait(pid, None if procs is None else procs + own, opts.every_ms / 1000)
    _kill_all()
    if status is None:
        print(f"relaybot: stopped: more than {procs} processes", file=sys.stderr, flush=True)
        return 128 + signal.SIGKILL
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
