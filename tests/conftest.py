"""Shared fixtures: token files and indices (the core library's tests), and fabricated run
directories in the format `repro train` writes (the results, plots and notebook tests)."""

import csv
import hashlib
import json
import os
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import yaml

from repro.config import Report, load_config, load_preset, load_run, resolve_run
from repro.config.schema import ConfigError
from repro.data.indices import write_indices
from repro.rundir import METRICS_COLUMNS, RunRecord

# No test reaches the network: Hugging Face libraries (read when first imported, here and in the
# tests' subprocesses) fail at once instead of downloading.
os.environ["HF_HUB_OFFLINE"] = os.environ["HF_DATASETS_OFFLINE"] = "1"

# One CPU thread for each test process and the processes it starts: the tests' models are tiny,
# where a second thread gains nothing, and the quick suite runs a test process per core
# (`pytest -n auto`), which more threads would only make contend. A test of thread counts sets
# its own.
os.environ["OMP_NUM_THREADS"] = "1"
torch.set_num_threads(1)


def write_token_files(data_dir, train_tokens=30_000, val_tokens=6_000, seed=0):
    """Random token files with the manifest `repro prepare` writes (spec §5's layout)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    splits = {}
    for split, n in (("train", train_tokens), ("val", val_tokens)):
        tokens = rng.integers(0, 50257, n, dtype=np.uint16)
        (data_dir / f"{split}.bin").write_bytes(tokens.tobytes())
        splits[split] = {
            "file": f"{split}.bin",
            "documents": n // 100,
            "tokens": n,
            "sha256": hashlib.sha256(tokens.tobytes()).hexdigest(),
        }
    manifest = {"source": {"kind": "test"}, "tokenizer": {"name": "gpt2"}, "splits": splits}
    (data_dir / "manifest.json").write_text(json.dumps(manifest))
    return data_dir


@pytest.fixture(autouse=True)
def plenty_of_disk(monkeypatch):
    """No test reads the machine's real free space: preparing needs about 72 GB.
    The tests of a full disk replace free_bytes again."""
    import repro.data.corpus

    monkeypatch.setattr(repro.data.corpus, "free_bytes", lambda path: 10**15)


@pytest.fixture(scope="session")
def token_dir(tmp_path_factory):
    return write_token_files(tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="session")
def tiny_indices(token_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("indices")
    write_indices(load_preset("tiny"), token_dir, out)
    return out


@pytest.fixture(scope="session")
def tiny_baseline_run(token_dir, tiny_indices, tmp_path_factory):
    """The tiny baseline run, trained once without interruption and only read: what a stopped
    and resumed run must end with."""
    from repro.train import train

    out = tmp_path_factory.mktemp("tiny-baseline") / "run"
    train(load_run("tiny", "baseline"), token_dir, tiny_indices, out)
    return out


REPO = Path(__file__).resolve().parents[1]


def run_checkout_notebook(name: str, folder: Path, **parameters) -> None:
    """notebooks/<name>.ipynb of this checkout, executed into folder/ at the tiny preset with this
    checkout's config/ and `parameters` (paths given as text)."""
    import papermill

    papermill.execute_notebook(
        str(REPO / "notebooks" / f"{name}.ipynb"),
        str(folder / f"{name}.ipynb"),
        parameters={"preset": "tiny", "config_dir": str(REPO / "config")}
        | {k: str(v) if isinstance(v, Path) else v for k, v in parameters.items()},
        cwd=str(REPO),
        progress_bar=False,
        engine_name="repro",
    )


def train_args(data, indices, out, *extra, preset="tiny", experiments_file=None) -> list[str]:
    """The arguments of `repro train` (for repro.cli.main) of the baseline at `preset`."""
    more = ["--experiments-file", str(experiments_file)] if experiments_file else []
    return [
        "train",
        "--preset",
        str(preset),
        "--experiment",
        "baseline",
        *more,
        "--data",
        str(data),
        "--indices",
        str(indices),
        "--out",
        str(out),
        *map(str, extra),
    ]


@pytest.fixture(scope="session")
def default_plan(tmp_path_factory):
    """The dry run of `all` with the default config and its shell commands (`snakemake -n -p`),
    in a fresh copy of the workflow: one Snakemake process for the tests that read that plan."""
    from workflow_helpers import copy_workflow, snakemake

    workdir = copy_workflow(tmp_path_factory.mktemp("default-plan"))
    result = snakemake(workdir, "-n", "-p", "--cores", "1", "all")
    assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.fixture(scope="session")
