"""The daemon's secrets against the processes it starts, played through the real `relaybot`
entry point (a subprocess, like tests/test_cli.py): the scripted model makes run_command read
the daemon's /proc entries and the systemd credentials directory, and a careless plugin starts
a child with the daemon's whole environment. No secret value reaches a tool result, the fake
LLM's requests or the logs."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot._secrets import seal_secrets
from bot.config import parse_config
from channels._config import read_secret
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tools.builtins import landlock_abi
from tools.errors import ConfigError

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux /proc and prctl")

PROBE_PLUGIN = '''
import ctypes, os, subprocess
from tools import tool

@tool
def inspect_daemon() -> dict:
    """What a plugin inside the daemon sees."""
    dumpable = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)  # PR_GET_DUMPABLE
    child = subprocess.run(["env"], capture_output=True, text=True).stdout  # inherits it all
    return {"dumpable": dumpable, "names": sorted(os.environ), "child_env": child}
'''

# Reads every readable mapping of the daemon's memory, looking for the secrets' shapes.
MEM_SCAN = r"""
import re, sys
pid = sys.argv[1]
try:
    maps = open(f"/proc/{pid}/maps").read().splitlines()
    mem = open(f"/proc/{pid}/mem", "rb", 0)
except OSError as exc:
    sys.exit(f"mem: {exc.strerror}")
found = set()
for line in maps:
    span, perms = line.split()[:2]
    lo, hi = (int(x, 16) for x in span.split("-"))
    if perms.startswith("r"):
        try:
            mem.seek(lo)
            found.update(re.findall(rb"sk-cred-\w+|AAsecret\w+", mem.read(hi - lo)))
        except (OSError, OverflowError, ValueError):
            pass
print("mem found:", sorted(found))
"""


class Daemon:
    """Files and secrets for one `relaybot chat` run."""

    def __init__(self, tmp_path: Path, llm: FakeOpenAI, run_command: str = "") -> None:
        self.key = f"sk-cred-{secrets.token_hex(12)}"  # the LLM key, a systemd credential
        self.token = f"7000000001:AAsecret{secrets.token_hex(12)}"  # a bot token, from env
        self.credentials = tmp_path / "credentials"
        self.credentials.mkdir()
        (self.credentials / "RB_LLM_KEY").write_text(self.key + "\n")
        self.workspace = tmp_path / "ws"
        self.workspace.mkdir()
        plugins = tmp_path / "plugins"
        plugins.mkdir()
        (plugins / "relaybot_probe.py").write_text(PROBE_PLUGIN)
        self.config = tmp_path / "config.toml"
        self.config.write_text(
            f"""
[llm]
base_url = "{llm.base_url}"
api_key_env = "RB_LLM_KEY"
model = "fake-model"
max_retries = 0

[telegram]
enabled = true
token_env = "RB_TG_TOKEN"
allowed_users = ["1"]

[storage]
path = "{tmp_path / "state.db"}"

[tools]
builtins = ["run_command"]
workspace = "{self.workspace}"
plugins = ["relaybot_probe"]

[tools.run_command]
{run_command}
"""
        )
        self.env = {
            **os.environ,
            "PYTHONPATH": str(plugins),
            "CREDENTIALS_DIRECTORY": str(self.credentials),
            "RB_TG_TOKEN": self.token,
        }

    async def chat(self, stdin: bytes) -> tuple[str, str]:
        proc = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "bot", "chat", "-c", str(self.config)),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env,
        )
        out, err = await asyncio.wait_for(proc.communicate(stdin), 60)
        assert proc.returncode == 0, err.decode()
        return out.decode(), err.decode()

    def leaked(self, text: str) -> list[str]:
        return [s for s in (self.key, self.token) if s in text]


def tool_output(llm: FakeOpenAI, n: int) -> str:
    """The content of the `n`th tool result the model was given."""
    results = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    return results[n]["content"]


async def test_the_daemon_is_non_dumpable_and_forgets_secret_variables(tmp_path, llm):
    daemon = Daemon(tmp_path, llm)
    llm.script(tool_call("inspect_daemon", {}), text("inspected"))
    out, err = await daemon.chat(b"look around\n")
    assert out.splitlines() == ["inspected"]
    assert llm.auth_headers[0] == f"Bearer {daemon.key}"  # the key came from the credential
    seen = json.loads(tool_output(llm, 0))
    assert seen["dumpable"] == 0  # its /proc entries are root's; no ptrace by the same user
    assert "RB_TG_TOKEN" not in seen["names"] and "RB_LLM_KEY" not in seen["names"]
    assert "PATH=" in seen["child_env"]
    assert daemon.leaked(json.dumps(llm.requests)) == [] and daemon.leaked(err) == []


@pytest.mark.skipif(
    landlock_abi() < 1,
    reason="hiding the credentials directory (and, for root, the daemon's memory) needs Landlock",
)
async def test_a_hostile_command_reads_no_secret_of_the_daemon(tmp_path, llm):
    # in bubblewrap it sees none of this: tests/test_security_sandbox.py
    daemon = Daemon(tmp_path, llm, run_command='sandbox = "none"')
    attack = f"""
