"""Backends are whole plug-ins: no module outside a sink's or reader's own folder compares anything with that
backend's name (they dispatch through the registry and the backend's class instead). Read with `ast`."""

from __future__ import annotations

import ast

from helpers import SRC
from latentforge import registry

PACKAGE = SRC / "latentforge"


def _own_folder(target: str) -> str:
    """"sinks.hdf5.sink:Hdf5Sink" -> "sinks/hdf5": the package that holds the backend."""
    return "/".join(target.split(":")[0].split(".")[:-1])


def _compared_strings(node: ast.Compare) -> set[str]:
    found = set()
    for operand in (node.left, *node.comparators):
        items = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
        found.update(item.value for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str))
    return found


def test_no_sink_or_reader_name_is_compared_outside_its_own_folder():
    owners = {name: _own_folder(target) for kind in ("sink", "reader")
              for name, target in registry._BACKENDS[kind].items()}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        folder = path.parent.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                found += [f"{path.relative_to(PACKAGE)}:{node.lineno} compares {name!r}"
                          for name in _compared_strings(node) & set(owners)
                          if not (folder + "/").startswith(owners[name] + "/")]
    assert found == []
