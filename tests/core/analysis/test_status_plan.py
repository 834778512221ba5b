"""`repro status` beside the workflow's plan (repro.config.plan): the runs `all` trains that have
no folder yet are queued, "k of n planned runs done" counts the completed ones, and a config.yaml
that cannot be read is one line, the runs there are listed all the same."""

import os

import pytest
from conftest import REPO
from workflow_helpers import copy_workflow

from repro.cli.assembly import main
from repro.config import load_experiments

EXPERIMENTS = load_experiments(directory=REPO / "config")
# Tiny's plan at one seed: Table 1's runs (its report.equal_rate adds the linear query at the
# nonlinear one's rate), then Figure 2's sweep, each once.
TINY_TABLE1 = [
    *EXPERIMENTS.groups["table1"], "baseline-wd3.125e-2-lr3e-3"
]  # fmt: skip
TINY_PLAN = list(dict.fromkeys(TINY_TABLE1 + EXPERIMENTS.groups["figure2"]))


def status(capsys, runs, config_dir, *args) -> tuple[list[list[str]], list[str], list[str]]:
    """`repro status` of runs: its rows (preset, seed, experiment, status, folder), its other
    lines, and what it said on stderr."""
    argv = ["status", "--runs-dir", str(runs), "--config-dir", str(config_dir), *args]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["preset", "seed", "experiment", "status"], out
    rows = [line.split() for line in lines[1:] if not line.endswith("done")]
    return [r[:4] + r[-1:] for r in rows], [line for line in lines if line.endswith("done")], err


@pytest.fixture
def runs(tmp_path, write_run):
    """The tiny preset's baseline completed, mlp4.75 still running, as the workflow leaves them."""
    root = tmp_path / "runs"
    write_run(root / "tiny" / "baseline", "baseline", {0: 6.0, 12: 5.0}, last_step=12)
    write_run(root / "tiny" / "mlp4.75" / "live", "mlp4.75", {0: 6.0}, last_step=5,
              status="running", step_time_s=0.5)  # fmt: skip
    return root


@pytest.fixture
def workflow(tmp_path):
    """A copy of the workflow, whose config.yaml a test edits."""
    return copy_workflow(tmp_path / "workflow")


def edit_config(workflow, old: str, new: str) -> None:
    path = workflow / "config" / "config.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_planned_runs_without_a_folder_are_queued(runs, capsys):
    rows, done, err = status(capsys, runs, REPO / "config", "--preset", "tiny")
    assert err == ""
    assert rows[:2] == [
        ["tiny", "0", "baseline", "completed", "tiny/baseline"],
        ["tiny", "0", "mlp4.75", "running", "tiny/mlp4.75"],
    ]
    queued = [n for n in TINY_PLAN if n not in ("baseline", "mlp4.75")]
    assert rows[2:] == [["tiny", "0", n, "queued", f"tiny/{n}"] for n in queued]
    assert done == [f"1 of {len(TINY_PLAN)} planned runs done"]  # the running one is not done


def test_without_a_preset_the_configured_one_is_planned(runs, capsys):
    """config.yaml's preset (smoke): its runs queued below the tiny runs there are."""
    rows, done, _ = status(capsys, runs, REPO / "config")
    assert [r[0] for r in rows[:2]] == ["tiny", "tiny"]
    assert {r[0] for r in rows[2:]} == {"smoke"} and {r[3] for r in rows[2:]} == {"queued"}
    assert done == [f"0 of {len(rows) - 2} planned runs done"]


def test_before_any_run_every_planned_run_is_queued(tmp_path, capsys):
    rows, done, _ = status(capsys, tmp_path / "no-runs-yet", REPO / "config", "--preset", "tiny")
    assert [r[2] for r in rows] == TINY_PLAN and {r[3] for r in rows} == {"queued"}
    assert done == [f"0 of {len(TINY_PLAN)} planned runs done"]


def test_seeds_above_one_plan_each_seed_s_runs_in_its_folder(runs, workflow, capsys):
    edit_config(workflow, "seeds: 1 ", "seeds: 3 ")
    rows, done, _ = status(capsys, runs, workflow / "config", "--preset", "tiny")
    for seed in (1, 2):
        assert [r for r in rows if r[1] == str(seed)] == [
            ["tiny", str(seed), n, "queued", f"tiny/seed{seed}/{n}"] for n in TINY_TABLE1
        ]
    assert done == [f"1 of {len(TINY_PLAN) + 2 * len(TINY_TABLE1)} planned runs done"]


