"""The shape of the code, held: each package and each room of the engine is entered through its
surface, arrows point one way, nothing imports in a circle, and modules stay small.

These read the source (imports as written, not as run), so they need nothing started.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bot", "channels", "engine", "tools")
ORDER = {"tools": 0, "engine": 1, "channels": 2, "bot": 3}  # who may import whom: lower only
MAX_LINES = 350  # a module past it probably holds two ideas


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _imports(path: Path, *, runtime_only: bool) -> list[str]:
    """The modules `path` imports (`from a.b import c` counts as a.b)."""
    tree = ast.parse(path.read_text())
    skipped: set[int] = set()
    if runtime_only:  # what `if TYPE_CHECKING:` imports does not run
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skipped.update(id(n) for n in ast.walk(node))
    names = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
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
        for target in _imports(path, runtime_only=False)
        if _reaches_in(name, target)
    ]
    assert offences == []


def test_arrows_point_one_way_between_packages() -> None:
    offences = [
        f"{name} imports {target}"
        for name, path in _modules().items()
        for target in _imports(path, runtime_only=False)
        if ORDER[target.split(".")[0]] > ORDER[name.split(".")[0]]
    ]
    assert offences == []


def test_no_module_imports_itself_in_a_circle() -> None:
    modules = _modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        for target in _imports(path, runtime_only=True):
            while target not in modules and "." in target:
                target = target.rsplit(".", 1)[0]  # `from pkg import name` names pkg
            if target in modules and target != name:
                graph[name].add(target)
    # a package's __init__ importing its own modules is how a surface is made, not a cycle
    for name in list(graph):
        graph[name] = {t for t in graph[name] if not name.startswith(t + ".")}
    cycles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*stack[stack.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(modules):
        if node not in state:
            visit(node)
    assert cycles == []


def test_modules_stay_small() -> None:
    large = {
        str(path.relative_to(ROOT)): n
        for path in _modules().values()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert large == {}
