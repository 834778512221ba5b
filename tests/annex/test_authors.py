"""The authors' artefacts (docs/specification.md §8): evaluating their checkpoints and ours,
importing their loss tensors as runs; on artefacts written here in their format, tiny scale."""

import csv
import json
from dataclasses import replace

import pytest
import torch
from authors_helpers import authors_folder, write_authors_checkpoint
from conftest import shortened, write_experiments

from repro.annex.authors.checkpoint import load_any_checkpoint
from repro.annex.authors.runs import AuthorsError, import_authors_run
from repro.cli.assembly import main
from repro.config import load_config, load_preset, load_run, resolve_run
from repro.model import GPT
from repro.rundir import RunError, read_record
from repro.training.checkpoints import CheckpointError
from repro.training.evaluation import evaluate
from repro.training.run import train


def short(preset, max_step):
    return replace(preset, train=replace(preset.train, max_step=max_step))


@pytest.fixture(scope="module")
def step4(token_dir, tiny_indices, tmp_path_factory):
    """Our checkpoint after steps 0-3 (a run stopped there) and a whole run's evaluation at 4."""
    root = tmp_path_factory.mktemp("runs")
    run = load_run("tiny", "resgelu-lr3e-3")
    train(shortened(run, 3), token_dir, tiny_indices, root / "to3")
    train(run, token_dir, tiny_indices, root / "whole")
    with open(root / "whole" / "metrics.csv") as f:
        at4 = next(r for r in csv.DictReader(f) if r["step"] == "4")
    return run, root / "to3" / "ckpt.pt", {k: float(v) for k, v in at4.items() if v}


def test_evaluating_our_checkpoint_gives_the_losses_training_logged(step4, token_dir, tiny_indices):
    run, checkpoint, logged = step4
    result = evaluate(
        checkpoint,
        load_preset("tiny"),
        token_dir,
        tiny_indices,
        device="cpu",
        load=load_any_checkpoint,
    )
    assert (result["step"], result["format"], result["precision"]) == (4, "repro", "fp32")
    for key in ("eval_train_loss", "eval_train_std", "eval_val_loss", "eval_val_std"):
        assert result[key] == pytest.approx(logged[key], rel=1e-6)


