"""Shared fixtures: token files and indices (the core library's tests), the tiny baseline run
`repro train` writes and run directories derived from it by the package's own writers (the
results, plots and notebook tests, in derived_runs), and the helpers every test file uses."""

import csv
import gc
import os
import re
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from repro.config import Report, load_preset
from repro.data.tokens import write_token_files
from repro.runtime import allocator

# No test reaches the network: Hugging Face libraries (read when first imported, here and in the
# tests' subprocesses) fail at once instead of downloading.
os.environ["HF_HUB_OFFLINE"] = os.environ["HF_DATASETS_OFFLINE"] = "1"

# One CPU thread for each test process and the processes it starts: the tests' models are tiny,
# where a second thread gains nothing, and the quick suite runs a test process per core
# (`pytest -n auto`), which more threads would only make contend. A test of thread counts sets
# its own. (torch's own setting once it is imported, in pytest_collection.)
os.environ["OMP_NUM_THREADS"] = "1"

# The tests' processes allocate as `repro train` does (repro.runtime.allocator): under TCMalloc
# where it is installed. Set here, before pytest-xdist starts its workers, which inherit it as do
# the processes they start: the workers train in-process, where glibc's page faults take a sixth
# of a training test's CPU. The allocator's own tests take it out where they need glibc's.
if not allocator.active() and (tcmalloc := allocator.tcmalloc_library()):
    os.environ["LD_PRELOAD"] = " ".join(filter(None, [tcmalloc, os.environ.get("LD_PRELOAD")]))

GiB = 2**30

# write_run, tiny_runs (derived_runs); the workflow's plans, built once a session (workflow_plans)
pytest_plugins = ["derived_runs", "workflow_plans"]


def freeze_what_is_held() -> None:
    """What the process holds that is still reachable (most of a million objects: the libraries
    imported so far, torch's, pandas', scipy's, and the session's fixtures) is frozen, out of every
    later garbage collection, which would otherwise walk it all again: a fifth of a second or more
    each full collection, tens of them in a worker's life (torch's compiler and the package's probe
    call gc.collect too). What the tests make is collected as before; cyclic garbage of what was
    frozen stays, which a test process can afford."""
    gc.collect()
    gc.freeze()


def pytest_collection(session):
    """In each process that runs tests, before the test modules are imported; not in
    pytest-xdist's controller, which collects nothing: this file imports no torch, so that the
    controller starts its workers seconds sooner."""
    import torch

    torch.set_num_threads(1)
    freeze_what_is_held()  # torch and the package


# The youngest generation collected every 20,000 allocations rather than 700: the tests' pandas
# frames and configurations are short-lived, and fewer survive into the older generations, whose
# collections are the slow ones. With the freezes, the quick suite's two workers spend 5 s in the
# garbage collector against 26 s.
gc.set_threshold(20_000, 10, 10)


@pytest.fixture(scope="module", autouse=True)
def frozen_before_each_test_file():
    freeze_what_is_held()


