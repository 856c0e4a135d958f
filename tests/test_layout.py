"""The shape of the code, held: each package and each room of the engine is entered through its
surface, arrows point one way, nothing imports in a circle, and modules stay small.

These read the source (imports as written, not as run), so they need nothing started.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bot", "channels", "engine", "tools")
ORDER = {"tools": 0, "engine": 1, "channels": 2, "bot": 3}  # who may import whom: lower only
REVIEW_LINES = 300  # a module past it may hold two ideas: split it, or say why it is one
MAX_LINES = 450  # past this, no reason will do


@cache
def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _imports(path: Path) -> list[str]:
    """The modules `path` imports, `if TYPE_CHECKING:` included: `from a.b import c` counts as
    a.b, or as a.b.c where c is a module (`from engine import metrics` imports engine.metrics)."""
    modules = _modules()
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            named = [f"{node.module}.{alias.name}" for alias in node.names]
            names.extend(n for n in named if n in modules)
            if not all(n in modules for n in named):
                names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return [n for n in names if n.split(".")[0] in PACKAGES]


def _room(module: str) -> str:
    """The package, or for the engine its room (engine.chat, engine.store, ...)."""
    parts = module.split(".")
    if parts[0] == "engine" and len(parts) > 1 and not parts[1].startswith("_"):
        return ".".join(parts[:2])
    return parts[0]


def _reaches_in(importer: str, target: str) -> bool:
    """True when `importer` uses a private module it should reach through a surface: another
    package's, or (inside the engine) another room's."""
    t, i = target.split("."), importer.split(".")
    if t[0] != i[0]:
        return any(p.startswith("_") for p in t[1:])
    if t[0] == "engine" and len(t) > 2 and not t[1].startswith("_"):
        return t[2].startswith("_") and _room(importer) != _room(target)
    return False


def test_no_package_or_engine_room_imports_anothers_private_module() -> None:
    offences = [
        f"{name} imports {target}"
        for name, path in _modules().items()
        for target in _imports(path)
        if _reaches_in(name, target)
    ]
    assert offences == []


def test_arrows_point_one_way_between_packages() -> None:
    offences = [
        f"{name} imports {target}"
        for name, path in _modules().items()
        for target in _imports(path)
        if ORDER[target.split(".")[0]] > ORDER[name.split(".")[0]]
    ]
    assert offences == []


# Circles left on purpose, each by the modules in it and why (none today).
JUSTIFIED_CIRCLES: dict[frozenset[str], str] = {}


def _import_graph() -> dict[str, set[str]]:
    """Who imports whom, counting what `if TYPE_CHECKING:` imports too: a circle only the type
    checker sees still ties the modules into one knot a reader must hold at once."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for target in _imports(path):
            while target not in modules and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in modules and target != name:
                graph[name].add(target)
    # a package's __init__ importing its own modules is how a surface is made, not a cycle
    for name in list(graph):
        graph[name] = {t for t in graph[name] if not name.startswith(t + ".")}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_itself_in_a_circle() -> None:
    graph = _import_graph()
    circles = [c for c in _circles(graph) if c not in JUSTIFIED_CIRCLES]
    described = [
        "; ".join(f"{a} -> {b}" for a in sorted(c) for b in sorted(graph[a] & c)) for c in circles
    ]
    assert described == []


def test_the_import_reader_sees_a_module_named_in_from_import() -> None:
    graph = _import_graph()
    # `from engine import metrics`:
    assert "engine.metrics" in graph["engine.chat._jobs._housekeeping"]
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset("abc")]


_CLOCK_READS = {
    "time": {"time", "monotonic", "perf_counter", "time_ns", "monotonic_ns"},
    "datetime": {"now", "utcnow", "today"},
    "date": {"today"},
}


def test_the_engine_reads_time_through_its_clock() -> None:
    """engine/_clock.py says which clock a figure follows (wall, monotonic, perf) and is where a
    test's clock comes in; no other module of the engine reads time itself."""
    offences = [
        f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}"
        for name, path in _modules().items()
        if name.startswith("engine.") and name != "engine._clock"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.attr in _CLOCK_READS.get(node.value.id, set())
    ]
    assert offences == []


def test_modules_stay_small() -> None:
    """Length is a prompt for review, not a target: a module past REVIEW_LINES is split by idea,
    or says at its top why it is one (a comment starting "# Left whole:")."""
    unexplained, large = {}, {}
    for path in _modules().values():
        text = path.read_text()
        n = len(text.splitlines())
        if n > MAX_LINES:
            large[str(path.relative_to(ROOT))] = n
        elif n > REVIEW_LINES and not text.startswith("# Left whole:"):
            unexplained[str(path.relative_to(ROOT))] = n
    assert (large, unexplained) == ({}, {})
