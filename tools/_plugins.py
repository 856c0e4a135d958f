"""Plugins: tools from modules named in `[tools] plugins` and the `relaybot.tools` entry points.

A plugin module's tools are its module-level Tool instances (functions decorated with @tool,
instances of Tool subclasses), or only those named in its `__all__` when it has one. An entry
point may name a module, a Tool, or a callable returning a Tool or a list of them.

A plugin that fails to load, or a tool that is declared wrongly, is logged and reported with
the plugin's name and the reason; everything else still loads and the daemon starts.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import logging
from collections.abc import Iterable
from types import ModuleType
from typing import Any

from tools._base import Tool
from tools._errors import ToolDefinitionError
from tools._registry import ToolRegistry

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "relaybot.tools"


class PluginError(Exception):
    """Why one plugin was left out (internal: becomes a problem string)."""


def load_plugins(
    modules: Iterable[str], *, group: str = ENTRY_POINT_GROUP
) -> tuple[list[Tool], list[str]]:
    """(tools, problems) from the named modules, then from the installed entry points.

    Never raises for a plugin's fault: each problem is logged and returned as one line naming
    the plugin and the reason. A tool name seen twice keeps the first tool.
    """
    tools: dict[str, Tool] = {}
    problems: list[str] = []

    def report(problem: str, exc: Exception | None = None) -> None:
        problems.append(problem)
        log.error("%s; starting without it", problem, exc_info=exc)

    def collect(label: str, load: Any) -> None:
        try:
            found = load()
        except PluginError as exc:
            return report(f"plugin {label}: {exc}")
        except Exception as exc:  # anything a plugin's import or factory can raise
            return report(f"plugin {label}: {type(exc).__name__}: {exc}", exc)
        for tool in found:
            problem = _problem(tool)
            if problem is None and tools.get(tool.name, tool) is not tool:
                problem = f"tool {tool.name!r} is already defined by another plugin"
            if problem:
                report(f"plugin {label}: {problem}")
            else:
                tools[tool.name] = tool

    for name in modules:
        collect(repr(name), lambda name=name: _module_tools(importlib.import_module(name)))
    for ep in importlib.metadata.entry_points(group=group):
        collect(f"{ep.name!r} ({ep.value})", lambda ep=ep: _entry_point_tools(ep.load()))
    return list(tools.values()), problems


def _module_tools(module: ModuleType) -> list[Tool]:
    names = getattr(module, "__all__", None)
    if names is not None:
        values = [getattr(module, n, None) for n in names]
    else:
        values = [v for k, v in vars(module).items() if not k.startswith("_")]
    found = list({id(v): v for v in values if isinstance(v, Tool)}.values())
    if found:
        return found
    classes = [
        v.__name__
        for v in values
        if inspect.isclass(v) and issubclass(v, Tool) and v.__module__ == module.__name__
    ]
    hint = f" (create instances of {', '.join(classes)})" if classes else " (use @tool)"
    raise PluginError(f"module {module.__name__!r} defines no tools{hint}")


def _entry_point_tools(obj: Any) -> list[Tool]:
    if inspect.ismodule(obj):
        return _module_tools(obj)
    if isinstance(obj, Tool):
        return [obj]
    if callable(obj):
        made = obj()
        if isinstance(made, Tool):
            return [made]
        if isinstance(made, Iterable) and not isinstance(made, str | bytes):
            made = list(made)
            bad = [m for m in made if not isinstance(m, Tool)]
            if not bad:
                return made
            raise PluginError(f"its factory returned {bad[0]!r}, which is not a Tool")
        raise PluginError(f"its factory returned {made!r}, not a Tool or a list of Tools")
    raise PluginError(f"{obj!r} is not a module, a Tool or a callable returning tools")


def _problem(tool: Tool) -> str | None:
    """What is wrong with a plugin's tool (the registry's checks, a valid JSON Schema, a
    description), or None."""
    import jsonschema  # heavy, and only needed when plugins are loaded

    try:
        ToolRegistry().register(tool)
        jsonschema.Draft202012Validator.check_schema(tool.parameters)
    except ToolDefinitionError as exc:
        return str(exc)
    except jsonschema.SchemaError as exc:
        return f"tool {tool.name!r}: invalid parameters schema: {exc.message}"
    if not isinstance(getattr(tool, "description", None), str) or not tool.description.strip():
        return f"tool {tool.name!r} has no description"
    return None
