"""Plugins: modules from `[tools] plugins` and the `relaybot.tools` entry-point group."""

from __future__ import annotations

import importlib
import logging
import sys
import textwrap
from pathlib import Path

import pytest

from tools import Tier, ToolContext
from tools.plugins import load_plugins
from tools.registry import ToolRegistry

FIXTURES = Path(__file__).parent / "fixtures" / "plugins"


@pytest.fixture(autouse=True)
def plugin_path(monkeypatch):
    monkeypatch.syspath_prepend(str(FIXTURES))


async def test_a_plugin_module_gives_its_tools():
    tools, problems = load_plugins(["relaybot_demo_plugin"])
    assert problems == []
    assert sorted(t.name for t in tools) == ["greet", "roll_dice", "shout"]  # __all__ only
    registry = ToolRegistry()
    for tool in tools:
        registry.register(tool)
    assert registry.get("greet").tier is Tier.DESTRUCTIVE
    assert (await registry.execute("roll_dice", {"sides": 20})).for_llm == "20"
    assert (await registry.execute("shout", {"text": "hi"})).for_llm == "HI"
    greeting = await registry.execute("greet", {"name": "Ann"}, ToolContext(channel="discord"))
    assert greeting.for_llm == "hello Ann from discord"


def test_an_import_error_is_reported_and_the_rest_still_loads(caplog):
    caplog.set_level(logging.INFO, logger="tools.plugins")
    tools, problems = load_plugins(["relaybot_broken_plugin", "relaybot_demo_plugin"])
    assert len(tools) == 3
    assert problems == [
        "plugin 'relaybot_broken_plugin': ModuleNotFoundError: "
        "No module named 'relaybot_no_such_dependency'; fix: install the package that provides "
        "'relaybot_no_such_dependency' into relaybot's environment, e.g. "
        f"{sys.executable} -m pip install relaybot_no_such_dependency"
    ]
    [record] = caplog.records
    assert record.getMessage() == problems[0] + "; starting without it"
    assert record.exc_info is None  # one line: no traceback unless logging at DEBUG
    caplog.clear()
    caplog.set_level(logging.DEBUG, logger="tools.plugins")
    load_plugins(["relaybot_broken_plugin"])
    assert "Traceback" in caplog.text and "import relaybot_no_such_dependency" in caplog.text


