"""The divergence stop (repro.training.logs.DivergenceStop): a non-finite loss, or a
validation loss
more than a margin above the best for consecutive evaluations, ends a run as diverged, with its
metrics and last checkpoint, and `repro train` does not resume it."""

import json
import math
import os
import signal
from dataclasses import replace

import pandas as pd
import pytest
from conftest import REPO, edited_tiny_preset, train_args, write_experiments

import repro.training.loop as loop_module
from repro.cli.assembly import main
from repro.config import load_run
from repro.config.schema import ConfigError
from repro.rundir import read_record
from repro.runtime import signals
from repro.training.logs import DivergenceStop
from repro.training.run import train


def repro_train(tmp_path, token_dir, tiny_indices, preset: str, out: str, lr_max: float) -> int:
    """`repro train` of a linear-query experiment at `lr_max` (0.1 makes the tiny model's
    validation loss 10.84, 10.81, 10.98, 10.92 at steps 0, 4, 8, 12)."""
    experiments = write_experiments(
        tmp_path / "experiments.yaml", "hot", lr_max=lr_max, lr_min=lr_max / 10
    )
    return main(
        train_args(
            token_dir,
            tiny_indices,
            tmp_path / out,
            preset=preset,
            experiment="hot",
            experiments_file=experiments,
        )
    )


def test_a_validation_loss_past_the_best_by_the_margin_ends_the_run(
    token_dir, tiny_indices, tmp_path, capsys
):
    preset = edited_tiny_preset(
        tmp_path, train=dict(divergence_margin=0.1, divergence_evaluations=1)
    )
    assert repro_train(tmp_path, token_dir, tiny_indices, preset, "run", 0.1) == 0
    out = capsys.readouterr().out
    # The losses as this machine's kernels computed them (their last bits differ between CPUs'
    # vector units): the stop's message states the ones metrics.csv recorded.
    metrics = pd.read_csv(tmp_path / "run" / "metrics.csv")
    assert metrics["step"].tolist() == list(range(9))  # every step taken, up to the stop's
    losses = metrics.set_index("step")["eval_val_loss"]
    stop, best = f"{losses[8]:.4f}", f"{losses[4]:.4f}"
    assert (stop[:5], best[:5]) == ("10.97", "10.81")
    assert f"step 8: validation loss {stop}, more than 0.1 above the best {best}" in out
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert (record["status"], record["diverged_step"], record["last_step"]) == ("diverged", 8, 8)
    assert record["diverged_reason"].startswith(f"validation loss {stop}")
    assert (tmp_path / "run" / "ckpt.pt").exists()  # the checkpoint before it, kept

    # Asked again, the run is not resumed: nothing is trained or written.
    before = (tmp_path / "run" / "metrics.csv").read_bytes()
    assert repro_train(tmp_path, token_dir, tiny_indices, preset, "run", 0.1) == 0
    again = capsys.readouterr().out
    assert f"diverged at step 8 (validation loss {stop}" in again and "not resumed" in again
    assert (tmp_path / "run" / "metrics.csv").read_bytes() == before


def test_the_stop_counts_consecutive_evaluations(token_dir, tiny_indices, tmp_path, capsys):
    preset = edited_tiny_preset(
        tmp_path, train=dict(divergence_margin=0.1, divergence_evaluations=2)
    )
    assert repro_train(tmp_path, token_dir, tiny_indices, preset, "run", 0.1) == 0
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert (record["status"], record["diverged_step"]) == ("diverged", 12)  # steps 8 and 12
    assert "at 2 consecutive evaluations" in record["diverged_reason"]


def test_within_the_default_settings_the_run_completes(token_dir, tiny_indices, tmp_path):
    run = load_run("tiny", "baseline")
    assert (run.train.divergence_margin, run.train.divergence_evaluations) == (None, 2)
    preset = str(REPO / "config" / "presets" / "tiny.yaml")
    assert repro_train(tmp_path, token_dir, tiny_indices, preset, "run", 0.1) == 0
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert (record["status"], record["diverged_step"]) == ("completed", None)


