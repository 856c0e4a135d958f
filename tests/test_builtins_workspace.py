"""Workspace files and run_command: confined to the workspace, limited in time and output;
renames work (`git mv`, a temp file moved in), in bubblewrap and without it."""

from __future__ import annotations

import asyncio
import os

import pytest

from tests.sandbox import SANDBOXES, require_bwrap, usable_sandbox
from tools.builtins import WORKSPACE_TOOLS, builtin_tools
from tools.config import RunCommandConfig, ToolsConfig
from tools.registry import ToolRegistry


@pytest.fixture
def workspace(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "docs").mkdir()
    (root / "docs" / "a.txt").write_text("alpha\n")
    (tmp_path / "secret.txt").write_text("top secret")
    return root


@pytest.fixture
def registry(workspace):
    return workspace_tools(workspace, usable_sandbox())


def workspace_tools(workspace, sandbox: str) -> ToolRegistry:
    config = ToolsConfig(
        builtins=list(WORKSPACE_TOOLS),
        workspace=workspace,
        command_timeout_s=1,
        command_output_max=1_000,
        run_command=RunCommandConfig(sandbox=sandbox),
    )
    registry = ToolRegistry()
    for tool in builtin_tools(config, memory=None):
        registry.register(tool)
    return registry


async def test_list_read_write_delete(registry, workspace):
    listed = await registry.execute("list_files", {})
    assert listed.for_llm == "docs/"
    assert (await registry.execute("list_files", {"path": "docs"})).for_llm == "a.txt (6 bytes)"
    assert (await registry.execute("read_file", {"path": "docs/a.txt"})).for_llm == "alpha\n"
    wrote = await registry.execute("write_file", {"path": "new/b.txt", "content": "beta"})
    assert wrote.for_llm == "Wrote 4 characters to new/b.txt."
    await registry.execute("write_file", {"path": "new/b.txt", "content": "!", "append": True})
    assert (workspace / "new" / "b.txt").read_text() == "beta!"
    assert (await registry.execute("delete_file", {"path": "new/b.txt"})).for_llm.startswith(
        "Deleted"
    )
    assert not (workspace / "new" / "b.txt").exists()


async def test_write_and_delete_ask_first_and_say_what_they_do(registry):
    write = registry.prepare("write_file", {"path": "x.txt", "content": "hello"})
    assert write.tool.destructive
    assert write.tool.describe_call(write.args) == (
        "Write 5 characters to the workspace file x.txt:\nhello"
    )
    delete = registry.prepare("delete_file", {"path": "x.txt"})
    assert delete.tool.destructive
    assert delete.tool.describe_call(delete.args) == "Delete the workspace file x.txt"
    assert not registry.get("read_file").destructive and not registry.get("list_files").destructive


async def test_long_files_are_read_in_pieces(registry, workspace):
    (workspace / "long.txt").write_text("é" * 25_000)
    first = await registry.execute("read_file", {"path": "long.txt"})
    assert first.for_llm.endswith("[… cut; call read_file with offset=10000 for more]")
    last = await registry.execute("read_file", {"path": "long.txt", "offset": 20_000})
    assert last.for_llm == "é" * 5_000
    (workspace / "blob.bin").write_bytes(b"\x00\x01binary")
    assert "binary file" in (await registry.execute("read_file", {"path": "blob.bin"})).for_llm


@pytest.mark.parametrize(
    "path",
    ["../secret.txt", "docs/../../secret.txt", "/etc/passwd", "~/secret.txt", "docs/../.."],
)
@pytest.mark.parametrize("tool", ["read_file", "write_file", "delete_file", "list_files"])
async def test_escapes_are_refused(registry, tmp_path, tool, path):
    args = {"path": path, "content": "pwned"} if tool == "write_file" else {"path": path}
    result = await registry.execute(tool, args)
    assert result.is_error and result.retryable
    assert "refused" in result.for_llm or "absolute" in result.for_llm
    assert (tmp_path / "secret.txt").read_text() == "top secret"


