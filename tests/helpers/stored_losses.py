"""The tiny baseline's numbers as stored in tests/fixtures/tiny-baseline-losses.json, with the
machine that trained them, and their comparison with a run trained on this machine.

One machine's CPU training is bit for bit the same every time
(tests/core/training/test_exact_resume.py and the others compare two runs of one test session
exactly). Another machine rounds differently: torch's
kernels differ by vector unit (AVX-512, AVX2, NEON, ATEN_CPU_CAPABILITY=default) and its math
libraries pick kernels by the processor itself (vendor, model, cache sizes). So the stored numbers
are compared within TOLERANCE, one file for every machine:

- step and tokens_seen exactly, and the learning rate within 1e-12 relative (the schedule is
  Python's float64 arithmetic; only a libm's last bit may differ);
- the losses and their standard deviations within 2**-16 (1.5e-5) absolute: 16 float32 ulps of a
  loss between 8 and 16, where the tiny run's lie (about 10.8). The largest difference measured
  between machines and vector units (AVX-512, AVX2 and default kernels, Intel and AMD) is 2 ulps
  (1.9e-6; 1.4e-6 in a standard deviation, whose rounding is the losses' own in absolute terms):
  the bound leaves 8 times that for machines not measured. A change of training moves more: a
  peak learning rate 0.1% higher moves the evaluation loss by 80 ulps, 1% by 800, and a change of
  the model, its initialisation or the batches by far more.

Where training is meant to change, store the new numbers with the machine that trained them:
`python tests/helpers/stored_losses.py RUN_DIR` (a run of `repro train --preset tiny --experiment
baseline` with one thread, e.g. the one a failed check names).
"""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path

from repro.runtime.machine import described

STORED = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-baseline-losses.json"

EXACT = ("step", "tokens_seen")
LR_RELATIVE = 1e-12
FLOAT32 = ("train_loss", "eval_train_loss", "eval_train_std", "eval_val_loss", "eval_val_std")
TOLERANCE = 2.0**-16
BOUND = f"{TOLERANCE:.2g} (16 float32 ulps of a loss near 10.8)"
COLUMNS = ("step", "lr", *FLOAT32, "tokens_seen")
MACHINE = ("cpu", "cpu_capability", "torch_version", "math_libraries")


def trained(run_dir: Path) -> dict:
    """A run's numbers (metrics.csv without its timings) and the machine that trained it (from
    run.json), as the stored file holds them."""
    with open(run_dir / "metrics.csv", newline="") as f:
        rows = [{c: _number(c, row[c]) for c in COLUMNS} for row in csv.DictReader(f)]
    record = json.loads((run_dir / "run.json").read_text())
    return {"written_by": {key: record.get(key) for key in MACHINE}, "rows": rows}


def _number(column: str, text: str):
    if text == "":
        return None
    return int(text) if column in EXACT else float(text)


def store(run_dir: Path, path: Path | None = None) -> None:
    (path or STORED).write_text(json.dumps(trained(run_dir), indent=1) + "\n")


def differences(stored: list[dict], ran: list[dict]) -> list[str]:
    """Each value of `ran` not within its column's bound of `stored`, as `step S column: stored
    X, trained Y`; a different count of rows is one difference."""
    if len(stored) != len(ran):
        return [f"{len(ran)} rows trained, {len(stored)} stored"]
    return [
        f"step {s['step']} {c}: stored {s[c]!r}, trained {r[c]!r}"
        for s, r in zip(stored, ran)
        for c in COLUMNS
        if not _close(c, s[c], r[c])
    ]


def _close(column: str, stored, ran) -> bool:
    if stored is None or ran is None or column in EXACT:
        return stored == ran
    if column == "lr":
        return math.isclose(stored, ran, rel_tol=LR_RELATIVE)
    return abs(stored - ran) <= TOLERANCE


def check(run_dir: Path, path: Path | None = None) -> None:
    """AssertionError where the run's numbers are not the stored ones within their bounds; the
    message names the machine that stored them and the one that trained the run."""
    path = path or STORED
    stored, ran = json.loads(path.read_text()), trained(run_dir)
    found = differences(stored["rows"], ran["rows"])
    assert not found, (
        f"{path.name}: the tiny baseline's numbers differ from the stored ones beyond "
        f"{BOUND}, {len(found)} value(s); first: {found[0]}\n"
        f"  stored from: {described(stored['written_by'])}\n"
        f"  trained on:  {described(ran['written_by'])}\n"
        f"Where training was meant to change: python tests/helpers/stored_losses.py {run_dir}"
    )


if __name__ == "__main__":
    run = Path(sys.argv[1]) if len(sys.argv) == 2 else None
    if not (run and (run / "metrics.csv").is_file() and (run / "run.json").is_file()):
        sys.exit(
            "usage: python tests/helpers/stored_losses.py RUN_DIR (a run: metrics.csv, run.json)"
        )
    store(run)
    print(f"{STORED}: stored from {run}")
