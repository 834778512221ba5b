"""Bad input stops the workflow before any job runs, with a message naming the key or path."""

import multiprocessing
import re
import shlex
import signal

import pytest
from conftest import random_token_files
from workflow_helpers import (
    REPO,
    assert_group_planned,
    copy_workflow,
    snakemake,
    snakemake_in_process,
)

from repro.config import load_config
from repro.config.plan import planned_runs

# A path as a careless or hostile user may name it: a space, and shell code.
HOSTILE = "my $(touch PWNED) data"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return copy_workflow(tmp_path_factory.mktemp("workflow"))


def assert_stopped(result, workdir, *phrases):
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    for phrase in phrases:
        assert phrase in output, output
    assert not (workdir / "data").exists() and not (workdir / "results").exists(), "a job ran"


def tree(root):
    """Every path under root but Snakemake's own records (.snakemake/), with its mtime."""
    return {p: p.stat().st_mtime_ns for p in root.rglob("*") if ".snakemake" not in p.parts}


@pytest.fixture(scope="module")
def two_seeds(tmp_path_factory):
    """The dry run of `all` at two seeds with its shell commands, its data folder a hostile path,
    in a fresh copy, and the copy's tree before it: one dry run for the tests that read it."""
    workdir = copy_workflow(tmp_path_factory.mktemp("two-seeds"))
    before = tree(workdir)
    result = snakemake_in_process(
        workdir, "-n", "-p", "--cores", "1", "all", "--config", "seeds=2", f"data_dir={HOSTILE}"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return workdir, before, result


def test_a_dry_run_creates_nothing(two_seeds):
    workdir, before, _ = two_seeds
    assert tree(workdir) == before


@pytest.mark.slow  # Snakemake running a job, as a user starts it
def test_the_console_points_to_repro_status_for_training_progress(tmp_path):
    # Said once as a workflow with jobs to run starts (a dry run runs nothing and says nothing).
    # The job is drawing the indices of token files already there: a second, not a corpus.
    workdir = copy_workflow(tmp_path)
    random_token_files(workdir / "data" / "python-docs")
    target = "data/python-docs/indices/tiny/indices.json"
    result = snakemake(workdir, "--cores", "1", "--config", "preset=tiny", "--", target)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        "training progress: `repro status --preset tiny` shows the step, loss and ETA of every "
        "run; a run's own log is results/runs/<preset>/<experiment>/live/train.log"
    ) in result.stdout + result.stderr


def test_configured_paths_reach_the_shell_quoted(two_seeds):
    workdir, _, result = two_seeds
    commands = re.findall(r"^Shell command: (.+)$", result.stdout, re.M)
    assert {"prepare", "indices", "train"} <= set(re.findall(r"repro (\w+)", "".join(commands)))
    assert any(c.startswith("papermill") for c in commands), commands
    for command in commands:
        words = shlex.split(command)  # as the shell splits it: the path stays one word
        hostile = [w for w in words if "PWNED" in w]
        assert all(w.startswith(HOSTILE) for w in hostile), command
        assert command.count("PWNED") == len(hostile), command  # each one inside a word
    assert not list(workdir.rglob("PWNED"))


def test_dry_run_of_the_default_config(default_plan):
    assert "train" in default_plan.stdout and "table1" in default_plan.stdout


def trained(plan: str) -> list[str]:
    """The run folders (below results/runs/) that a dry run's training jobs write."""
    blocks = re.findall(r"^rule train(?:_seed)?:\n((?:    .*\n?)+)", plan, re.M)
    return [re.search(r"^    output: results/runs/(\S+)/metrics\.csv,", b, re.M)[1] for b in blocks]


@pytest.mark.parametrize("seeds", [1, 2])
def test_all_trains_the_runs_repro_status_plans(default_plan, two_seeds, seeds):
    """The DAG of `all` and `repro status`'s queued rows are one plan (repro.config.plan)."""
    plan = default_plan.stdout if seeds == 1 else two_seeds[2].stdout
    preset, experiments = load_config("smoke", REPO / "config")
    planned = [run.folder for run in planned_runs(preset, experiments, seeds)]
    assert sorted(trained(plan)) == sorted(planned) and len(set(planned)) == len(planned)