async def test_symlinks_out_of_the_workspace_are_refused(registry, workspace, tmp_path):
    (workspace / "link.txt").symlink_to(tmp_path / "secret.txt")
    (workspace / "outdir").symlink_to(tmp_path)
    for tool, args in [
        ("read_file", {"path": "link.txt"}),
        ("write_file", {"path": "link.txt", "content": "pwned"}),
        ("read_file", {"path": "outdir/secret.txt"}),
        ("write_file", {"path": "outdir/new.txt", "content": "pwned"}),
        ("delete_file", {"path": "outdir/secret.txt"}),
        ("list_files", {"path": "outdir"}),
    ]:
        result = await registry.execute(tool, args)
        assert result.is_error and "symbolic link leads outside" in result.for_llm, (tool, args)
    assert (tmp_path / "secret.txt").read_text() == "top secret"
    assert not (tmp_path / "new.txt").exists()


async def test_symlinks_inside_the_workspace_work(registry, workspace):
    (workspace / "alias.txt").symlink_to(workspace / "docs" / "a.txt")
    assert (await registry.execute("read_file", {"path": "alias.txt"})).for_llm == "alpha\n"
    await registry.execute("delete_file", {"path": "alias.txt"})
    assert not (workspace / "alias.txt").is_symlink()
    assert (workspace / "docs" / "a.txt").exists()  # the link went, not its target


async def test_run_command_in_the_workspace(registry, workspace):
    call = registry.prepare("run_command", {"command": "pwd; cat docs/a.txt; exit 3"})
    assert call.tool.destructive
    assert call.tool.describe_call(call.args) == "Run pwd; cat docs/a.txt; exit 3 in the workspace"
    assert call.tool.describe_action(call.args) == ("pwd; cat docs/a.txt; exit 3")
    result = await registry.run(call)
    assert result.for_llm == f"Exit code 3.\n{workspace.resolve()}\nalpha\n"


async def test_run_command_gets_no_secrets_from_the_environment(registry, monkeypatch):
    monkeypatch.setenv("RELAYBOT_TELEGRAM_TOKEN", "123:secret")
    result = await registry.execute("run_command", {"command": "env"})
    assert "secret" not in result.for_llm and "PATH=" in result.for_llm


async def test_run_command_timeout_kills_the_process_group(registry, workspace):
    marker = workspace / "survivor"
    command = f"(sleep 1.5; touch {marker}) & echo started; sleep 30"
    start = asyncio.get_running_loop().time()
    result = await registry.execute("run_command", {"command": command})
    assert asyncio.get_running_loop().time() - start < 1.5
    assert result.for_llm == "Timed out after 1 s; the command was killed.\nstarted\n"
    await asyncio.sleep(1.0)
    assert not marker.exists()  # the background child died with its group


async def test_run_command_output_is_capped(registry):
    result = await registry.execute("run_command", {"command": "yes | head -c 100000"})
    assert result.for_llm.startswith("Exit code 0.\ny\ny\n")
    assert result.for_llm.endswith("[… output cut: 100000 bytes in all]")
    assert len(result.for_llm) < 1_100


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_git_mv_and_a_rename_from_a_temp_file_work(workspace, sandbox):
    if sandbox == "bwrap":
        require_bwrap()
    registry = workspace_tools(workspace, sandbox)
    registry.get("run_command").command_timeout_s = 20  # type: ignore[union-attr]
    command = (
        "git init -q . && echo a > a.txt && git add a.txt\n"
        "git -c user.email=a@b.c -c user.name=a commit -qm one\n"
        "git mv a.txt b.txt && git -c user.email=a@b.c -c user.name=a commit -qm two\n"
        "python3 -c 'import os, tempfile\n"
        'f = tempfile.NamedTemporaryFile(delete=False); f.write(b"new"); f.close()\n'
        'os.replace(f.name, "c.txt")\'\n'
        "git status --short; ls"
    )
    result = await registry.execute("run_command", {"command": command})
    assert result.for_llm == "Exit code 0.\n?? c.txt\n?? docs/\nb.txt\nc.txt\ndocs\n"
    assert (workspace / "c.txt").read_text() == "new"


def test_workspace_root_may_use_a_symlinked_path(tmp_path, workspace):
    alias = tmp_path / "alias"
    alias.symlink_to(workspace)
    config = ToolsConfig(builtins=["read_file"], workspace=alias)
    tool = builtin_tools(config, memory=None)[0]
    assert tool(path="docs/a.txt") == "alpha\n"
    assert os.path.samefile(tmp_path / "ws", alias)