def test_a_missing_plugin_says_where_to_put_it(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    tools, [problem] = load_plugins(["relaybot_team_tools"], plugin_dirs=[tmp_path])
    assert tools == [] and problem == (
        "plugin 'relaybot_team_tools': ModuleNotFoundError: No module named "
        f"'relaybot_team_tools'; fix: put relaybot_team_tools.py in {tmp_path.resolve()}, "
        "or install it into relaybot's environment"
    )
    (tmp_path / "relaybot_team_tools.py").write_text(
        "from tools import tool\n\n@tool\ndef nod() -> str:\n    'Nod.'\n    return 'ok'\n"
    )
    importlib.invalidate_caches()
    tools, problems = load_plugins(["relaybot_team_tools"], plugin_dirs=[tmp_path, tmp_path])
    assert [t.name for t in tools] == ["nod"] and problems == []
    assert sys.path[-1] == str(tmp_path.resolve())  # after the installed packages
    assert sys.path.count(str(tmp_path.resolve())) == 1


def test_without_plugin_dirs_the_hint_names_the_import_path(monkeypatch):
    """The directories are the caller's to give, never left over from an earlier call."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    _, [problem] = load_plugins(["relaybot_absent_tools"])
    assert problem.endswith(
        "fix: put relaybot_absent_tools.py in a directory on PYTHONPATH, "
        "or install it into relaybot's environment"
    )


def test_syntax_and_runtime_errors_point_at_the_line(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "relaybot_typo_plugin.py").write_text("def f(:\n    pass\n")
    (tmp_path / "relaybot_raising_plugin.py").write_text("x = 1\nraise KeyError('DB_URL')\n")
    _, problems = load_plugins(["relaybot_typo_plugin", "relaybot_raising_plugin"])
    assert problems[0].startswith("plugin 'relaybot_typo_plugin': SyntaxError: ")
    assert problems[0].endswith(
        f"fix: correct the syntax at {tmp_path}/relaybot_typo_plugin.py, line 1"
    )
    assert problems[1] == (
        "plugin 'relaybot_raising_plugin': KeyError: 'DB_URL'; fix: correct the plugin (raised "
        f"at {tmp_path}/relaybot_raising_plugin.py, line 2); --log-level DEBUG shows the traceback"
    )


def test_bad_tools_are_left_out_with_the_reason():
    tools, problems = load_plugins(["relaybot_bad_tool_plugin"])
    assert [t.name for t in tools] == ["fine"]
    assert len(problems) == 2
    assert "plugin 'relaybot_bad_tool_plugin': tool name 'bad name!' must match" in problems[0]
    assert "tool 'bad_schema': invalid parameters schema" in problems[1]


def test_a_module_without_tool_instances_says_so():
    tools, problems = load_plugins(["relaybot_classes_only_plugin"])
    assert tools == []
    assert problems == [
        "plugin 'relaybot_classes_only_plugin': module 'relaybot_classes_only_plugin' defines "
        "no tools (create instances of Forgotten)"
    ]


def test_a_tool_name_twice_keeps_the_first():
    tools, problems = load_plugins(["relaybot_demo_plugin", "relaybot_demo_plugin"])
    assert len(tools) == 3 and problems == []  # the same objects again: not a conflict


def write_distribution(site: Path, entry_points: str, modules: dict[str, str]) -> None:
    """An installed distribution, as pip would leave it: a dist-info with entry_points.txt."""
    info = site / "relaybot_demo_dist-1.0.dist-info"
    info.mkdir(parents=True)
    metadata = "Metadata-Version: 2.1\nName: relaybot-demo-dist\nVersion: 1.0\n"
    (info / "METADATA").write_text(metadata)
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))
    for name, source in modules.items():
        (site / f"{name}.py").write_text(textwrap.dedent(source))


async def test_entry_points(tmp_path, monkeypatch):
    site = tmp_path / "site"
    write_distribution(
        site,
        """\
        [relaybot.tools]
        weather = relaybot_ep_tools:weather
        dice = relaybot_demo_plugin
        factory = relaybot_ep_tools:make_tools
        broken = relaybot_ep_missing:thing
        nonsense = relaybot_ep_tools:NOT_A_TOOL
        """,
        {
            "relaybot_ep_tools": '''\
            from tools import tool

            NOT_A_TOOL = 42

            @tool
            async def weather(city: str) -> str:
                """Today's weather in a city."""
                return f"sunny in {city}"

            def make_tools():
                @tool
                async def made_one() -> str:
                    """Made by a factory."""
                    return "one"

                @tool
                async def made_two() -> str:
                    """Made by a factory too."""
                    return "two"

                return [made_one, made_two]
            ''',
        },
    )
    monkeypatch.syspath_prepend(str(site))
    tools, problems = load_plugins([])
    names = sorted(t.name for t in tools)
    assert names == ["greet", "made_one", "made_two", "roll_dice", "shout", "weather"]
    assert len(problems) == 2
    broken = next(p for p in problems if "'broken'" in p)
    assert broken.startswith("plugin 'broken' (relaybot_ep_missing:thing): ModuleNotFoundError")
    nonsense = next(p for p in problems if "'nonsense'" in p)
    assert "42 is not a module, a Tool or a callable returning tools" in nonsense
    registry = ToolRegistry()
    for tool in tools:
        registry.register(tool)
    assert (await registry.execute("weather", {"city": "Oslo"})).for_llm == "sunny in Oslo"


def test_no_plugins_no_problems():
    assert load_plugins([], group="relaybot.tools.test-empty") == ([], [])