def test_evaluating_the_authors_checkpoint_of_the_same_model_gives_the_same(
    step4, token_dir, tiny_indices, tmp_path, capsys
):
    run, checkpoint, logged = step4
    model = GPT(run.model)
    model.load_state_dict(torch.load(checkpoint, weights_only=True)["model"])
    theirs = tmp_path / "ckpt.pt"
    write_authors_checkpoint(theirs, model, run, iter_num=4)
    assert (
        main(
            [
                "evaluate",
                "--checkpoint",
                str(theirs),
                "--preset",
                "tiny",
                "--data",
                str(token_dir),
                "--indices",
                str(tiny_indices),
                "--json",
            ]
        )
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert (result["format"], result["step"]) == ("authors", 4)
    assert result["eval_val_loss"] == pytest.approx(logged["eval_val_loss"], rel=1e-6)
    # another step's sequences: the same model, other losses
    other = evaluate(
        theirs,
        load_preset("tiny"),
        token_dir,
        tiny_indices,
        step=8,
        device="cpu",
        load=load_any_checkpoint,
    )
    assert other["row"] == 2 and other["eval_val_loss"] != result["eval_val_loss"]


def test_a_step_that_is_no_evaluation_step_is_refused(step4, token_dir, tiny_indices):
    run, checkpoint, _ = step4
    with pytest.raises(CheckpointError, match="step 5 is not an evaluation step"):
        evaluate(
            checkpoint,
            load_preset("tiny"),
            token_dir,
            tiny_indices,
            step=5,
            device="cpu",
            load=load_any_checkpoint,
        )


def test_the_authors_run_imports_as_a_run_of_ours(tmp_path, token_dir, tiny_indices):
    preset, experiments = load_config("tiny")
    run = resolve_run(preset, experiments["baseline"])
    folder = authors_folder(tmp_path, run)
    out = tmp_path / "imported"
    assert main(["import-authors-run", str(folder), "--out", str(out), "--preset", "tiny"]) == 0
    record = read_record(out)
    assert (record.source, record.experiment, record.status) == ("authors", "baseline", "completed")
    assert record.identity == run.identity()
    assert record.data["authors_config"] == "tied/original"
    with open(out / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["step"] for r in rows] == [str(s) for s in range(13)]
    evals = {int(r["step"]): float(r["eval_val_loss"]) for r in rows if r["eval_val_loss"]}
    assert evals == pytest.approx({0: 10.5, 4: 10.5 - 5 / 3, 8: 5.5 + 5 / 3, 12: 5.5})
    assert rows[12]["train_loss"] == "" and float(rows[0]["train_loss"]) == 10.0
    assert float(rows[0]["lr"]) == pytest.approx(6e-4 / 4)
    with pytest.raises(RunError, match="imported from the authors' artefacts"):
        train(run, token_dir, tiny_indices, out)


def test_a_diverged_authors_run_is_recorded_as_diverged(tmp_path):
    preset, experiments = load_config("tiny")
    run = resolve_run(preset, experiments["baseline-wd0.05"])
    folder = authors_folder(tmp_path, run, "out_config_tiedw_original_005wd", diverge_at=6)
    record = import_authors_run(folder, tmp_path / "out", preset, experiments)
    assert (record.experiment, record.status, record.diverged_step) == (
        "baseline-wd0.05",
        "diverged",
        6,
    )


def test_authors_folders_that_do_not_fit_are_refused(tmp_path, token_dir, tiny_indices):
    preset, experiments = load_config("tiny")
    baseline = resolve_run(preset, experiments["baseline"])
    folder = authors_folder(tmp_path / "a", baseline)
    # their ckpt.pt says weight decay 0.1: not the experiment named
    with pytest.raises(AuthorsError, match=r"weight_decay: 0.1 -> 0.05"):
        import_authors_run(folder, tmp_path / "x", preset, experiments, "baseline-wd0.05")
    # a longer run's tensors than the preset's schedule
    longer = authors_folder(
        tmp_path / "b", resolve_run(short(preset, 16), experiments["baseline"]), ckpt=False
    )
    with pytest.raises(AuthorsError, match=r"tensor.pt: shape \(17, 3\), expected \(13, 3\)"):
        import_authors_run(longer, tmp_path / "y", preset, experiments)
    unknown = authors_folder(tmp_path / "c", baseline, "out_config_tiedw_mystery", ckpt=False)
    with pytest.raises(AuthorsError, match="no experiment .* has source 'tied/mystery'"):
        import_authors_run(unknown, tmp_path / "z", preset, experiments)
    # a run trained here is never overwritten by an import
    trained = tmp_path / "trained"
    train(shortened(baseline, 1), token_dir, tiny_indices, trained)
    before = (trained / "metrics.csv").read_text()
    with pytest.raises(AuthorsError, match="holds a run trained here"):
        import_authors_run(folder, trained, preset, experiments)
    assert (trained / "metrics.csv").read_text() == before


def test_experiments_state_width_tying_scale_and_schedule():
    preset, experiments = load_config("paper")
    wide = resolve_run(preset, experiments["headsize68"]).model
    assert (wide.d_model, wide.head_size, wide.mlp_hidden) == (816, 68, 3264)
    small = resolve_run(preset, experiments["smaller-d744"]).model
    assert (small.head_size, small.mlp_hidden) == (62, 2976)
    identity = resolve_run(preset, experiments["untied-identity"])
    assert not identity.model.tie_embeddings and identity.model.query_scale == 0.5
    assert (identity.train.max_step, identity.train.decay_steps) == (105001, 600000)
    assert identity.identity() != resolve_run(preset, experiments["identity"]).identity()
    assert identity.train.warmup_steps == preset.train.warmup_steps


def test_every_configuration_of_the_authors_is_an_experiment():
    _, experiments = load_config("paper")
    sources = [e.source for e in experiments.by_name.values() if e.source]
    assert len(sources) == len(set(sources)) == 48
    assert sum(s.startswith("tied/") for s in sources) == 41
    assert "mlp5" not in experiments.groups["figure2"]
    assert "mlp5" in experiments.groups["ablations"]


def test_describe_counts_the_parameters_of_another_width(capsys):
    assert main(["describe", "--preset", "paper", "--experiment", "headsize68", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["non_embedding_params"] == 95_903_664


def test_a_model_override_is_validated(tmp_path):
    from repro.config import load_experiments
    from repro.config.schema import ConfigError

    path = write_experiments(tmp_path / "experiments.yaml", "a", model={"n_embd": 816})
    with pytest.raises(ConfigError, match="n_embd"):
        load_experiments(path)


def test_a_longer_schedule_than_the_indices_cover_is_refused(token_dir, tiny_indices, tmp_path):
    from repro.data.indices import IndicesError

    run = load_run("tiny", "untied-identity")
    assert run.train.max_step == 21  # 105001 x 12 / 60002: the preset's scale
    with pytest.raises(
        IndicesError, match="train_rows is 13, experiment untied-identity at preset tiny runs 22"
    ):
        train(run, token_dir, tiny_indices, tmp_path / "run")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_the_evaluation_is_in_bf16_and_close_to_fp32(step4, token_dir, tiny_indices):
    run, checkpoint, logged = step4
    result = evaluate(
        checkpoint,
        load_preset("tiny"),
        token_dir,
        tiny_indices,
        device="cuda",
        load=load_any_checkpoint,
    )
    assert (result["device"], result["precision"]) == ("cuda", "bf16 autocast")
    assert result["eval_val_loss"] == pytest.approx(logged["eval_val_loss"], rel=2e-2)
