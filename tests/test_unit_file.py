"""The systemd units in deploy/: their settings, and systemd-analyze's opinion where it exists."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
SYSTEM_UNIT = DEPLOY / "relaybot.service"
USER_UNIT = DEPLOY / "relaybot-user.service"
ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.needs("systemd-analyze")  # tests/prerequisites.py


def parse_unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """{section: {key: [values in order]}}; keys may repeat, comments are dropped."""
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"{path.name}: {raw!r} outside a section"
        assert not line.endswith("\\"), "continuation lines are not used"
        key, sep, value = line.partition("=")
        assert sep, f"{path.name}: not a key=value line: {raw!r}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def one(section: dict[str, list[str]], key: str) -> str:
    values = section.get(key)
    assert values is not None, f"{key}= missing"
    assert len(values) == 1, f"{key}= set {len(values)} times"
    return values[0]


def runnable_copy(unit: Path, tmp_path: Path) -> Path:
    """The unit with ExecStart pointing at an existing program (verify checks it exists)."""
    text = re.sub(r"(?m)^ExecStart=\S+", "ExecStart=/bin/true", unit.read_text())
    copy = tmp_path / "relaybot.service"
    copy.write_text(text)
    return copy


@pytest.fixture(scope="module")
def system() -> dict[str, dict[str, list[str]]]:
    return parse_unit(SYSTEM_UNIT)


@pytest.fixture(scope="module")
def user() -> dict[str, dict[str, list[str]]]:
    return parse_unit(USER_UNIT)


def test_service_basics(system):
    service = system["Service"]
    assert one(service, "Type") == "notify"
    assert one(service, "NotifyAccess") == "main"
    assert one(service, "WatchdogSec") == "60s"
    assert (
        one(service, "ExecStart")
        == "/opt/relaybot/.venv/bin/relaybot run -c /etc/relaybot/config.toml"
    )
    assert one(service, "EnvironmentFile") == "/etc/relaybot/relaybot.env"
    assert one(service, "StateDirectory") == "relaybot"
    assert one(service, "DynamicUser") == "yes"
    assert one(service, "Restart") == "on-failure"
    assert one(service, "RestartSec") == "5s"
    assert one(service, "TimeoutStopSec") == "30s"
    assert one(service, "KillSignal") == "SIGTERM"
    assert one(system["Unit"], "StartLimitIntervalSec")
    assert int(one(system["Unit"], "StartLimitBurst")) > 1
    assert one(system["Install"], "WantedBy") == "multi-user.target"


HARDENING = {
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "PrivateUsers": "yes",
    "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
    "CapabilityBoundingSet": "",
    "AmbientCapabilities": "",
    "SystemCallArchitectures": "native",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectKernelLogs": "yes",
    "ProtectControlGroups": "yes",
    "ProtectClock": "yes",
    "ProtectHostname": "yes",
    "ProtectProc": "invisible",
    "ProcSubset": "pid",
    "RestrictNamespaces": "yes",
    "RestrictRealtime": "yes",
    "RestrictSUIDSGID": "yes",
    "LockPersonality": "yes",
    "MemoryDenyWriteExecute": "yes",
    "RemoveIPC": "yes",
    "UMask": "0077",
    "DevicePolicy": "closed",
    "KeyringMode": "private",
}


@pytest.mark.parametrize(("key", "value"), HARDENING.items())
def test_hardening(system, key, value):
    assert one(system["Service"], key) == value


def _bytes(size: str) -> int:
    units = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    return int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)


@pytest.mark.parametrize("unit", [SYSTEM_UNIT, USER_UNIT, DEPLOY / "relaybot@.service"])
def test_a_memory_limit_kills_and_restarts(unit):
    """Past MemoryMax= the kernel kills the largest process: a tool's or MCP server's leaves
    the service running (OOMPolicy=continue), relaybot's own is restarted (Restart= counts a
    kill by the OOM killer as a failure; tests/test_faults_memory.py shows nothing is lost)."""
    service = parse_unit(unit)["Service"]
    high, most = _bytes(one(service, "MemoryHigh")), _bytes(one(service, "MemoryMax"))
    assert 256 * 2**20 <= high < most, "room above relaybot's ~100 MiB; throttled before killed"
    assert one(service, "OOMPolicy") == "continue"
    assert one(service, "Restart") in ("on-failure", "on-abnormal", "always")


LANDLOCK = "landlock_create_ruleset landlock_add_rule landlock_restrict_self"
SYSCALL_FILTER = ["@system-service", "~@privileged @resources", LANDLOCK]


def test_syscall_filter_and_network(system):
    service = system["Service"]
    # systemd 252's @system-service lacks Landlock, which confines tool processes
    assert service["SystemCallFilter"] == SYSCALL_FILTER
    assert "IPAddressDeny" not in service  # it talks to chat and LLM APIs on the internet


def test_credentials_are_documented():
    text = SYSTEM_UNIT.read_text()
    assert "#LoadCredential=OPENAI_API_KEY:/etc/relaybot/credentials/" in text
    assert "$CREDENTIALS_DIRECTORY/<name>" in text


def test_user_unit(user):
    service = user["Service"]
    assert one(service, "Type") == "notify"
    assert one(service, "NotifyAccess") == "main"
    assert one(service, "WatchdogSec") == "60s"
    assert one(service, "ExecStart").endswith("/bin/relaybot run -c %E/relaybot/config.toml")
    assert one(service, "StateDirectory") == "relaybot"
    assert one(service, "NoNewPrivileges") == "yes"
    assert service["SystemCallFilter"] == SYSCALL_FILTER
    # system services only; a new /proc needs a PID namespace the user manager does not make
    for key in ("DynamicUser", "User", "ProtectProc", "ProcSubset", "RemoveIPC"):
        assert key not in service, key
    assert one(user["Install"], "WantedBy") == "default.target"


USER_HARDENING = {
    # a user namespace, which the mount, /dev, IPC and hostname settings below need
    "PrivateUsers": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "read-only",
    "ReadWritePaths": "-%h/relaybot/workspace",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "PrivateIPC": "yes",
    "PrivateMounts": "yes",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectKernelLogs": "yes",
    "ProtectControlGroups": "yes",
    "ProtectClock": "yes",
    "ProtectHostname": "yes",
    "KeyringMode": "private",
    "CapabilityBoundingSet": "",
    "AmbientCapabilities": "",
    # process flags and seccomp
    "NoNewPrivileges": "yes",
    "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
    "RestrictNamespaces": "yes",
    "RestrictRealtime": "yes",
    "RestrictSUIDSGID": "yes",
    "LockPersonality": "yes",
    "MemoryDenyWriteExecute": "yes",
    "SystemCallArchitectures": "native",
    "UMask": "0077",
}


@pytest.mark.parametrize(("key", "value"), USER_HARDENING.items())
def test_user_unit_hardening(user, key, value):
    assert one(user["Service"], key) == value


def _our_complaints(output: str, unit: Path) -> list[str]:
    return [line for line in output.splitlines() if unit.name in line or str(unit) in line]


@needs_analyze
@pytest.mark.parametrize("mode", ["system", "user"])
def test_systemd_analyze_verify(tmp_path, mode):
    unit = runnable_copy(SYSTEM_UNIT if mode == "system" else USER_UNIT, tmp_path)
    cmd = [ANALYZE, "verify", str(unit)] if mode == "system" else [ANALYZE, "--user", "verify"]
    if mode == "user":
        cmd.append(str(unit))
    env = {"PATH": "/usr/bin:/bin", "XDG_RUNTIME_DIR": str(tmp_path), "HOME": str(tmp_path)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    output = proc.stdout + proc.stderr
    if "Failed to initialize manager" in output:
        pytest.skip(f"systemd-analyze cannot run here: {output.strip()}")
    # unknown keys and bad values are only warnings (exit 0), each naming the file
    assert proc.returncode == 0, output
    assert _our_complaints(output, unit) == []


def exposure(unit: Path, tmp_path: Path, *, user: bool) -> float:
    """systemd-analyze's offline exposure rating of `unit` (lower is better)."""
    assert ANALYZE is not None
    helptext = subprocess.run(
        [ANALYZE, "security", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    if "--offline" not in helptext:
        pytest.skip("this systemd-analyze has no security --offline (systemd < 250)")
    scope = ["--user"] if user else []
    env = {"PATH": "/usr/bin:/bin", "XDG_RUNTIME_DIR": str(tmp_path), "HOME": str(tmp_path)}
    proc = subprocess.run(
        [ANALYZE, "security", *scope, "--offline=true", "--no-pager", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    match = re.search(r"Overall exposure level for \S+: (\d+(?:\.\d+)?)", proc.stdout)
    assert match, proc.stdout + proc.stderr
    return float(match.group(1))


@needs_analyze
def test_systemd_analyze_security(tmp_path):
    assert exposure(runnable_copy(SYSTEM_UNIT, tmp_path), tmp_path, user=False) < 2.0


@needs_analyze
def test_systemd_analyze_security_of_the_user_unit(tmp_path):
    # 6.3 MEDIUM before the user unit was hardened; 1.7 after (systemd 252). The offline rating
    # assumes root, so it still counts User= although the unit runs unprivileged.
    assert exposure(runnable_copy(USER_UNIT, tmp_path), tmp_path, user=True) < 2.0


TEMPLATE = DEPLOY / "relaybot@.service"


def test_the_template_runs_the_system_unit_once_per_instance(system):
    """relaybot@.service (several instances on one PostgreSQL store): the system unit's
    settings and sandbox, each instance with its own state directory."""
    template = parse_unit(TEMPLATE)
    service = template["Service"]
    differ = {
        k
        for k in system["Service"].keys() | service.keys()
        if system["Service"].get(k) != service.get(k)
    }
    assert differ == {"StateDirectory", "WorkingDirectory", "Environment"}
    assert one(service, "StateDirectory") == "relaybot/%i"
    assert one(service, "WorkingDirectory") == "%S/relaybot/%i"
    assert "HOME=%S/relaybot/%i" in service["Environment"]
    assert "%i" in one(template["Unit"], "Description")


@needs_analyze
def test_systemd_analyze_verify_an_instance_of_the_template(tmp_path):
    text = re.sub(r"(?m)^ExecStart=\S+", "ExecStart=/bin/true", TEMPLATE.read_text())
    (tmp_path / "relaybot@.service").write_text(text)
    unit = tmp_path / "relaybot@2.service"
    unit.symlink_to(tmp_path / "relaybot@.service")
    env = {"PATH": "/usr/bin:/bin", "XDG_RUNTIME_DIR": str(tmp_path), "HOME": str(tmp_path)}
    proc = subprocess.run(
        [ANALYZE, "verify", str(unit)], capture_output=True, text=True, env=env, timeout=60
    )
    output = proc.stdout + proc.stderr
    if "Failed to initialize manager" in output:
        pytest.skip(f"systemd-analyze cannot run here: {output.strip()}")
    assert proc.returncode == 0, output
    assert [line for line in output.splitlines() if "relaybot@" in line] == []
