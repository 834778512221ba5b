"""The package's layout: a core and an annex that leans on it. The core never imports the annex
(the authors' and the audit's imports, the claims check and evidence, the groups beside Table 1,
export and generate, downstream, perf); only the `repro` command's assembly (repro.cli) names the
annex's subcommands beside the core's. The core stays small enough to read."""

import ast
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


def test_the_package_root_holds_at_most_fifteen_modules():
    assert len(list(LIBRARY.glob("*.py"))) <= 15


def test_the_core_is_under_7500_lines():
    lines = sum(len(path.read_text().splitlines()) for path in core_modules())
    assert lines < 7500, f"the core has {lines} lines"