def random_token_files(data_dir, train_tokens=30_000, val_tokens=6_000, seed=0):
    """Random token files and their manifest, written by the package's own writer."""
    rng = np.random.default_rng(seed)
    counts = {"train": train_tokens, "val": val_tokens}
    write_token_files(
        data_dir,
        {split: rng.integers(0, 50257, n, dtype=np.uint16) for split, n in counts.items()},
        documents={split: n // 100 for split, n in counts.items()},
        source={"kind": "test"},
        tokenizer={"name": "gpt2"},
    )
    return data_dir


@pytest.fixture(autouse=True)
def plenty_of_disk(monkeypatch):
    """No test reads the machine's real free space: preparing needs about 72 GB.
    The tests of a full disk replace free_bytes again."""
    import repro.data.corpus

    monkeypatch.setattr(repro.data.corpus, "free_bytes", lambda path: 10**15)


@pytest.fixture(scope="session")
def token_dir(tmp_path_factory):
    return random_token_files(tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="session")
def tiny_indices(token_dir, tmp_path_factory):
    from repro.data.indices import write_indices

    out = tmp_path_factory.mktemp("indices")
    write_indices(load_preset("tiny"), token_dir, out)
    return out


@pytest.fixture(scope="session")
def tiny_baseline_run(token_dir, tiny_indices, tmp_path_factory):
    """The tiny baseline run, trained by `repro train` once per test process without interruption
    and only read: what a stopped and resumed run must end with, and what the analysis tests' runs
    derive from. tests/core/training/test_stored_losses.py checks its numbers against the stored
    ones: a difference fails that check alone, not every test that reads the run."""
    from repro.cli.assembly import main

    out = tmp_path_factory.mktemp("tiny-baseline") / "run"
    assert main(train_args(token_dir, tiny_indices, out)) == 0
    return out


REPO = Path(__file__).resolve().parents[1]


def read_metrics(run_dir):
    """The rows of run_dir/metrics.csv as text, as the file holds them."""
    with open(run_dir / "metrics.csv") as f:
        return list(csv.DictReader(f))


def without_timing(rows):
    """Metrics rows without their timings, which differ between runs of the same numbers."""
    return [{k: v for k, v in r.items() if k not in ("step_time_s", "tokens_per_s")} for r in rows]


def edited_tiny_preset(tmp_path, name: str = "edited.yaml", **sections) -> str:
    """The tiny preset with keys of its sections replaced (`train={...}`, `report={...}`), as the
    YAML file tmp_path/name, whose path `load_preset` and `repro --preset` take."""
    data = yaml.safe_load((REPO / "config" / "presets" / "tiny.yaml").read_text())
    for section, values in sections.items():
        data[section].update(values)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return str(path)


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


def train_args(
    data, indices, out, *extra, preset="tiny", experiment="baseline", experiments_file=None
) -> list[str]:
    """The arguments of `repro train` (for repro.cli.assembly.main, or after `python -m repro`) of
    `experiment` at `preset`, then `extra`."""
    more = ["--experiments-file", str(experiments_file)] if experiments_file else []
    return [
        "train",
        "--preset",
        str(preset),
        "--experiment",
        experiment,
        *more,
        "--data",
        str(data),
        "--indices",
        str(indices),
        "--out",
        str(out),
        *map(str, extra),
    ]


def one_line_error(capsys, argv, pattern: str, *, after_progress: bool = False) -> str:
    """`repro ARGV` exits 2 with one line on stderr, `repro: error: ...`, matching the regular
    expression `pattern` (with after_progress, the last line, after datasets' progress bars);
    return that line."""
    from repro.cli.assembly import main

    capsys.readouterr()
    assert main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert "Traceback" not in err and (after_progress or len(lines) == 1), err
    assert lines[-1].startswith("repro: error: ") and re.search(pattern, lines[-1]), err
    return lines[-1]


PRECIOUS = "a result that must survive\n"


def precious(tmp_path) -> Path:
    """A file of the user's that no command may overwrite or write through."""
    path = tmp_path / "precious.txt"
    path.write_text(PRECIOUS)
    return path


def shortened(run, max_step: int, **runtime):
    """`run` cut to steps 0..max_step (its table step the last evaluation in them), with runtime
    overrides: the relations hold, so the run is one training accepts."""
    last_evaluation = max_step - max_step % run.train.eval_interval
    return replace(
        run, train=replace(run.train, max_step=max_step), report=Report(last_evaluation)
    ).with_runtime(**runtime)


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


def write_our_checkpoint(path, model, step: int = 7):
    """A checkpoint of `model` as training writes one (its identity and model), without training."""
    import torch

    from repro.training.checkpoints import save_checkpoint

    optimizer = torch.optim.AdamW(model.parameters())
    shape = asdict(model.config)  # what training writes: the run's identity and the model
    save_checkpoint(path, model, optimizer, step, {"identity": {"model": shape}, "model": shape})
    return path


def edit_checkpoint(path, edit):
    """The checkpoint at `path` loaded, changed in place by `edit(state)`, and saved again."""
    import torch

    state = torch.load(path, weights_only=True)
    edit(state)
    torch.save(state, path)