def authors_workflow(tmp_path_factory):
    """The workflow at the tiny preset given the authors' artefacts of the baseline and mlp4.75,
    in a folder whose name holds shell code: the job that finds their runs run, then the dry run
    of `all` with its shell commands. Built once for the tests that read that plan."""
    from authors_helpers import write_artefacts
    from workflow_helpers import copy_workflow, snakemake

    root = tmp_path_factory.mktemp("authors-workflow")
    preset, experiments = load_config("tiny")
    names = ["baseline", "mlp4.75"]
    folder = write_artefacts(
        root / "my $(touch PWNED) drive", {n: resolve_run(preset, experiments[n]) for n in names}
    )
    workdir = copy_workflow(root / "wf")
    config = ["--config", "preset=tiny", f"authors_artefacts={folder}"]
    # Which of their runs there are is found by a job, not while the workflow is parsed.
    found = snakemake(workdir, "--cores", "1", "--until", "authors_runs", *config)
    assert found.returncode == 0, found.stdout + found.stderr
    dry_run = snakemake(workdir, "-n", "-p", "--cores", "1", "all", *config)
    assert dry_run.returncode == 0, dry_run.stdout + dry_run.stderr
    return SimpleNamespace(root=root, workdir=workdir, folder=folder, names=names, dry_run=dry_run)


def shortened(run, max_step: int, **runtime):
    """`run` cut to steps 0..max_step (its table step the last evaluation in them), with runtime
    overrides: the relations hold, so the run is one training accepts."""
    last_evaluation = max_step - max_step % run.train.eval_interval
    return replace(
        run, train=replace(run.train, max_step=max_step), report=Report(last_evaluation)
    ).with_runtime(**runtime)


def write_run(
    run_dir: Path,
    experiment: str,
    val: dict[int, float],
    *,
    last_step: int,
    preset: str = "tiny",
    seed: int = 0,
    status: str = "completed",
    diverged_step: int | None = None,
    non_embedding_params: int = 1000,
    train_offset: float = -0.05,
    step_time_s: float = 0.01,
) -> Path:
    """A run directory as `repro train` leaves it: metrics.csv (eval columns filled at the steps
    of `val` only; train eval = val + train_offset) and run.json."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "metrics.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, METRICS_COLUMNS)
        writer.writeheader()
        for step in range(last_step + 1):
            row = {
                "step": step,
                "lr": 1e-3,
                "train_loss": 10.0 - step * 0.1,
                "tokens_seen": step * 128,
                "step_time_s": step_time_s,
                "tokens_per_s": 12800,
            }
            if step in val:
                row.update(
                    eval_val_loss=val[step],
                    eval_val_std=0.01,
                    eval_train_loss=val[step] + train_offset,
                    eval_train_std=0.01,
                )
            writer.writerow({k: row.get(k, "") for k in METRICS_COLUMNS})
    try:  # recorded as `repro train` records it, where the experiment is one of the config's
        run = load_run(preset, experiment, seed=seed)
        identity, config = run.identity(), run.to_dict()
    except ConfigError:
        identity, config = {}, {}
    RunRecord(
        status=status,
        preset=preset,
        experiment=experiment,
        identity=identity,
        config=config,
        params={
            "total_params": non_embedding_params + 500,
            "non_embedding_params": non_embedding_params,
        },
        tokens_per_step=128,
        last_step=last_step,
        diverged_step=diverged_step,
    ).write(run_dir)
    return run_dir


@pytest.fixture
def tiny_runs(tmp_path) -> Path:
    """Runs of the Table 1 experiments at the tiny preset (evaluations at 0, 4, 8, 12; table
    step 12): the nonlinear queries beat the baseline throughout, most at step 4."""
    runs = tmp_path / "runs" / "tiny"
    steps = [0, 4, 8, 12]
    baseline = [10.0, 8.0, 6.0, 5.0]
    gains = {
        "baseline": [0, 0, 0, 0],
        "mlp4.75": [0, 0.01, 0.02, 0.04],
        "mlp4.75-scaled": [0, 0.02, -0.01, 0.03],
        "resgelu-lr2.6e-3": [0, 0.3, 0.1, 0.06],
        "resgelu-lr3e-3": [0, 0.4, 0.12, 0.07],
    }
    for name, gain in gains.items():
        write_run(
            runs / name,
            name,
            {s: b - g for s, b, g in zip(steps, baseline, gain)},
            last_step=12,
            non_embedding_params=2000 if name.startswith("mlp") else 1000,
        )
    return runs


def write_experiments(path: Path, name: str, **fields) -> Path:
    """An experiments file of one experiment (query mode, ratio, rates, decay, then `fields`),
    which is also the baseline and plays both claims' roles."""
    experiment = {
        "query_mode": "linear",
        "mlp_ratio": 4,
        "lr_max": 1.0e-3,
        "lr_min": 1.0e-4,
        "weight_decay": 0.1,
        **fields,
    }
    path.write_text(
        yaml.safe_dump(
            {
                "experiments": {name: experiment},
                "groups": {},
                "baseline": name,
                "claims": {"larger_control": name, "unstable": name},
            }
        )
    )
    return path