def test_a_non_finite_loss_ends_the_run():
    stop = DivergenceStop(ceiling=11.8, margin=None, evaluations=2)
    assert stop.reason({"train_loss": 3.0}) is None
    assert stop.reason({"train_loss": math.nan}) == "train_loss nan, not a finite number"
    evaluated = {"train_loss": 3.0, "eval_train_loss": 3.0, "eval_val_loss": math.inf}
    assert stop.reason(evaluated) == "eval_val_loss inf, not a finite number"
    assert stop.reason({"train_loss": 12.0}).startswith("train loss 12.0000, above the ceiling")


def test_a_resumed_run_remembers_its_best_and_its_evaluations_above_it():
    run = load_run("tiny", "baseline")
    run = replace(run, train=replace(run.train, divergence_margin=0.5))
    kept = [
        {"eval_val_loss": "5.0"},
        {"eval_val_loss": ""},  # a step without evaluation
        {"eval_val_loss": "5.6"},  # above 5.0 + 0.5: one
    ]
    stop = DivergenceStop.of(run, kept)
    assert (stop.best, stop.above) == (5.0, 1)
    assert stop.reason({"train_loss": 4.0, "eval_val_loss": 5.7}).endswith(
        "at 2 consecutive evaluations"
    )
    recovered = DivergenceStop.of(run, [*kept, {"eval_val_loss": "5.4"}])
    assert (recovered.best, recovered.above) == (5.0, 0)  # not consecutive any more


@pytest.mark.parametrize(
    "train,message",
    [
        ({"divergence_margin": 0}, r"train\.divergence_margin: 0"),
        ({"divergence_evaluations": 0}, r"train\.divergence_evaluations: 0"),
        ({"schedule": "step"}, r"train\.schedule: 'step'"),
        ({"loss_ceiling": 0}, r"train\.loss_ceiling: 0 is less than or equal to the minimum of 0"),
        ({"loss_ceiling": -1}, r"train\.loss_ceiling: -1 is less than or equal to the minimum"),
    ],
)
def test_the_stop_and_schedule_settings_are_validated(tmp_path, train, message):
    from repro.config import load_preset

    with pytest.raises(ConfigError, match=message):
        load_preset(edited_tiny_preset(tmp_path, train=train))


def test_a_divergence_in_the_steps_before_a_stop_signal_ends_the_run_and_is_logged(
    token_dir, tiny_indices, tmp_path, monkeypatch
):
    """A stop signal writes the steps taken as any interval does: a non-finite loss among them
    ends the run as diverged, said in train.log, with no checkpoint at the stop."""
    real_step = loop_module.train_step

    def nan_at_step_1_then_a_stop(*args, **kwargs):
        loss = real_step(*args, **kwargs)
        if args[3] == 1:  # args[3]: the step
            os.kill(os.getpid(), signal.SIGTERM)
            return loss * math.nan
        return loss

    monkeypatch.setattr(loop_module, "train_step", nan_at_step_1_then_a_stop)
    run = load_run("tiny", "baseline").with_runtime(log_interval=4)  # steps 1-3: one write
    with signals.stop_signals():
        record = train(run, token_dir, tiny_indices, tmp_path)
    assert (record.status, record.diverged_step, record.last_step) == ("diverged", 1, 1)
    assert read_record(tmp_path).status == "diverged"
    log = (tmp_path / "train.log").read_text()
    assert "step 1: train_loss nan, not a finite number — diverged; ending the run" in log
    assert pd.read_csv(tmp_path / "metrics.csv")["step"].tolist() == [0, 1]
    assert not (tmp_path / "ckpt.pt").exists()  # no checkpoint at the stop


@pytest.mark.parametrize("preset", ["tiny", "smoke", "screen", "paper"])
def test_presets_that_reproduce_the_authors_train_without_the_stop(preset):
    """The authors' loop had no divergence stop: a run they trained to its end through a rise of
    its validation loss is trained to its end here too."""
    assert load_run(preset, "baseline").train.divergence_margin is None


def test_the_audit_recipe_trains_with_the_audits_stop():
    train = load_run("large", "baseline").train
    assert (train.divergence_margin, train.divergence_evaluations) == (0.5, 2)
