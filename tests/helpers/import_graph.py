"""The library's imports as the layout tests and the workflow's tests read them: every module a file
imports, at its top or inside a function, and the graph of the library's modules."""

import ast
from importlib.util import resolve_name
from pathlib import Path

from conftest import REPO

LIBRARY = REPO / "src" / "repro"


def package_of(path: Path) -> str:
    """The package a module of the library is in, which its relative imports start from."""
    return ".".join(path.relative_to(LIBRARY.parent).parts[:-1])


def imported(path: Path, package: str = "repro") -> set[str]:
    """Every module `path` imports, at its top or inside a function (relative: from `package`)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            module = resolve_name("." * node.level + (node.module or ""), package)
            names |= {module, *(f"{module}.{alias.name}" for alias in node.names)}
    return names


def module_file(dotted: str) -> Path | None:
    """The file a dotted name of the package runs when imported: a module, a package's
    __init__.py, or, for a name a module holds (repro.model.GPT), that module."""
    parts = dotted.split(".")[1:]
    for n in range(len(parts), -1, -1):
        base = LIBRARY.joinpath(*parts[:n])
        if (base / "__init__.py").exists():
            return base / "__init__.py"
        if base.with_suffix(".py").exists():
            return base.with_suffix(".py")
    return None


def import_graph() -> dict[Path, set[Path]]:
    """Each module of the library and the modules of the library it imports, at its top or inside
    a function (an import inside a function closes a cycle as surely when it runs)."""
    graph = {}
    for path in sorted(LIBRARY.rglob("*.py")):
        names = imported(path, package_of(path))
        targets = {module_file(n) for n in names if n == "repro" or n.startswith("repro.")}
        graph[path] = {t for t in targets if t is not None and t != path}
    return graph


def closure(paths) -> set[Path]:
    """The library's modules that importing `paths` runs, themselves included."""
    graph, seen, todo = import_graph(), set(), list(paths)
    while todo:
        path = todo.pop()
        if path not in seen:
            seen.add(path)
            todo += graph.get(path, set())
    return seen


def notebook_imports(notebook: Path) -> set[Path]:
    """The library's modules a notebook's code cells import (and what those import)."""
    import json

    cells = json.loads(notebook.read_text())["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    names = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    files = {module_file(n) for n in names if n == "repro" or n.startswith("repro.")}
    return closure(f for f in files if f is not None)
