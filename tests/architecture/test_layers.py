"""The package's import graph: no circles between modules or between folders, and no import that runs back up
a layer (docs/architecture.md draws the layers). Read from the source with `ast`, so it also sees imports that
only run inside functions, and imports made through strings: a `registry.resolve("KIND", ...)` call imports every
module registered for KIND, and a string that names a latentforge module ("latentforge.x.y", for importlib)
imports that module."""

from __future__ import annotations

import ast
from collections import defaultdict

from helpers import SRC
from latentforge import registry

# Bottom to top; a module may import its own layer (without circles) and anything below it.
LAYERS = [
    {"version", "errors", "records", "packed_numbers", "registry", "io", "hashing", "testing", "devices", "hub",
     "progress", "locations", "storage"},
    {"config"},
    {"readers", "decode", "text", "tokenizers", "conditioning", "captions"},
    {"transforms"},
    {"cache"},
    {"staging", "transfer"},
    {"sinks"},
    {"pipeline"},
    {"executor"},
    {"config.loading"},
    {"verification"},
    {"builder"},
    {"report", "integrations", "dataset", "export"},
    {"demo"},
    {"cli"},
    {"__init__"},
]
RANK = {room: rank for rank, rooms in enumerate(LAYERS) for room in rooms}
PACKAGE = SRC / "latentforge"


def _module_name(path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _registered() -> dict[str, set[str]]:
    """registry kind -> the modules its backends live in."""
    return {kind: {f"latentforge.{target.split(':')[0]}" for target in table.values()}
            for kind, table in registry._BACKENDS.items()}


def _string_imports(node: ast.AST, modules: dict, registered: dict[str, set[str]]) -> set[str]:
    """What `node` imports through a string: a registry.resolve("KIND", ...) call, or a module's dotted name."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "resolve" \
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "registry" and node.args \
            and isinstance(node.args[0], ast.Constant):
        return registered.get(node.args[0].value, set())
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and "." in node.value \
            and node.value in modules:
        return {node.value}
    return set()


def _imports() -> dict[str, set[str]]:
    """latentforge module -> the latentforge modules it imports (packages resolved to their __init__)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    registered = _registered()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if name != "latentforge.registry":
                graph[name].update(_string_imports(node, modules, registered) - {name})
            if isinstance(node, ast.ImportFrom):
                base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
                target = ".".join(p for p in (base, node.module or "") if p)
                candidates = [f"{target}.{alias.name}" for alias in node.names] + [target]
            elif isinstance(node, ast.Import):
                candidates = [alias.name for alias in node.names]
            else:
                continue
            for candidate in candidates:
                if candidate in modules and candidate != name:
                    graph[name].add(candidate)
                    break
    return graph


def _room(module: str) -> str:
    """A module's layer name: its folder under the package (a sub-folder where LAYERS names one, as config.loading)."""
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    return ".".join(parts[1:3]) if ".".join(parts[1:3]) in RANK else parts[1]


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_every_folder_and_top_module_has_a_layer():
    rooms = {_room(m) for m in map(_module_name, PACKAGE.rglob("*.py"))}
    assert rooms - set(RANK) == set(), "add new folders to LAYERS and to docs/architecture.md"
    top = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    assert set(top) <= LAYERS[0], f"the top of the package holds only the shared core, not {set(top) - LAYERS[0]}"


def test_no_import_runs_up_a_layer():
    upward = [f"{a} -> {b}" for a, targets in _imports().items() for b in targets
              if RANK[_room(b)] > RANK[_room(a)]]
    assert upward == []


def test_no_circles_between_modules_or_folders():
    graph = _imports()
    assert _cycle(graph) is None
    folders: dict[str, set[str]] = defaultdict(set)
    for a, targets in graph.items():
        folders[_room(a)].update(_room(b) for b in targets if _room(b) != _room(a))
    assert _cycle(folders) is None
