"""run_command is offered only with its sandbox: without bubblewrap it is left out (unless
`[tools.run_command] sandbox = "none"`), and check-config, doctor and the log say why."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.sandbox import require_bwrap
from tests.test_doctor import config_text
from tools.builtins import builtin_tools
from tools.config import RunCommandConfig, ToolsConfig

NOT_OFFERED = "run_command is not offered: bubblewrap is not installed"


def offered(workspace: Path, sandbox: str) -> list[str]:
    config = ToolsConfig(
        builtins=["read_file", "run_command"],
        workspace=workspace,
        run_command=RunCommandConfig(sandbox=sandbox),
    )
    return [tool.name for tool in builtin_tools(config, memory=None)]


def test_without_bwrap_run_command_is_left_out_unless_sandbox_is_none(
    tmp_path, monkeypatch, caplog
):
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on it
    assert offered(tmp_path, "bwrap") == ["read_file"]
    assert NOT_OFFERED in caplog.text
    assert offered(tmp_path, "none") == ["read_file", "run_command"]


async def doctor(cfg: Path, env: dict[str, str]) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "bot", "doctor", "-c", str(cfg)),
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode()


async def test_doctor_says_whether_commands_run_in_the_sandbox(tmp_path: Path, llm: FakeOpenAI):
    require_bwrap()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with FakeTelegram() as tg, FakeDiscord() as dc:
        cfg = tmp_path / "config.toml"
        base = config_text(tmp_path, llm.base_url, tg, dc)
        base += f'[tools]\nbuiltins = ["run_command"]\nworkspace = "{workspace}"\n'
        cfg.write_text(base)
        env = {"TG_TOKEN": tg.token, "DC_TOKEN": dc.token}
        code, out = await doctor(cfg, env)
        assert code == 0, out
        assert "run_command: OK - runs commands in bubblewrap " in out
        assert "without the network" in out

        code, out = await doctor(cfg, {**env, "PATH": str(tmp_path)})  # no bwrap on PATH
        assert code == 0, out
        assert f"config: WARNING - {NOT_OFFERED}" in out
        assert "run_command: WARNING - not offered: no bubblewrap" in out
        assert "fix: install bubblewrap" in out

        cfg.write_text(base + '[tools.run_command]\nsandbox = "none"\n')
        code, out = await doctor(cfg, {**env, "PATH": str(tmp_path)})
        assert code == 0 and NOT_OFFERED not in out
        assert "run_command: WARNING - runs commands without a sandbox" in out


@pytest.mark.parametrize(
    ("table", "error"),
    [
        ('sandbox = "docker"', "must be 'bwrap' or 'none'"),
        ('readable = ["data"]', "readable folders must be absolute paths: data"),
        ("processes = 0", "greater than 0"),
    ],
    ids=["sandbox", "relative", "processes"],
)
def test_a_bad_run_command_table_is_a_clear_error(tmp_path, table, error):
    from bot.config import load_config
    from tools.errors import ConfigError

    cfg = tmp_path / "config.toml"
    cfg.write_text(f"[tools.run_command]\n{table}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(cfg)
    assert error in str(caught.value) and "tools.run_command" in str(caught.value)


def test_a_readable_folder_that_does_not_exist_is_a_clear_error(tmp_path):
    from tools.config import check_tools
    from tools.errors import ConfigError

    config = ToolsConfig(
        builtins=["run_command"],
        workspace=tmp_path,
        run_command=RunCommandConfig(readable=[tmp_path / "sdk"]),
    )
    with pytest.raises(ConfigError) as caught:
        check_tools(config)
    assert str(caught.value) == f"tools.run_command.readable: no such folder: {tmp_path / 'sdk'}"


async def test_where_bwrap_cannot_make_a_sandbox_run_command_is_left_out(tmp_path: Path) -> None:
    """A place that forbids user namespaces (a systemd unit's RestrictNamespaces=, a sysctl), made
    for real: a user namespace of its own whose limit of further user namespaces is 0."""
    require_bwrap()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        f'[storage]\npath = "{tmp_path / "state.db"}"\n'
        f'[tools]\nbuiltins = ["read_file", "run_command"]\nworkspace = "{workspace}"\n'
    )
    listing = f"{sys.executable} -m bot tools -c {cfg}"
    forbidding = f"echo 0 > /proc/sys/user/max_user_namespaces && exec {listing}"
    for script, offered in ((listing, True), (forbidding, False)):
        proc = await asyncio.create_subprocess_exec(
            *("unshare", "-Ur", "sh", "-c", script),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()
        names = [line.split()[0] for line in out.decode().splitlines() if line[:1].isalpha()]
        assert ("run_command" in names) is offered, out.decode()
        assert ("bubblewrap cannot make a sandbox here" in err.decode()) is not offered
