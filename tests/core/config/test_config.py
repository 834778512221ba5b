"""Presets and experiments are YAML data validated on load; errors name the file and the key."""

import subprocess
import sys
from dataclasses import replace

import pytest
import yaml
from config_helpers import write_preset
from conftest import REPO, write_experiments

from repro.config import (
    CORPORA,
    QUERY_MODES,
    ConfigError,
    Report,
    config_dir,
    load_experiments,
    load_preset,
    load_run,
)
from repro.config.schema import load, schema
from repro.rundir import identity_differences
from repro.rundir.history import with_later_defaults


def test_paper_preset_is_the_spec():
    p = load_preset("paper")
    t, m = p.train, p.model
    assert (m.n_layer, m.n_head, m.d_model, m.block_size, m.vocab_size) == (
        12,
        12,
        768,
        1024,
        50304,
    )
    assert (t.batch_size, t.eval_micro_batch) == (480, 12)  # §2
    assert t.batch_size // t.eval_micro_batch == 40  # micro-batches per step, at 12
    assert p.tokens_per_step == 491_520
    assert (t.max_step, t.warmup_steps, t.decay_steps) == (60002, 2000, 60002)
    assert (t.eval_interval, t.eval_sequences, t.eval_batches, t.eval_rows) == (
        1000,
        2400,
        200,
        600,
    )
    assert (t.grad_clip, t.beta1, t.beta2, t.adam_eps) == (1.0, 0.9, 0.95, 1e-8)
    assert t.evaluations == 61  # steps 0, 1000, ..., 60000
    assert (t.init_seed, t.index_seed, p.report.table_step) == (1337, 42, 59000)


def test_table1_experiments_are_the_spec():
    table = {e.name: e for e in load_experiments().group("table1")}
    assert list(table) == [
        "baseline",
        "mlp4.75",
        "mlp4.75-scaled",
        "resgelu-lr2.6e-3",
        "resgelu-lr3e-3",
    ]
    assert table["mlp4.75-scaled"].optimizer.lr_max == pytest.approx(6e-4 / 1.125**0.5, rel=1e-12)
    assert table["mlp4.75-scaled"].optimizer.lr_min == pytest.approx(6e-5 / 1.125**0.5, rel=1e-12)
    assert table["resgelu-lr3e-3"].optimizer.weight_decay == 2**-5
    assert [e.paper.val_loss for e in table.values()] == [2.956, 2.927, 2.928, 2.919, 2.915]


def test_unknown_key_is_named_with_the_file(tmp_path):
    path = write_preset(tmp_path, lambda d: d["train"].update(learning_rat=1))
    with pytest.raises(ConfigError, match=rf"^{path}: train: unknown key 'learning_rat'$"):
        load_preset(str(path))


def test_a_file_is_read_again_at_each_load_and_each_load_is_its_own(tmp_path):
    """What a file's bytes parse to is kept, never the file: a preset rewritten between two
    loads (same size, same moment) loads as rewritten; a caller's edit reaches no other load."""
    path = write_preset(tmp_path, lambda d: d["train"].update(max_step=12))
    assert load_preset(str(path)).train.max_step == 12
    path.write_text(path.read_text().replace("max_step: 12", "max_step: 16"))
    assert load_preset(str(path)).train.max_step == 16
    first = load(path, "preset.schema.yaml")
    first["train"]["max_step"] = 99
    assert load(path, "preset.schema.yaml")["train"]["max_step"] == 16
    path.write_text(path.read_text().replace("max_step: 16", "max_stp: 16"))
    with pytest.raises(ConfigError, match="unknown key 'max_stp'"):
        load_preset(str(path))


def test_bad_value_is_named_with_the_file(tmp_path):
    path = write_preset(tmp_path, lambda d: d["train"].update(eval_micro_batch="twelve"))
    with pytest.raises(
        ConfigError, match=rf"^{path}: train.eval_micro_batch: 'twelve' is not of type 'integer'$"
    ):
        load_preset(str(path))


def test_micro_batch_must_divide_the_batch(tmp_path):
    path = write_preset(tmp_path, lambda d: d["train"].update(eval_micro_batch=3))
    with pytest.raises(
        ConfigError, match="train.eval_micro_batch: 3 does not divide train.batch_size = 4"
    ):
        load_preset(str(path))


def test_unknown_names_are_refused():
    with pytest.raises(
        ConfigError,
        match=r"unknown preset 'huge' .*known: gpu-short, large, paper, screen, smoke, tiny",
    ):
        load_preset("huge")
    with pytest.raises(ConfigError, match=r"experiments.yaml: unknown experiment 'resgelu'"):
        load_run("smoke", "resgelu")