def test_dry_run_of_two_seeds(two_seeds):
    _, _, result = two_seeds
    for job in ("train_seed", "indices_seed", "table1_seeds"):
        assert job in result.stdout
    assert "results/runs/smoke/seed1/resgelu-lr3e-3/metrics.csv" in result.stdout
    assert "--seed 1 " in result.stdout  # the seed's rule trains seed 1 on its own indices
    assert f"{HOSTILE}/python-docs/indices/smoke/seed1/train.npy" in result.stdout


def test_downstream_scores_every_seed_s_table1_runs(workdir):
    """At two seeds results/downstream.csv pairs seed 1's scores with the baseline's of seed 1."""
    config = ["--config", "seeds=2", "downstream_tasks=[hellaswag]"]
    result = snakemake_in_process(
        workdir, "-n", "-p", "--cores", "1", "results/downstream.csv", *config
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "downstream_run_seed" in result.stdout
    for seed in ("", "seed1/"):
        for name in ("baseline", "resgelu-lr3e-3"):
            assert f"results/downstream/smoke/{seed}{name}/results.json" in result.stdout
    assert "--checkpoint results/runs/smoke/seed1/baseline/live/ckpt.pt" in result.stdout


@pytest.mark.parametrize("preset", ["tiny", "screen"])
def test_dry_run_of_the_ablation(group_plans, preset):
    runs = ("bottleneck-linear-lr3e-3", "seed1/resgelu-qknorm-lr3e-3", "seed1/baseline-qknorm")
    assert_group_planned(group_plans(preset), "ablation", preset, runs)


@pytest.mark.parametrize(
    "args,named",
    [
        (["--config", "preset=huge"], "unknown preset 'huge'"),
        (["--config", "extra_experiments=[nope]"], "unknown experiment 'nope'"),
        (["results/runs/smoke/nope/metrics.csv"], "unknown experiment 'nope'"),
        (["results/runs/huge/baseline/metrics.csv"], "unknown preset 'huge'"),
        (["--config", "train_threads=two"], "train_threads"),  # a value of the wrong type
        (["--config", "prest=paper"], "prest"),  # an unknown key
        (["--config", "seeds=0"], "seeds"),
    ],
)
def test_bad_input_stops_the_dag_naming_it(workdir, args, named):
    result = snakemake_in_process(workdir, "-n", "--cores", "1", *args)
    assert_stopped(result, workdir, named)


@pytest.mark.parametrize(
    "target,closest", [("results/tabel1.csv", "results/table1.csv"), ("mian", "main")]
)
def test_a_misspelt_target_names_the_closest_and_the_targets(workdir, target, closest):
    result = snakemake_in_process(workdir, "-n", "--cores", "1", target)
    assert_stopped(result, workdir, f"no rule makes {target}", f"did you mean {closest}?")
    assert "results/figures/figure1.png" in result.stdout + result.stderr  # the targets


def test_the_command_stops_on_bad_input_with_a_non_zero_exit(workdir):
    # The command as a user starts it, a process of its own: the checks above run its command
    # line in the test's process, and read the same exit status and message.
    result = snakemake(workdir, "-n", "--cores", "1", "--config", "preset=huge")
    assert_stopped(result, workdir, "unknown preset 'huge'")


def test_missing_corpus(workdir, tmp_path):
    config = tmp_path / "paper.yaml"
    config.write_text(f"preset: paper\nopenwebtext:\n  data_files: {tmp_path}/owt/*.parquet\n")
    result = snakemake_in_process(workdir, "-n", "--cores", "1", "--configfile", str(config))
    assert_stopped(result, workdir, "openwebtext.data_files", f"{tmp_path}/owt/*.parquet")


def test_a_dry_run_in_this_process_leaves_its_signal_handlers_and_pools_work(tmp_path):
    """Snakemake's scheduler takes SIGTERM for itself; a pool stopped later in this process (as
    datasets' loaders stop theirs) must still end its children."""
    before = signal.getsignal(signal.SIGTERM)
    result = snakemake_in_process(copy_workflow(tmp_path), "-n", "--cores", "1", "all")
    assert result.returncode == 0, result.stdout + result.stderr
    assert signal.getsignal(signal.SIGTERM) is before
    with multiprocessing.get_context("fork").Pool(2) as pool:
        assert pool.map(abs, [-1, -2]) == [1, 2]
