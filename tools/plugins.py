"""Plugins: tools from modules named in `[tools] plugins` and the `relaybot.tools` entry points.

A plugin module's tools are its module-level Tool instances (functions decorated with @tool,
instances of Tool subclasses), or only those named in its `__all__` when it has one. An entry
point may name a module, a Tool, or a callable returning a Tool or a list of them.

A plugin that fails to load, or a tool that is declared wrongly, is logged and reported in one
line with the plugin's name, the reason and the likely fix (the traceback only at DEBUG);
everything else still loads and the daemon starts.

Modules are looked up on the import path, to which `load_plugins` appends its `plugin_dirs`
(the daemon passes the directory of the config file): a `my_tools.py` next to `config.toml`
just works. Appended, not prepended, so a file there can never shadow an installed package
relaybot itself imports later.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import logging
import sys
import traceback
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from tools._base import Tool
from tools.errors import ToolDefinitionError
from tools.registry import ToolRegistry

__all__ = ["ENTRY_POINT_GROUP", "load_plugins"]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "relaybot.tools"


class PluginError(Exception):
    """Why one plugin was left out (internal: becomes a problem string)."""


def load_plugins(
    modules: Iterable[str],
    *,
    plugin_dirs: Sequence[Path] = (),
    group: str = ENTRY_POINT_GROUP,
    log_problems: bool = True,
    fresh: bool = False,
) -> tuple[list[Tool], list[str]]:
    """(tools, problems) from the named modules, then from the installed entry points.

    `plugin_dirs` (the config file's directory) are appended to the import path first, and
    named in the hint for a module that is not found. Never raises for a plugin's fault: each
    problem is returned (and logged, unless `log_problems` is false) as one line naming the
    plugin, the reason and the likely fix. A tool name seen twice keeps the first tool.
    `fresh` imports the named modules again when imported before (a reload: their files may
    have changed); installed entry points stay as they are.
    """
    dirs = list(dict.fromkeys(d.resolve() for d in plugin_dirs))
    for directory in dirs:
        if str(directory) not in sys.path:
            sys.path.append(str(directory))
    tools: dict[str, Tool] = {}
    problems: list[str] = []

    def report(problem: str, exc: Exception | None = None) -> None:
        problems.append(problem)
        if log_problems:
            trace = exc if exc is not None and log.isEnabledFor(logging.DEBUG) else None
            log.error("%s; starting without it", problem, exc_info=trace)

    def collect(label: str, load: Any, module: str | None = None) -> None:
        try:
            found = load()
        except PluginError as exc:
            return report(f"plugin {label}: {exc}")
        except Exception as exc:  # anything a plugin's import or factory can raise
            fix = _fix(exc, module, dirs)
            return report(f"plugin {label}: {type(exc).__name__}: {exc}; {fix}", exc)
        for tool in found:
            problem = _problem(tool)
            if problem is None and tools.get(tool.name, tool) is not tool:
                problem = f"tool {tool.name!r} is already defined by another plugin"
            if problem:
                report(f"plugin {label}: {problem}")
            else:
                tools[tool.name] = tool

    if fresh:
        importlib.invalidate_caches()  # a file added since: its directory is listed again

    def imported(name: str) -> ModuleType:
        if fresh and name in sys.modules:
            return importlib.reload(sys.modules[name])
        return importlib.import_module(name)

    for name in modules:
        collect(repr(name), lambda name=name: _module_tools(imported(name)), name)
    for ep in importlib.metadata.entry_points(group=group):
        collect(f"{ep.name!r} ({ep.value})", lambda ep=ep: _entry_point_tools(ep.load()))
    return list(tools.values()), problems


def _fix(exc: Exception, module: str | None, plugin_dirs: Sequence[Path]) -> str:
    """The likely fix for an exception raised while loading the plugin `module`."""
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        if module is not None and (module == exc.name or module.startswith(exc.name + ".")):
            where = ", ".join(str(d) for d in plugin_dirs) or "a directory on PYTHONPATH"
            file = module.replace(".", "/") + ".py"
            return f"fix: put {file} in {where}, or install it into relaybot's environment"
        top = exc.name.split(".")[0]
        return (
            f"fix: install the package that provides {top!r} into relaybot's environment, "
            f"e.g. {sys.executable} -m pip install {top}"
        )
    if isinstance(exc, SyntaxError):
        return f"fix: correct the syntax at {exc.filename}, line {exc.lineno}"
    frames = traceback.extract_tb(exc.__traceback__)
    at = f" (raised at {frames[-1].filename}, line {frames[-1].lineno})" if frames else ""
    return f"fix: correct the plugin{at}; --log-level DEBUG shows the traceback"


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
