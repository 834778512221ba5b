"""Presets and experiments are YAML data validated on load; errors name the file and the key."""

import subprocess
import sys
from dataclasses import replace

import pytest
import yaml
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
from repro.config.schema import schema
from repro.rundir import identity_differences


def write_preset(tmp_path, edit):
    data = yaml.safe_load((config_dir() / "presets" / "tiny.yaml").read_text())
    edit(data)
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


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
    assert (t.batch_size, t.eval_micro_batch, p.accumulation) == (480, 12, 40)  # §2
    assert p.tokens_per_step == 491_520
    assert (t.max_step, t.warmup_steps, t.decay_steps) == (60002, 2000, 60002)
    assert (t.eval_interval, t.eval_sequences, t.eval_batches, t.eval_rows) == (
        1000,
        2400,
        200,
        600,
    )
    assert (t.grad_clip, t.beta1, t.beta2, t.adam_eps) == (1.0, 0.9, 0.95, 1e-8)
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
        ConfigError, match=r"unknown preset 'huge' .*known: paper, screen, smoke, tiny"
    ):
        load_preset("huge")
    with pytest.raises(ConfigError, match=r"experiments.yaml: unknown experiment 'resgelu'"):
        load_run("smoke", "resgelu")


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
    other = replace(
        paper,
        preset=replace(
            paper.preset,
            report=Report(table_step=1000),
            runtime=replace(paper.preset.runtime, log_interval=1, checkpoint_interval=7),
        ),
    )
    assert other.identity() == paper.identity()
    changed = replace(paper, preset=replace(paper.preset, train=replace(paper.train, max_step=5)))
    differences = identity_differences(paper.identity(), changed.identity())
    assert differences == ["train.max_step: 60002 -> 5"]


def test_config_dir_outside_the_checkout_is_the_installed_checkouts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("REPRO_CONFIG_DIR", raising=False)
    assert (config_dir() / "presets" / "tiny.yaml").is_file()
