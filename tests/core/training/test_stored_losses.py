"""The tiny baseline's numbers against the stored ones (tests/helpers/stored_losses.py): within a
stated bound on any machine, beyond it a failure of this check alone that names both machines."""

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import stored_losses
import torch
from stored_losses import TOLERANCE, check, differences, store, trained

from repro.config import load_run
from repro.runtime.machine import cpu_capability, cpu_model
from repro.training.run import train

ELSEWHERE = {
    "cpu": "Apple M2",
    "cpu_capability": "DEFAULT",
    "torch_version": "2.13.0",
    "math_libraries": ["BLAS: accelerate"],
}


def test_the_tiny_baseline_trains_the_stored_numbers(tiny_baseline_run):
    check(tiny_baseline_run)


def test_the_stored_file_names_the_machine_that_wrote_it():
    written_by = json.loads(stored_losses.STORED.read_text())["written_by"]
    assert all(written_by[key] for key in stored_losses.MACHINE), written_by


def nudged(numbers: dict, ulps: int) -> dict:
    """`numbers` with each loss and standard deviation moved by `ulps` float32 ulps (up), as
    another machine's rounding moves them."""
    rows = []
    for row in numbers["rows"]:
        row = dict(row)
        for column in stored_losses.FLOAT32:
            if row[column] is not None:
                value = np.float32(row[column])
                for _ in range(ulps):
                    value = np.nextafter(value, np.float32(np.inf))
                row[column] = float(value)
        rows.append(row)
    return {"written_by": ELSEWHERE, "rows": rows}


def test_another_machines_rounding_is_within_the_bound(tiny_baseline_run, tmp_path):
    """Two ulps of every value: the most that machines were measured to differ by."""
    path = tmp_path / "stored.json"
    path.write_text(json.dumps(nudged(trained(tiny_baseline_run), 2)))
    check(tiny_baseline_run, path)


def test_a_change_of_training_beyond_the_bound_fails_naming_both_machines(
    token_dir, tiny_indices, tiny_baseline_run, tmp_path
):
    """The peak learning rate 0.1% higher: the evaluation loss moves by about 80 ulps."""
    path = tmp_path / "stored.json"
    store(tiny_baseline_run, path)
    path.write_text(json.dumps(json.loads(path.read_text()) | {"written_by": ELSEWHERE}))
    run = load_run("tiny", "baseline")
    run = replace(run, optimizer=replace(run.optimizer, lr_max=run.optimizer.lr_max * 1.001))
    train(run, token_dir, tiny_indices, tmp_path / "changed")

    with pytest.raises(AssertionError) as failed:
        check(tmp_path / "changed", path)
    message = str(failed.value)
    assert "stored from: Apple M2 (DEFAULT, torch 2.13.0, BLAS: accelerate)" in message
    ours = f"trained on:  {cpu_model()} ({cpu_capability()}, torch {torch.__version__}, BLAS: "
    assert ours in message
    assert f"python tests/helpers/stored_losses.py {tmp_path / 'changed'}" in message


def rows_of(tiny_baseline_run) -> list[dict]:
    return trained(tiny_baseline_run)["rows"]


def test_each_column_has_its_bound(tiny_baseline_run):
    stored = rows_of(tiny_baseline_run)
    lr = stored[12]["lr"]
    changes = {
        ("eval_val_loss", stored[12]["eval_val_loss"] + TOLERANCE): [],
        ("eval_val_loss", stored[12]["eval_val_loss"] + 1.01 * TOLERANCE): ["eval_val_loss"],
        ("eval_val_std", stored[12]["eval_val_std"] - 1.01 * TOLERANCE): ["eval_val_std"],
        ("lr", lr * (1 + 1e-13)): [],
        ("lr", lr * (1 + 1e-9)): ["lr"],
        ("tokens_seen", stored[12]["tokens_seen"] + 1): ["tokens_seen"],
    }
    for (column, value), expected in changes.items():
        ran = [dict(row) for row in stored]
        ran[12][column] = value
        assert [d.split(":")[0] for d in differences(stored, ran)] == [
            f"step 12 {c}" for c in expected
        ], (column, value)


def test_a_missing_row_or_value_is_a_difference(tiny_baseline_run):
    stored = rows_of(tiny_baseline_run)
    assert differences(stored, stored[:-1]) == ["12 rows trained, 13 stored"]
    ran = [dict(row) for row in stored]
    ran[4]["eval_val_loss"] = None
    assert differences(stored, ran) == [
        f"step 4 eval_val_loss: stored {stored[4]['eval_val_loss']!r}, trained None"
    ]


def test_a_failed_check_fails_alone(tmp_path):
    """With stored numbers that this machine does not train, the check fails and a test that
    only reads the run still passes: the session's fixture checks nothing."""
    path = tmp_path / "stored.json"
    numbers = json.loads(stored_losses.STORED.read_text())
    path.write_text(json.dumps(nudged(numbers, 1000)))
    tests = Path(__file__).parent
    code = (
        f"import sys; sys.path.insert(0, {str(Path(stored_losses.__file__).parent)!r})\n"
        "import stored_losses, pytest\n"
        f"stored_losses.STORED = stored_losses.Path({str(path)!r})\n"
        "sys.exit(pytest.main(['-p', 'no:cacheprovider', '-n', '0', '-q', sys.argv[1],"
        " sys.argv[2], '--basetemp', sys.argv[3]]))"
    )
    reading = (
        tests.parent / "runtime" / "test_machine.py::test_run_json_names_the_machine_it_ran_on"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            f"{tests}/test_stored_losses.py::test_the_tiny_baseline_trains_the_stored_numbers",
            str(reading),
            str(tmp_path / "session"),
        ],
        capture_output=True,
        text=True,
        cwd=tests.parent,
    )
    assert "1 failed, 1 passed" in done.stdout, done.stdout[-3000:]