def test_extra_experiments_are_planned_at_seed_zero(runs, workflow, capsys):
    edit_config(workflow, "extra_experiments: []", "extra_experiments: [identity, baseline]")
    rows, done, _ = status(capsys, runs, workflow / "config", "--preset", "tiny")
    assert rows[-1] == ["tiny", "0", "identity", "queued", "tiny/identity"]
    assert done == [f"1 of {len(TINY_PLAN) + 1} planned runs done"]  # the baseline once


def fifo(path):
    path.unlink()
    os.mkfifo(path)


def symlink_loop(path):
    path.unlink()
    path.symlink_to(path)


@pytest.mark.parametrize(
    "damage, said",
    [
        (lambda p: p.write_text("seeds: [\n"), "not valid YAML"),
        (lambda p: p.write_text("seeds: .inf\n"), "seeds: inf is not a finite number"),
        (lambda p: p.write_text("seeds: 0\n"), "seeds: 0 is less than the minimum of 1"),
        (lambda p: p.write_text("seeds: ²\n"), "seeds: '²' is not of type 'integer'"),
        (lambda p: p.write_text(f"seeds: {'9' * 5000}\n"), "an integer of 5,000 digits"),
        (lambda p: p.write_text("extra_experiments: [nope]\n"), "unknown experiment 'nope'"),
        (lambda p: p.write_text("preset: ../../etc\n"), "not a preset's name"),
        (lambda p: p.write_text("preset: nowhere\n"), "presets/nowhere.yaml: no such file"),
        (lambda p: p.write_text("- a list\n"), "is not of type 'object'"),
        (lambda p: p.write_bytes(b"preset: sm\0oke\n"), "not valid YAML"),
        (lambda p: p.unlink(), "config.yaml: no such file"),
        (fifo, "not a regular file"),
        (symlink_loop, "symbolic link loop"),
    ],
    ids=[
        "yaml", "inf", "zero", "superscript", "5000-digits", "unknown-extra", "dotdot", "preset",
        "list", "nul", "missing", "fifo", "symlink-loop",
    ],
)  # fmt: skip
def test_a_damaged_config_is_one_line_and_the_runs_are_listed(runs, workflow, capsys, damage, said):
    config = workflow / "config" / "config.yaml"
    damage(config)
    rows, done, err = status(capsys, runs, workflow / "config")  # config.yaml's preset
    assert [r[3] for r in rows] == ["completed", "running"] and done == []
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("repro: warning: "), err
    assert str(workflow / "config") in lines[0] and said in lines[0], err  # the file, the value
    assert lines[0].endswith("the workflow's planned runs are not listed"), err
    assert "Traceback" not in err and not (workflow / "results").exists()


def test_a_config_folder_with_no_workflow_beside_it_is_one_line(runs, tmp_path, capsys):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text("preset: tiny\n")
    rows, done, err = status(capsys, runs, tmp_path / "config", "--preset", "tiny")
    assert len(rows) == 2 and done == []
    schema = tmp_path / "workflow" / "schemas" / "config.schema.yaml"
    assert err.startswith(f"repro: warning: {schema}: no such file") and err.count("\n") == 1


@pytest.mark.parametrize(
    "config_dir, said",
    [
        ("a\0b", "'a\\x00b': no folder's name holds a NUL"),
        ("nowhere", "nowhere/config.yaml: no such file"),
        ("a-file", "a-file/config.yaml: cannot be read (Not a directory)"),
    ],
)
def test_a_config_dir_that_is_no_workflow_s_is_one_line(runs, tmp_path, capsys, config_dir, said):
    (tmp_path / "a-file").write_text("preset: tiny\n")
    where = config_dir if "\0" in config_dir else tmp_path / config_dir
    rows, done, err = status(capsys, runs, where, "--preset", "tiny")
    assert len(rows) == 2 and done == []
    assert err.count("\n") == 1 and said in err and "Traceback" not in err, err
