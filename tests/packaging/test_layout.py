"""The package's layout: a core and an annex that leans on it. The core never imports the annex
(the authors' and the audit's imports, the joint claims, evidence and findings, the groups beside
Table 1, the model folders, downstream, perf), and a core command loads none of it: only the
`repro` command's assembly (repro.cli.assembly) names the annex's families, imported on demand.
The annex is a folder a feature, its commands in the feature's cli.py. Imports run one way: no
module imports itself back through others, and the runtime (devices, processes, signals, the
allocator) imports nothing of training, data or the model. Folders stay small enough to take in
at a glance."""

import argparse
import graphlib
import importlib
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from import_graph import LIBRARY, import_graph, imported, module_file, package_of

from repro.cli import assembly


def core_modules() -> list[Path]:
    return [p for p in sorted(LIBRARY.rglob("*.py")) if "annex" not in p.relative_to(LIBRARY).parts]


def test_the_core_never_imports_the_annex():
    found = [
        f"{path.relative_to(REPO)}: {name}"
        for path in core_modules()
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
    assert module_file("repro.cli.assembly") == LIBRARY / "cli" / "assembly.py"


def test_the_runtime_imports_nothing_of_training_data_or_the_model():
    above = (
        "repro.training",
        "repro.data",
        "repro.model",
        "repro.attention",
        "repro.training.evaluation",
    )
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


def test_every_annex_module_is_in_a_feature_folder_with_its_commands_in_cli_py():
    annex = LIBRARY / "annex"
    loose = [p.name for p in annex.glob("*.py") if p.name != "__init__.py"]
    assert not loose, loose
    assert not (annex / "cli").exists()
    features = {p.parent.name for p in annex.glob("*/*.py")}
    assert features == {"authors", "claims", "models", "downstream", "perf", "groups"}
    with_commands = {m.split(".")[2] for m in assembly.ANNEX_COMMANDS}
    assert with_commands == {p.parent.name for p in annex.glob("*/cli.py")}
    assert all(m == f"repro.annex.{m.split('.')[2]}.cli" for m in assembly.ANNEX_COMMANDS)


def commands_of(family: str) -> list[str]:
    sub = argparse.ArgumentParser().add_subparsers()
    importlib.import_module(family).add_commands(sub)
    return list(sub.choices)


def test_the_assembly_knows_each_family_s_commands():
    core = [m for m in assembly.FAMILIES if m not in assembly.ANNEX_COMMANDS]
    assert [c for m in core for c in commands_of(m)] == list(assembly.CORE_COMMANDS)
    for family, names in assembly.ANNEX_COMMANDS.items():
        assert commands_of(family) == list(names), family
    assert set(assembly.ANNEX_COMMANDS) < set(assembly.FAMILIES)


def features_loaded_by(argv: list[str]) -> set[str]:
    """The annex's features whose modules `repro ARGV` imports, in a fresh interpreter."""
    script = (
        "import sys\nfrom repro.cli.assembly import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('repro.annex')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *argv], capture_output=True, text=True, check=True
    )
    return {m.split(".")[2] for m in eval(done.stdout.splitlines()[-1]) if m.count(".") > 1}


@pytest.mark.parametrize("command", assembly.CORE_COMMANDS)
def test_a_core_command_loads_no_annex_module(command):
    assert features_loaded_by([command, "--help"]) == set()


def test_an_annex_command_loads_its_own_feature_and_the_help_every_one():
    assert features_loaded_by(["describe", "--help"]) == {"perf"}
    assert features_loaded_by(["--help"]) == {
        "authors", "claims", "models", "downstream", "perf"
    }  # fmt: skip


def test_no_test_of_the_core_imports_the_annex():
    found = [
        f"{path.relative_to(REPO)}: {name}"
        for path in sorted((REPO / "tests" / "core").rglob("*.py"))
        for name in sorted(imported(path))
        if name.startswith("repro.annex")
    ]
    assert not found, found


def test_one_module_for_evaluation_and_one_for_stopping_on_a_signal():
    assert not [p for p in LIBRARY.rglob("*evaluat*.py") if p != LIBRARY / "training/evaluation.py"]
    handlers = [
        str(p.relative_to(LIBRARY))
        for p in LIBRARY.rglob("*.py")
        if "signal.signal(" in p.read_text() or "prctl(" in p.read_text()
    ]
    assert handlers == ["runtime/signals.py"]


def test_the_training_loop_enters_at_most_fifteen_of_the_package_s_files(
    token_dir, tiny_indices, tmp_path, monkeypatch
):
    """What a reader follows from the first step to the last of a tiny run: few files."""
    from repro.config import load_run
    from repro.training import loop, run

    entered, real = set(), loop.run_steps

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(str(LIBRARY)):
            entered.add(frame.f_code.co_filename)

    def traced(*args, **kwargs):
        sys.setprofile(profile)
        try:
            return real(*args, **kwargs)
        finally:
            sys.setprofile(None)

    monkeypatch.setattr(run, "run_steps", traced)
    run.train(load_run("tiny", "baseline"), token_dir, tiny_indices, tmp_path / "run")
    files = sorted(str(Path(f).relative_to(LIBRARY)) for f in entered)
    assert "training/loop.py" in files and len(files) <= 15, files
