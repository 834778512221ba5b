"""Every command the README and docs/ show in a `bash` or `sh` block works (the numbers they state:
test_doc_numbers.py).

The commands checked are `repro ...` (also as `python -m repro` or under `torchrun -m repro`),
`snakemake ...`, `papermill ...` and `python -m MODULE ...`. The quick tests parse each one with
its own program's parser (argparse, Snakemake's, papermill's); the slow ones run it on the tiny
preset in a scratch copy of the workflow (every preset name replaced by `tiny`; Snakemake's with
`-n`, since tests/workflow/test_pipeline.py builds the DAG itself). A command ending in a `# GPU`,
`# cluster` or `# download` comment needs a GPU, several GPUs or a cluster, or files from
elsewhere (the hub, the authors' folder, your own corpus): it is parsed, and a GPU or cluster
Snakemake command dry-run as written, but none is run (docs/testing.md)."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass

import pytest
import yaml
from conftest import REPO
from workflow_helpers import copy_workflow, snakemake_in_process

from repro.cli.assembly import build_parser

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
MARKERS = ("GPU", "cluster", "download")
PRESETS = re.compile(r"\b(smoke|screen|paper|large)\b")
# Programs the blocks run that these tests leave alone: set-up, lint, viewers, uploads, scripts.
OTHER_PROGRAMS = {
    ".",
    "apt-get",  # a system library (TCMalloc, docs/setup.md)
    "git",
    "pip",
    "python",
    "python3",
    "ruff",
    "tensorboard",
    "hf",
    "huggingface-cli",
    "jupyter",
    "lm_eval",  # its hf backend on an export: tests/annex/test_downstream.py runs it
}


@dataclass(frozen=True)
class Command:
    page: str
    line: int
    program: str  # repro, snakemake, papermill, or python (python -m MODULE)
    args: tuple[str, ...]  # after the program (for python: the module, then its arguments)
    marker: str | None

    def __str__(self):
        return f"{self.page}:{self.line}"

    def on_tiny(self) -> tuple[str, ...]:
        """The arguments at the tiny preset: every preset name replaced."""
        args = tuple(PRESETS.sub("tiny", a) for a in self.args)
        if self.program == "snakemake" and not any(a.startswith("preset=") for a in args):
            args = (*args, "--config", "preset=tiny") if "--config" not in args else args
            at = args.index("--config") + 1
            args = (*args[:at], "preset=tiny", *args[at:]) if "preset=tiny" not in args else args
        return args


def commands_of(text: str, page: str = "page") -> tuple[list[Command], list[str]]:
    """The commands of the `bash`/`sh` blocks of a page, and the programs of the other lines."""
    commands, others = [], []
    for block in re.finditer(r"^```(?:bash|sh)\n(.*?)^```", text, re.M | re.S):
        first = text[: block.start()].count("\n") + 2
        lines = block.group(1).split("\n")
        logical, start = "", None
        for number, line in enumerate(lines, first):
            start = number if start is None else start
            if line.rstrip().endswith("\\"):
                logical += line.rstrip()[:-1] + " "
                continue
            logical += line
            parsed = parse_line(logical, page, start)
            commands += parsed[0]
            others += parsed[1]
            logical, start = "", None
    return commands, others


def parse_line(line: str, page: str, number: int) -> tuple[list[Command], list[str]]:
    marker = re.search(r"#\s*(" + "|".join(MARKERS) + r")\b", line)
    marker = marker.group(1) if marker else None
    # `[--option VALUE]`: optional arguments, as usage lines write them.
    words = shlex.split(re.sub(r"\s\[--[^\]]*\]", "", line), comments=True)
    commands, others = [], []
    while words:
        end = words.index("&&") if "&&" in words else len(words)
        part, words = words[:end], words[end + 1 :]
        while part and re.fullmatch(r"[A-Z_]+=\S*", part[0]):  # OMP_NUM_THREADS=1 ...
            part = part[1:]
        if part[0] == "torchrun":
            part = part[part.index("-m") + 1 :]
        elif part[:3] == ["python", "-m", "repro"]:
            part = part[2:]
        if part[0] in ("repro", "snakemake", "papermill"):
            commands.append(Command(page, number, part[0], tuple(part[1:]), marker))
        elif part[:2] == ["python", "-m"]:
            commands.append(Command(page, number, "python", tuple(part[2:]), marker))
        else:
            others.append(part[0].split("/")[0] if "/" in part[0] else part[0])
    return commands, others


def all_commands() -> tuple[list[Command], list[str]]:
    commands, others = [], []
    for page in PAGES:
        found = commands_of(page.read_text(), str(page.relative_to(REPO)))
        commands += found[0]
        others += found[1]
    return commands, others


COMMANDS = all_commands()[0]


def of(program: str) -> list[Command]:
    return [c for c in COMMANDS if c.program == program]


def test_the_extraction_reads_blocks_markers_and_chains():
    text = (
        "```bash\nruff check && python -m pytest   # lint\n"
        "OMP_NUM_THREADS=1 python -m repro describe --preset paper \\\n"
        "    --group table1   # GPU\nrepro prepare --out d [--revision R]\n```\n"
        "```python\nrepro = 1\n```\n"
    )
    commands, others = commands_of(text)
    assert others == ["ruff"]
    pytest_, describe, prepare = commands
    assert (pytest_.program, pytest_.args, pytest_.marker) == ("python", ("pytest",), None)
    assert describe.args == ("describe", "--preset", "paper", "--group", "table1")
    assert (describe.line, describe.marker) == (3, "GPU")
    assert describe.on_tiny() == ("describe", "--preset", "tiny", "--group", "table1")
    assert prepare.args == ("prepare", "--out", "d")
    snake = Command("p", 1, "snakemake", ("main", "--config", "seeds=3"), None)
    assert snake.on_tiny() == ("main", "--config", "preset=tiny", "seeds=3")


def test_every_program_in_the_blocks_is_checked_or_known():
    others = set(all_commands()[1])
    assert others <= OTHER_PROGRAMS | {"benchmarks"}, others - OTHER_PROGRAMS
    assert {c.program for c in COMMANDS} == {"repro", "snakemake", "papermill", "python"}


@pytest.mark.parametrize("command", of("repro"), ids=str)
def test_repro_command_parses(command):
    build_parser().parse_args(list(command.args))


# A whole `repro train` written in a sentence ("or one run at a time, e.g. `repro train ...`"):
# a user copies it as it is, so it parses too.
INLINE_RUNS = [
    (f"{page.relative_to(REPO)}: {span}", span)
    for page in PAGES
    for span in re.findall(r"`(repro train --preset [^`]*)`", page.read_text())
]


@pytest.mark.parametrize("where,span", INLINE_RUNS, ids=[w for w, _ in INLINE_RUNS])
def test_a_run_shown_in_a_sentence_parses(where, span):
    build_parser().parse_args(shlex.split(span)[1:])


@pytest.mark.parametrize("command", of("snakemake"), ids=str)
def test_snakemake_command_parses(command):
    from snakemake.cli import parse_args

    parse_args(list(command.args))


@pytest.mark.parametrize("command", of("papermill"), ids=str)
def test_papermill_command_names_a_notebook_and_its_parameters(command):
    from papermill.cli import papermill

    given = papermill.make_context("papermill", list(command.args)).params
    notebook = json.loads((REPO / given["notebook_path"]).read_text())
    (cell,) = [c for c in notebook["cells"] if "parameters" in c["metadata"].get("tags", [])]
    declared = set(re.findall(r"^(\w+)\s*=", "".join(cell["source"]), re.M))
    named = {k for k, _ in given["parameters"]}
    named |= {k for y in given["parameters_yaml"] for k in yaml.safe_load(y)}
    assert named <= declared, f"{command}: {named - declared} not in {declared}"


@pytest.mark.parametrize("command", of("python"), ids=str)
def test_python_module_exists(command):
    assert importlib.util.find_spec(command.args[0]), command


# The slow tests run the commands in a workflow copy that holds the tiny preset's data (both
# corpora's folders) and the runs the pages name.
RUNS = ("baseline", "resgelu-lr3e-3", "mlp4.75", "seed1/baseline", "seed1/resgelu-lr3e-3")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, token_dir, tiny_indices):
    from repro.config import load_preset, load_run
    from repro.data.indices import write_indices
    from repro.rundir import publish
    from repro.training.run import train

    workdir = copy_workflow(tmp_path_factory.mktemp("doc-commands"))
    for corpus in ("python-docs", "openwebtext"):
        shutil.copytree(token_dir, workdir / "data" / corpus)
        shutil.copytree(tiny_indices, workdir / "data" / corpus / "indices" / "tiny")
    (workdir / "results" / "notebooks").mkdir(parents=True)  # as the workflow leaves it
    seed1_indices = tmp_path_factory.mktemp("seed1-indices")
    write_indices(load_preset("tiny").with_seed(1), token_dir, seed1_indices)
    for name in RUNS:
        seed, _, experiment = name.rpartition("/")
        run = load_run("tiny", experiment, seed=1 if seed else 0)
        out = workdir / "results" / "runs" / "tiny" / name
        train(run, token_dir, seed1_indices if seed else tiny_indices, out / "live")
        publish(out / "live", out)
    return workdir


# A report reads finished outputs and a download's folder is elsewhere: parsed only.
DRY_RUNNABLE = [c for c in of("snakemake") if c.marker != "download" and "--report" not in c.args]


@pytest.mark.slow
@pytest.mark.parametrize("command", DRY_RUNNABLE, ids=str)
def test_snakemake_command_dry_runs(command, workdir):
    args = command.args if command.marker else command.on_tiny()
    result = snakemake_in_process(workdir, *args, "-n")
    assert result.returncode == 0, f"{command}: {result.stderr[-3000:]}"


RUNNABLE = [c for c in COMMANDS if c.program in ("repro", "papermill") and not c.marker]


@pytest.mark.slow
@pytest.mark.parametrize("command", RUNNABLE, ids=str)
def test_command_runs_on_tiny(command, workdir, monkeypatch, tmp_path):
    from papermill.cli import papermill

    from repro.cli.assembly import main

    monkeypatch.chdir(workdir)
    args = list(command.on_tiny())
    if args[0] == "prepare":  # into a folder of its own: the workflow copy's data stay
        args[args.index("--out") + 1] = str(tmp_path / "prepared")
    if "--max-new-tokens" in args:  # the tiny model sees 32 tokens, the prompt's included
        args[args.index("--max-new-tokens") + 1] = "20"
    if command.program == "repro":
        assert main(args) == 0, command
    else:
        papermill.main(args, standalone_mode=False)


# `jupyter nbconvert LINE`s of the pages, each converting what a papermill command there wrote.
CONVERTS = [
    line
    for page_path in PAGES
    for line in page_path.read_text().splitlines()
    if line.startswith("jupyter nbconvert ")
]


@pytest.mark.slow
@pytest.mark.parametrize("line", CONVERTS)
def test_nbconvert_command_prints_no_warning(line, workdir, monkeypatch):
    from papermill.cli import papermill

    notebook = shlex.split(line)[-1]
    writer = next(c for c in of("papermill") if notebook in c.args)
    monkeypatch.chdir(workdir)
    papermill.main(list(writer.on_tiny()), standalone_mode=False)
    argv = [sys.executable, "-m", "jupyter", *shlex.split(line)[1:]]
    result = subprocess.run(argv, cwd=workdir, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    said = (result.stdout + result.stderr).splitlines()
    assert [s for s in said if re.search(r"WARNING|ERROR", s)] == []
    assert (workdir / notebook).with_suffix(".html").is_file()