def test_a_misspelt_experiment_names_the_closest_not_every_one():
    with pytest.raises(ConfigError) as refused:
        load_run("smoke", "resgelu-lr3e3")
    message = str(refused.value)
    assert "unknown experiment 'resgelu-lr3e3'; did you mean resgelu-lr3e-3" in message
    assert len(message) < 300, message  # not the hundred names
    assert "experiments in " in message and "experiments.yaml" in message  # where they are


def test_bad_experiment_value(tmp_path):
    path = write_experiments(tmp_path / "experiments.yaml", "x", query_mode="cubic")
    with pytest.raises(ConfigError, match=r"experiments.x.query_mode: 'cubic' is not one of"):
        load_experiments(path)


def test_schemas_name_the_codes_constants():
    """Each list lives in the code; the schemas that enumerate it must agree with it."""
    experiment = schema("experiments.schema.yaml")["properties"]["experiments"]
    experiment = experiment["additionalProperties"]["properties"]
    assert tuple(experiment["query_mode"]["enum"]) == QUERY_MODES
    preset = schema("preset.schema.yaml")["properties"]
    assert tuple(preset["corpus"]["enum"]) == CORPORA
    workflow = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    device = preset["runtime"]["properties"]["device"]["pattern"]
    assert workflow["properties"]["device"]["pattern"] == device


def test_importing_the_configuration_does_not_import_torch():
    """The workflow imports repro.config while it is parsed: every snakemake call would pay."""
    code = "import sys, repro.config; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_runtime_and_report_settings_are_not_the_runs_identity():
    paper = load_run("paper", "baseline")
    other = replace(paper, report=Report(table_step=1000)).with_runtime(
        log_interval=1, checkpoint_interval=7, train_micro_batch=24, fused_projection=True
    )
    assert other.identity() == paper.identity()
    changed = replace(paper, train=replace(paper.train, max_step=5), report=Report(0))
    differences = identity_differences(paper.identity(), changed.identity())
    assert differences == ["train.max_step: 60002 -> 5"]


def test_config_dir_outside_the_checkout_is_the_installed_checkouts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("REPRO_CONFIG_DIR", raising=False)
    assert (config_dir() / "presets" / "tiny.yaml").is_file()


def test_the_identity_keeps_the_layout_run_directories_have():
    """run.json and checkpoints compare their identity, read through repro.rundir.history,
    with this one: every setting training computes with."""
    identity = load_run("tiny", "resgelu-lr3e-3").identity()
    assert identity["optimizer"] == {"lr_max": 3e-3, "lr_min": 3e-5, "weight_decay": 2**-5}
    recorded = "max_step batch_size warmup_steps decay_steps eval_interval eval_sequences "
    recorded += "eval_micro_batch eval_rows grad_clip beta1 beta2 adam_eps loss_ceiling init_seed "
    recorded += "index_seed"
    later = ["schedule", "divergence_margin", "divergence_evaluations"]
    assert sorted(identity["train"]) == sorted(recorded.split() + later)
    older = {**identity, "train": {k: identity["train"][k] for k in recorded.split()}}
    assert with_later_defaults(older) == identity
    assert (identity["train"]["beta2"], identity["train"]["adam_eps"]) == (0.95, 1e-8)
    assert identity["model"]["query_mode"] == "residual_gelu"


@pytest.mark.parametrize(
    "overrides,keys",
    [
        ({"decay_steps": 3}, r"train\.warmup_steps: 3 must be less than train\.decay_steps = 3"),
        ({"max_step": 10}, r"report\.table_step: 12 is not an evaluation step .*max_step = 10"),
        ({"max_step": 2400}, r"train\.eval_rows: 600 rows, the run evaluates 601 times"),
    ],
)
def test_an_experiment_that_breaks_a_relation_fails_at_load(tmp_path, overrides, keys):
    """The relations are checked on the merged settings training would use, at load."""
    path = write_experiments(tmp_path / "experiments.yaml", "short", train=overrides)
    load_experiments(path)  # valid alone
    with pytest.raises(ConfigError, match=rf"^preset tiny, experiment short: {keys}"):
        load_run("tiny", "short", path)


def test_runtime_overrides_are_checked_too():
    run = load_run("tiny", "baseline", train_micro_batch=4)
    assert run.runtime.train_micro_batch == 4
    with pytest.raises(
        ConfigError,
        match=r"^preset tiny, experiment baseline: runtime\.train_micro_batch: 3 does not divide "
        r"train\.batch_size = 4$",
    ):
        run.with_runtime(train_micro_batch=3)
