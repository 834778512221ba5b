import math

import pandas as pd
import pytest
from conftest import edited_tiny_preset

from repro.analysis import results
from repro.analysis.claims import check_claims
from repro.analysis.curves import relative_improvement_curves
from repro.analysis.runs import evals_table, read_run, read_run_list, read_runs
from repro.analysis.status import list_runs
from repro.config import load_preset, load_run
from repro.model import parameter_counts
from repro.rundir import RunError


def test_read_run(tiny_runs):
    run = read_run(tiny_runs / "baseline")
    assert run.status == "completed" and run.name == "baseline"
    assert list(run.evals().index) == [0, 4, 8, 12]
    assert run.loss_at(12) == 5.0 and math.isnan(run.loss_at(5))


def test_the_runs_read_hold_the_rows_repro_train_wrote(tiny_runs, tiny_baseline_run):
    trained = read_run(tiny_baseline_run).metrics
    derived = read_run(tiny_runs / "mlp4.75").metrics  # its own evaluation losses
    for column in ("step", "lr", "train_loss", "tokens_seen", "step_time_s", "tokens_per_s"):
        assert derived[column].tolist() == trained[column].tolist()


def test_read_run_missing(tmp_path):
    with pytest.raises(RunError, match="run.json: no such file"):
        read_run(tmp_path)


def test_table1(tiny_runs):
    table = results.table1(tiny_runs, "tiny")
    assert list(table.columns) == results.TABLE1_COLUMNS
    assert list(table["experiment"]) == [
        "baseline",
        "mlp4.75",
        "mlp4.75-scaled",
        "resgelu-lr2.6e-3",
        "resgelu-lr3e-3",
        "baseline-wd3.125e-2-lr3e-3",  # report.equal_rate: the linear query at 3e-3
    ]
    row = table.set_index("experiment").loc["resgelu-lr3e-3"]
    assert row["val_loss"] == pytest.approx(4.93)
    assert row["rel_improvement"] == pytest.approx((5.0 - 4.93) / 5.0)
    assert row["step"] == 12 and row["preset"] == "tiny" and row["status"] == "completed"
    assert row["paper_val_loss"] == 2.915 and row["paper_rel_improvement"] == 0.014
    assert row["query_mode"] == "residual_gelu" and row["weight_decay"] == 0.03125
    assert "cannot test the paper" in row["caveat"]  # said next to the numbers
    assert table.set_index("experiment").loc["baseline", "rel_improvement"] == 0
    mlp = parameter_counts(load_run("tiny", "mlp4.75").model)["non_embedding_params"]
    assert table.set_index("experiment").loc["mlp4.75", "non_embedding_params"] == mlp


def test_caveat_only_off_the_papers_scale():
    assert results.scale_caveat(load_preset("paper")) == ""
    assert "preset smoke is not the paper's scale" in results.scale_caveat(load_preset("smoke"))


def test_table1_missing_and_diverged(tiny_runs, write_run):
    write_run(
        tiny_runs / "mlp4.75",
        "mlp4.75",
        {0: 10.0, 4: 8.0},
        last_step=5,
        status="diverged",
        diverged_step=5,
    )
    import shutil

    shutil.rmtree(tiny_runs / "mlp4.75-scaled")
    table = results.table1(tiny_runs, "tiny").set_index("experiment")
    assert table.loc["mlp4.75", "status"] == "diverged"
    assert math.isnan(table.loc["mlp4.75", "val_loss"])
    assert table.loc["mlp4.75-scaled", "status"] == "missing"
    assert pd.isna(table.loc["mlp4.75-scaled", "non_embedding_params"])


