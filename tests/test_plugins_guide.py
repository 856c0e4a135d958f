"""tools/PLUGINS.md's four forms (the decorator, Tool, ContextualTool, AsyncTool) load as plugins
and behave as the guide says, so the contract it documents cannot drift from the code."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.test_readme import code_block
from tools import AsyncTool, ContextualTool, Tier, Tool, ToolContext, ToolResult
from tools.plugins import load_plugins
from tools.registry import ToolRegistry

GUIDE = Path(__file__).parent.parent / "tools" / "PLUGINS.md"


@pytest.fixture
def example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str, str], Tool]:
    """The guide's example whose docstring is `doc`, loaded as the plugin module `name`."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def load(name: str, doc: str) -> Tool:
        (tmp_path / f"{name}.py").write_text(code_block(GUIDE, "python", f'"""{doc}'))
        tools, problems = load_plugins([name], plugin_dirs=[tmp_path])
        assert problems == []
        [tool] = tools
        return tool

    return load


def registry_of(tool: Tool) -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(tool)
    return registry


async def test_the_decorator_example(example) -> None:
    count_words = example("guide_decorator", "The decorator: a typed function is a tool.")
    assert count_words.name == "count_words" and count_words.tier is Tier.SAFE
    assert count_words.description.startswith("Count the words of a text.")
    properties = count_words.parameters["properties"]
    assert sorted(properties) == ["text", "unique"]  # the context is never shown to the model
    assert properties["unique"]["description"] == "Count each distinct word once."
    registry = registry_of(count_words)
    result = await registry.execute(
        "count_words", {"text": "to be or not to be", "unique": True}, ToolContext(user_id="u7")
    )
    assert result.for_llm == '{"words":4,"asked_by":"u7"}'
    refused = await registry.execute("count_words", {"text": ""})
    assert refused.is_error and refused.retryable  # validated before the call


async def test_the_tool_class_example(example) -> None:
    take_ticket = example("guide_tool", "A Tool class: a hand-written JSON Schema, and state kept")
    assert type(take_ticket).__mro__[1] is Tool
    registry = registry_of(take_ticket)
    first = await registry.execute("take_ticket", {"queue": "support"})
    second = await registry.execute("take_ticket", {"queue": "support"})
    assert (first.for_llm, second.for_llm) == ("support ticket #1", "support ticket #2")
    wrong = await registry.execute("take_ticket", {"queue": "billing"})
    assert wrong.is_error and wrong.retryable and "queue" in wrong.for_llm
    take_ticket.limit = 2  # type: ignore[attr-defined]
    full = await registry.execute("take_ticket", {"queue": "support"})
    assert full.is_error and full.retryable
    assert full.for_llm == "The support queue is full; offer the other queue."


async def test_the_contextual_tool_example(example) -> None:
    counter = example("guide_contextual", "A ContextualTool: knows which chat it acts for")
    assert isinstance(counter, ContextualTool)
    registry = registry_of(counter)
    results = await asyncio.gather(
        *(
            registry.execute("count_in_chat", {}, ToolContext("telegram", chat))
            for chat in ("a", "b", "a")
        )
    )
    assert sorted(r.for_llm for r in results) == [
        "1 in telegram:a",
        "1 in telegram:b",
        "2 in telegram:a",
    ]
    counter.set_context("console", "local")  # the tool alone, as the guide says to try it
    assert (await counter.execute({})).for_llm == "1 in console:local"


async def test_the_async_tool_example(example) -> None:
    export = example("guide_async", "An AsyncTool: answers at once, reports its result later")
    assert isinstance(export, AsyncTool)
    registry = registry_of(export)
    reported: asyncio.Future[ToolResult] = asyncio.get_running_loop().create_future()

    async def callback(result: ToolResult) -> None:
        reported.set_result(result)

    prepared = registry.prepare("export_history", '{"months": 2}')
    assert not isinstance(prepared, ToolResult)
    started = await registry.run(prepared, ToolContext("discord", "c1"), callback=callback)
    assert started.is_async and "Started in the background (export)" in started.for_llm
    later = await asyncio.wait_for(reported, 5)
    [file] = later.files
    assert later.for_llm.startswith("Export ") and later.for_llm.endswith(" is ready.")
    assert (file.name, file.mime_type) == ("history.txt", "text/plain")
    assert file.data == b"month 1: ...\nmonth 2: ..."


def test_every_python_example_of_the_guide_is_tested() -> None:
    tested = {
        "Tools for our team chat.",  # tests/test_readme.py
        "The decorator: a typed function is a tool.",
        "A Tool class: a hand-written JSON Schema, and state kept between calls.",
        "A ContextualTool: knows which chat it acts for, even when many chats call it at once.",
        "An AsyncTool: answers at once, reports its result later through its callback.",
    }

    firsts = re.findall(r'```python\n"""(.*?)"""', GUIDE.read_text())
    assert set(firsts) == tested
