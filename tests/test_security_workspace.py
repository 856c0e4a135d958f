"""Attacks on the workspace tools by an injected model: what lies outside the workspace (its
path, the targets of links leading out) never shows in a result."""

from __future__ import annotations

import pytest

from tools.builtins import WORKSPACE_TOOLS, builtin_tools
from tools.config import ToolsConfig
from tools.registry import ToolRegistry


@pytest.fixture
def workspace(tmp_path):
    root = tmp_path / "ws"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.txt").write_text("alpha\n")
    return root


@pytest.fixture
def registry(workspace):
    registry = ToolRegistry()
    for tool in builtin_tools(
        ToolsConfig(builtins=list(WORKSPACE_TOOLS), workspace=workspace), memory=None
    ):
        registry.register(tool)
    return registry


async def test_links_out_of_the_workspace_are_listed_without_their_targets(
    registry, workspace, tmp_path
):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "private.key").write_text("k" * 12_345)
    (workspace / "a_file").symlink_to(outside / "private.key")
    (workspace / "a_folder").symlink_to(outside)
    (workspace / "a_missing").symlink_to(tmp_path / "does-not-exist")
    (workspace / "b_inside").symlink_to(workspace / "docs" / "a.txt")

    listed = (await registry.execute("list_files", {})).for_llm

    assert listed.splitlines() == [
        "docs/",
        "a_file (a link out of the workspace)",
        "a_folder (a link out of the workspace)",
        "a_missing (a link out of the workspace)",  # no oracle for what exists outside
        "b_inside (6 bytes)",
    ]
    assert "12345" not in listed
    refused = await registry.execute("list_files", {"path": "a_folder"})
    assert refused.is_error and "private.key" not in refused.for_llm


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("write_file", {"path": "docs/a.txt/inner.txt", "content": "x"}),
        ("write_file", {"path": "docs", "content": "x"}),
        ("read_file", {"path": "docs/a.txt/inner.txt"}),
        ("read_file", {"path": "no\0such"}),
        ("list_files", {"path": "docs/a.txt"}),
        ("delete_file", {"path": "docs/nothing.txt"}),
        ("read_file", {"path": "../ws/docs/a.txt"}),
        ("read_file", {"path": "/etc/passwd"}),
    ],
)
async def test_errors_never_show_where_the_workspace_is(registry, workspace, tool, args):
    result = await registry.execute(tool, args)
    assert result.is_error
    assert str(workspace) not in result.for_llm and str(workspace.parent) not in result.for_llm
    assert args["path"].split("/")[0].replace("\0", "") in result.for_llm.replace("\\x00", "")


async def test_an_os_error_names_the_relative_path(registry):
    result = await registry.execute("write_file", {"path": "docs/a.txt/inner.txt", "content": "x"})
    assert result.is_error and result.retryable
    assert result.for_llm == "'docs/a.txt/inner.txt': File exists."
