"""The package's layout: a core and an annex that leans on it. The core never imports the annex
(the authors' and the audit's imports, the claims check and evidence, the groups beside Table 1,
export and generate, downstream, perf); only the `repro` command's assembly (repro.cli) names the
annex's subcommands beside the core's. Imports run one way: no module imports itself back through
others, and the runtime (devices, processes, signals, the allocator) imports nothing of training,
data or the model. Folders stay small enough to take in at a glance."""

import ast
import graphlib
from importlib.util import resolve_name
from pathlib import Path

from conftest import REPO

LIBRARY = REPO / "src" / "repro"
ASSEMBLY = LIBRARY / "cli" / "__init__.py"


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


def core_modules() -> list[Path]:
    return [p for p in sorted(LIBRARY.rglob("*.py")) if "annex" not in p.relative_to(LIBRARY).parts]


def test_the_core_never_imports_the_annex():
    found = [
        f"{path.relative_to(REPO)}: {name}"
        for path in core_modules()
        if path != ASSEMBLY
        for name in sorted(imported(path, package_of(path)))
        if name == "repro.annex" or name.startswith("repro.annex.")
    ]
    assert not found, found


def test_the_check_sees_an_import_of_the_annex_inside_a_function(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from repro.annex.authors import runs\n")
    assert "repro.annex.authors.runs" in imported(module)


def test_the_check_sees_a_relative_import_of_the_annex(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("from ..annex.groups import tuning\nfrom ..annex import claims\n")
    assert {"repro.annex.groups.tuning", "repro.annex.claims"} <= imported(module, "repro.analysis")
    assert package_of(LIBRARY / "analysis" / "results.py") == "repro.analysis"


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


def cycle_in(graph: dict) -> list | None:
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as e:
        return e.args[1]
    return None


def test_no_module_imports_itself_back():
    cycle = cycle_in(import_graph())
    assert cycle is None, " -> ".join(str(p.relative_to(LIBRARY)) for p in cycle)


def test_the_check_sees_a_cycle_closed_inside_a_function():
    assert cycle_in({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert cycle_in({"a": {"b"}, "b": {"a"}}) in (["a", "b", "a"], ["b", "a", "b"])
    assert module_file("repro.model.GPT") == LIBRARY / "model.py"
    assert module_file("repro.cli") == LIBRARY / "cli" / "__init__.py"


def test_the_runtime_imports_nothing_of_training_data_or_the_model():
    above = ("repro.training", "repro.data", "repro.model", "repro.attention", "repro.evaluate")
    found = [
        f"{path.relative_to(REPO)}: {name}"
        for path in sorted((LIBRARY / "runtime").glob("*.py"))
        for name in sorted(imported(path, package_of(path)))
        if name.startswith(above)
    ]
    assert not found, found


def test_every_folder_of_the_library_holds_at_most_fifteen_modules():
    folders = {p.parent for p in LIBRARY.rglob("*.py")}
    crowded = {f: n for f in folders if (n := len(list(f.glob("*.py")))) > 15}
    assert not crowded, crowded


def test_the_tests_mirror_the_package_in_folders_of_at_most_thirty_modules():
    """tests/: core (by the library's wings), annex, workflow, docs, packaging, benchmarks, and
    helpers for the modules they share; no test module at the top."""
    tests = REPO / "tests"
    assert not list(tests.glob("test_*.py")), "a test module at the top of tests/"
    folders = {p.parent for p in tests.rglob("test_*.py")}
    crowded = {f: n for f in folders if (n := len(list(f.glob("test_*.py")))) > 30}
    assert not crowded, crowded
    assert {f.relative_to(tests).parts[0] for f in folders} == {
        "core", "annex", "workflow", "docs", "packaging", "benchmarks"
    }  # fmt: skip
    assert not list((tests / "helpers").glob("test_*.py"))