def test_relative_improvement_curves(tiny_runs):
    runs = read_runs(tiny_runs, ["baseline", "resgelu-lr3e-3", "mlp4.75"])
    curves = relative_improvement_curves(runs, "baseline")
    assert set(curves["experiment"]) == {"resgelu-lr3e-3", "mlp4.75"}
    ours = curves[curves["experiment"] == "resgelu-lr3e-3"].set_index("step")
    assert list(ours.index) == [4, 8, 12]  # step 0 (the untrained model) left out
    assert ours.at[4, "rel_improvement"] == pytest.approx(0.4 / 8.0)
    train = relative_improvement_curves(runs, "baseline", split="train", last_step=8)
    assert train["step"].max() == 8


def test_claims(tiny_runs):
    claims = check_claims(tiny_runs, "tiny")
    by = {(c, e): h for c, e, h in claims[["claim", "experiment", "holds"]].itertuples(index=False)}
    for name in ("resgelu-lr2.6e-3", "resgelu-lr3e-3"):
        assert by[("beats baseline at every evaluation", name)] is True
        assert by[("beats mlp4.75", name)] is True
        assert by[("largest relative gain early", name)] is True  # step 4 <= max(warmup 3, eval 4)
    assert by[("baseline diverges at weight decay 0.05", "baseline-wd0.05")] is None


def test_claims_fail(tiny_runs, write_run):
    write_run(
        tiny_runs / "resgelu-lr3e-3",
        "resgelu-lr3e-3",
        {0: 10, 4: 8.1, 8: 5.9, 12: 4.0},
        last_step=12,
    )
    write_run(
        tiny_runs / "baseline-wd0.05",
        "baseline-wd0.05",
        {0: 10},
        last_step=2,
        status="diverged",
        diverged_step=2,
    )
    claims = check_claims(tiny_runs, load_preset("tiny"))
    assert claims["caveat"].str.contains("cannot test the paper").all()
    assert claims["caveat"].str.contains("not evidence for or against the paper's claims").all()
    by = {(c, e): h for c, e, h in claims[["claim", "experiment", "holds"]].itertuples(index=False)}
    assert by[("beats baseline at every evaluation", "resgelu-lr3e-3")] is False
    assert by[("largest relative gain early", "resgelu-lr3e-3")] is False
    assert by[("baseline diverges at weight decay 0.05", "baseline-wd0.05")] is True


def test_the_unstable_claim_is_not_answered_by_a_run_trained_with_the_stop(
    tiny_runs, tmp_path, write_run
):
    """The claim is about the authors' training, which had no divergence stop."""
    path = edited_tiny_preset(tmp_path, "tiny-stop.yaml", train={"divergence_margin": 0.5})
    write_run(
        tiny_runs / "baseline-wd0.05",
        "baseline-wd0.05",
        {0: 10},
        last_step=2,
        preset=path,
        status="diverged",
        diverged_step=2,
    )
    claims = check_claims(tiny_runs, path).set_index("claim")
    holds, detail = claims.loc["baseline diverges at weight decay 0.05", ["holds", "detail"]]
    assert holds is None and "trained with the divergence stop" in detail, detail


def test_list_runs(tiny_runs):
    listing = list_runs(tiny_runs)
    assert len(listing) == 5 and set(listing["status"]) == {"completed"}
    assert listing.set_index("experiment").at["baseline", "last_eval_val_loss"] == 5.0


def test_read_run_list_takes_names_paths_and_one_name(tiny_runs, tmp_path, write_run):
    theirs = write_run(
        tmp_path / "theirs" / "baseline", "baseline", {0: 11.0, 12: 7.5}, last_step=12
    )
    picked = read_run_list(tiny_runs, ["baseline", str(theirs)])
    assert list(picked) == ["baseline", str(theirs)]
    assert picked[str(theirs)].loss_at(12) == 7.5 and picked["baseline"].loss_at(12) == 5.0
    assert list(read_run_list(tiny_runs, "mlp4.75")) == ["mlp4.75"]
    assert list(evals_table(picked).index.names) == ["run", "step"]
    with pytest.raises(RunError) as misspelled:
        read_run_list(tiny_runs, ["basline"])
    # One line naming the runs folder and the runs in it.
    assert str(misspelled.value) == (
        f"basline: no run of that name in {tiny_runs} (its runs: baseline, mlp4.75, "
        "mlp4.75-scaled, resgelu-lr2.6e-3, resgelu-lr3e-3) and no run folder at that path"
    )


