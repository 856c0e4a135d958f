"""The README's and PLUGINS.md's tool examples run as printed."""

from __future__ import annotations

import getpass
import re
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.test_cli import finish, relaybot, write_config
from tools import Tier
from tools.plugins import load_plugins

ROOT = Path(__file__).parent.parent


def code_block(doc: Path, lang: str, first_line: str) -> str:
    """The fenced `lang` block of `doc` whose first line is `first_line`."""
    for block in re.findall(rf"```{lang}\n(.*?)```", doc.read_text(), re.S):
        if block.startswith(first_line):
            return block
    raise AssertionError(f"no {lang} block starting with {first_line!r} in {doc.name}")


async def test_readme_plugin_checks_arguments_before_asking(
    tmp_path: Path, llm: FakeOpenAI
) -> None:
    readme = ROOT / "README.md"
    (tmp_path / "my_tools.py").write_text(code_block(readme, "python", "# my_tools.py\n"))
    tools_table = code_block(readme, "toml", "[tools]\n")
    assert tools_table == '[tools]\nplugins = ["my_tools"]\n'
    cfg = write_config(tmp_path, llm, tools_table.removeprefix("[tools]\n"))  # next to it
    llm.script(
        tool_call("cancel_order", {"order_id": "the blue one"}),  # refused before anyone is asked
        tool_call("cancel_order", {"order_id": "10234"}),
        text("Order 10234 is cancelled."),
    )
    proc, io = await relaybot("chat", "-c", str(cfg), stdin=b"cancel my last order\ny\n")
    code, out, err = await finish(proc, io)
    assert code == 0, err
    asked = [line for line in out.splitlines() if line.startswith("relaybot wants to:")]
    assert asked == ["relaybot wants to: Cancel order 10234"]
    refusal = llm.requests[1]["messages"][-1]
    assert (
        refusal["role"] == "tool" and "order_id: String should match pattern" in refusal["content"]
    )
    result = llm.requests[2]["messages"][-1]
    assert result["content"] == f"order 10234 cancelled for {getpass.getuser()}"
    assert "Order 10234 is cancelled." in out.splitlines()


def test_plugins_guide_example_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    guide = ROOT / "tools" / "PLUGINS.md"
    (tmp_path / "my_tools.py").write_text(
        code_block(guide, "python", '"""Tools for our team chat."""')
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    tools, problems = load_plugins(["my_tools"])
    assert problems == []
    by_name = {t.name: t for t in tools}
    assert sorted(by_name) == ["build_status", "convert_temperature", "restart_service"]
    restart = by_name["restart_service"]
    assert restart.tier is Tier.DESTRUCTIVE
    assert restart.parameters["properties"]["service"]["enum"] == ["shop", "blog"]
    assert restart.describe_call({"service": "shop"}) == "Restart the service shop"
