"""Presets and experiments are YAML data validated on load; errors name the file and the key."""

import pytest
import yaml

from repro.config import ConfigError, load_experiments, load_preset, load_run_config, default_config_dir


def write_preset(tmp_path, edit):
    data = yaml.safe_load((default_config_dir() / "presets" / "tiny.yaml").read_text())
    edit(data)
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_paper_preset_is_the_spec():
    p = load_preset("paper")
    t = p.train
    assert (p.n_layer, p.n_head, p.d_model, p.block_size, p.vocab_size) == (12, 12, 768, 1024, 50304)
    assert (t.batch_size, t.micro_batch, t.accumulation) == (480, 12, 40)  # SPEC 2
    assert p.tokens_per_step == 491_520
    assert (t.max_step, t.warmup_steps, t.decay_steps) == (60002, 2000, 60002)
    assert (t.eval_interval, t.eval_sequences, t.eval_batches, t.eval_rows) == (1000, 2400, 200, 600)
    assert (t.grad_clip, t.beta1, t.beta2, t.adam_eps) == (1.0, 0.9, 0.95, 1e-8)
    assert (t.init_seed, t.index_seed, t.table_step) == (1337, 42, 59000)


def test_table1_experiments_are_the_spec():
    table = {e.name: e for e in load_experiments().group("table1")}
    assert list(table) == ["baseline", "mlp4.75", "mlp4.75-scaled", "resgelu-lr2.6e-3", "resgelu-lr3e-3"]
    assert table["mlp4.75-scaled"].lr_max == pytest.approx(6e-4 / 1.125 ** 0.5, rel=1e-12)
    assert table["mlp4.75-scaled"].lr_min == pytest.approx(6e-5 / 1.125 ** 0.5, rel=1e-12)
    assert table["resgelu-lr3e-3"].weight_decay == 2 ** -5
    assert [e.paper_val_loss for e in table.values()] == [2.956, 2.927, 2.928, 2.919, 2.915]


def test_unknown_key_is_named_with_the_file(tmp_path):
    path = write_preset(tmp_path, lambda d: d["train"].update(learning_rat=1))
    with pytest.raises(ConfigError, match=rf"^{path}: train: unknown key 'learning_rat'$"):
        load_preset(str(path))


def test_bad_value_is_named_with_the_file(tmp_path):
    path = write_preset(tmp_path, lambda d: d["train"].update(micro_batch="twelve"))
    with pytest.raises(ConfigError, match=rf"^{path}: train.micro_batch: 'twelve' is not of type 'integer'$"):
        load_preset(str(path))


def test_micro_batch_must_divide_the_batch(tmp_path):
    path = write_preset(tmp_path, lambda d: d["train"].update(micro_batch=3))
    with pytest.raises(ConfigError, match="train.micro_batch: 3 does not divide train.batch_size = 4"):
        load_preset(str(path))


def test_unknown_names_are_refused():
    with pytest.raises(ConfigError, match=r"unknown preset 'huge' .*known: paper, smoke, tiny"):
        load_preset("huge")
    with pytest.raises(ConfigError, match=r"experiments.yaml: unknown experiment 'resgelu'"):
        load_run_config("smoke", "resgelu")


def test_bad_experiment_value(tmp_path):
    path = tmp_path / "experiments.yaml"
    path.write_text("experiments:\n  x: {query_mode: cubic, mlp_ratio: 4, lr_max: 1, lr_min: 0, weight_decay: 0}\ngroups: {}\n")
    with pytest.raises(ConfigError, match=r"experiments.x.query_mode: 'cubic' is not one of"):
        load_experiments(path)
