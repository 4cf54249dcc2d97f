"""docs/architecture.md's tree names every module of the package, each on its own line under its folder, and no
module that is gone: the map a newcomer reads is the code."""

from __future__ import annotations

import re

from helpers import REPO, SRC

_LINE = re.compile(r"^(?P<indent> *)(?P<name>[\w.]+(/|\.py))(\s|$)")


def _mapped() -> set[str]:
    """The module paths the tree block names, relative to src/latentforge/."""
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("## The tree", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    folders: list[tuple[int, str]] = []  # (indent, name) of the folders open above the current line
    mapped = set()
    for line in block.splitlines()[1:]:  # below "src/latentforge/"
        match = _LINE.match(line)
        if not match:
            continue  # a description's continuation line
        indent, name = len(match["indent"]), match["name"]
        folders = [(i, f) for i, f in folders if i < indent]
        if name.endswith("/"):
            folders.append((indent, name.rstrip("/")))
        else:
            mapped.add("/".join([f for _, f in folders] + [name]))
    return mapped


def test_the_tree_names_every_module_and_no_other():
    modules = {p.relative_to(SRC / "latentforge").as_posix() for p in (SRC / "latentforge").rglob("*.py")}
    mapped = _mapped()
    assert sorted(modules - mapped) == [], "add these modules to docs/architecture.md's tree"
    assert sorted(mapped - modules) == [], "docs/architecture.md's tree names modules that are gone"