def test_table1_states_bits_per_byte_of_the_text_evaluated(tiny_runs, tmp_path):
    """The loss at the table step is over the targets of that step's evaluation sequences (the
    fixed indices' row): bits per byte divide by those sequences' bytes, decoded here, and not by
    the whole validation split's."""
    from pathlib import Path

    from repro.config import load_preset
    from repro.data.batches import read_sidecar, read_starts
    from repro.data.tokenizer import EOT_TOKEN, gpt2_encoding
    from repro.data.tokens import read_manifest, token_memmap

    preset = load_preset("tiny")
    table = results.table1(tiny_runs, "tiny").set_index("experiment")
    record = read_run(tiny_runs / "baseline").record
    folder, indices = Path(record.data["dir"]), Path(record.indices["dir"])
    val = token_memmap(folder, read_manifest(folder), "val")
    starts = read_starts(indices, "eval_val", read_sidecar(indices), len(val))
    row = preset.report.table_step // preset.train.eval_interval
    evaluated = starts[row, : preset.train.eval_batches * preset.train.eval_micro_batch]
    block = preset.model.block_size
    targets = [int(t) for s in evaluated for t in val[s + 1 : s + 1 + block]]
    text = gpt2_encoding().decode_bytes([t for t in targets if t != EOT_TOKEN])
    bits = table["val_loss"] * len(targets) / math.log(2)  # the loss over those targets, in bits
    assert table["val_bpb"].tolist() == pytest.approx((bits / len(text)).tolist(), nan_ok=True)
    assert table["val_bpb"].notna().sum() >= 5  # each run trained (one is not, here)
    whole = [int(t) for t in val]  # the whole split's text is another, here
    split_bytes = len(gpt2_encoding().decode_bytes([t for t in whole if t != EOT_TOKEN]))
    evaluated_rate, split_rate = len(text) / len(targets), split_bytes / len(whole)
    assert abs(evaluated_rate / split_rate - 1) > 1e-3
    moved = tmp_path / "moved"
    (tiny_runs / "baseline").rename(moved)  # a run whose token files are not at hand: NaN
    record = (moved / "run.json").read_text().replace(str(folder), str(tmp_path / "gone"))
    (moved / "run.json").write_text(record)
    assert math.isnan(results.table1_row(*row_of(moved)).get("val_bpb"))
    gone = (moved / "run.json").read_text().replace(str(indices), str(tmp_path / "no-indices"))
    (moved / "run.json").write_text(gone.replace(str(tmp_path / "gone"), str(folder)))
    assert math.isnan(results.table1_row(*row_of(moved)).get("val_bpb"))  # nor its indices


def test_bits_per_byte_of_a_seed_k_run_are_of_its_own_indices(token_dir, tmp_path):
    """Seed k's runs read indices drawn at index_seed + k: its bits per byte are of those."""
    from repro.config import load_experiments, load_preset, resolve_run
    from repro.data.indices import write_indices
    from repro.training.run import train

    tiny = load_preset("tiny")
    seed1 = tiny.with_seed(1)
    write_indices(seed1, token_dir, tmp_path / "indices")
    train(
        resolve_run(seed1, load_experiments()["baseline"]),
        token_dir,
        tmp_path / "indices",
        tmp_path / "run",
    )
    run, step = read_run(tmp_path / "run"), tiny.report.table_step
    assert math.isfinite(results.val_bpb(run, run.loss_at(step), step, tiny))


def row_of(run_dir):
    from repro.config import load_config

    preset, experiments = load_config("tiny")
    return experiments["baseline"], read_run(run_dir), preset, 5.0