D=$PPID  # up the parents to the daemon
until tr '\\0' ' ' < /proc/$D/cmdline | grep -q '^[^ ]* -m bot chat ' || [ "$D" -le 1 ]; do
  D=$(awk '/^PPid/ {{print $2}}' /proc/$D/status)
done
[ "$D" -gt 1 ] && echo "daemon found"
echo "--- environ"; tr '\\0' '\\n' < /proc/$D/environ
echo "--- mem"; {sys.executable} -c '{MEM_SCAN}' $D
echo "--- credentials"; ls "$CREDENTIALS_DIRECTORY" {daemon.credentials}
cat {daemon.credentials}/RB_LLM_KEY
echo "--- env"; env
"""
    llm.script(tool_call("run_command", {"command": attack}), text("no luck"))
    out, err = await daemon.chat(b"please run this\ny\n")
    assert "no luck" in out.splitlines()
    result = tool_output(llm, 0)
    assert "daemon found" in result and "--- env" in result  # every step ran
    # /proc/<daemon>/environ: unreadable (non-root) or the value zeroed (root)
    environ = result.split("--- environ")[1].split("--- mem")[0]
    assert "RB_TG_TOKEN=\n" in environ or "Permission denied" in environ
    assert "mem: Permission denied" in result
    credentials = result.split("--- credentials")[1]
    where = daemon.credentials
    assert f"ls: cannot open directory '{where}': Permission denied" in credentials
    assert f"cat: {where}/RB_LLM_KEY: Permission denied" in credentials
    assert daemon.leaked(result) == []
    assert daemon.leaked(json.dumps(llm.requests)) == [] and daemon.leaked(err + out) == []


# -- reading and sealing secrets, in process ------------------------------------------------


def test_a_credential_wins_over_the_environment(tmp_path, monkeypatch):
    (tmp_path / "LLM_KEY").write_text("from-credential\n")
    monkeypatch.setenv("LLM_KEY", "from-environment")
    monkeypatch.setenv("OTHER", "only-in-environment")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    assert read_secret("LLM_KEY") == "from-credential"
    assert read_secret("OTHER") == "only-in-environment"
    assert read_secret("../LLM_KEY") is None and read_secret("MISSING") is None


def test_sealing_moves_secrets_into_the_config_and_out_of_the_environment(monkeypatch):
    monkeypatch.setenv("RB_SEAL_KEY", "sk-sealed-123456")
    monkeypatch.setenv("RB_SEAL_TOKEN", "123:sealed-token")
    config = parse_config(
        {
            "llm": {"api_key_env": "RB_SEAL_KEY"},
            "telegram": {"enabled": True, "token_env": "RB_SEAL_TOKEN"},
            "discord": {"enabled": True, "token_env": "RB_SEAL_MISSING"},
        }
    )
    assert seal_secrets(config) == ["RB_SEAL_KEY", "RB_SEAL_TOKEN"]
    assert "RB_SEAL_KEY" not in os.environ and "RB_SEAL_TOKEN" not in os.environ
    assert config.llm.resolve_api_key() == "sk-sealed-123456"
    assert config.telegram.resolve_token() == "123:sealed-token"
    assert isinstance(config.llm.api_key, SecretStr) and "sealed" not in repr(config)
    assert set(config.secrets()) == {"sk-sealed-123456", "123:sealed-token"}
    with pytest.raises(ConfigError, match=r"^discord\.token_env: .*RB_SEAL_MISSING"):
        config.discord.resolve_token()  # a missing one is still reported by its key
