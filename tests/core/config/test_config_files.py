"""Configuration files as researchers write them, and as an attacker might: YAML bounded (alias
bombs, deep nesting, huge files refused at once; anchors and merge keys kept), exponent floats read
as numbers, keys written twice refused naming both lines, and values of the wrong kind refused by
the schema naming the file and key."""

import re
import time
from pathlib import Path

import pytest
import yaml
from conftest import one_line_error, write_experiments

from repro.config import MAX_SEED, config_dir, load_experiments, load_preset, load_run
from repro.config.schema import MAX_YAML_BYTES, ConfigError, schema
from repro.errors import MAX_MESSAGE


def edited_preset(tmp_path, section, text_values: str) -> Path:
    """The tiny preset with `text_values` (YAML, as written by hand) replacing keys of a section."""
    data = yaml.safe_load((config_dir() / "presets" / "tiny.yaml").read_text())
    edits = yaml.safe_load(text_values) if "nan" not in text_values else {}
    for key in re.findall(r"^(\w+):", text_values, re.M):
        data[section].pop(key, None)
    data[section].update(edits)
    text = yaml.safe_dump(data)
    if not edits:  # values PyYAML cannot write back as written (.nan, .inf, 1e-4, 40.0)
        text = text.replace(f"{section}:\n", f"{section}:\n  {text_values.strip()}\n", 1)
    path = tmp_path / "edited.yaml"
    path.write_text(text)
    return path


def experiments_text(tmp_path, body: str, name="experiments.yaml") -> Path:
    """An experiments file written as text: experiment x with `body` as its own lines."""
    path = tmp_path / name
    path.write_text(
        "experiments:\n  x:\n"
        + "".join(f"    {line}\n" for line in body.strip().splitlines())
        + "groups: {}\nbaseline: x\nclaims: {larger_control: x, unstable: x}\n"
    )
    return path


EXPERIMENT = "query_mode: linear\nmlp_ratio: 4\nlr_max: 1.0e-3\nlr_min: 1.0e-4\nweight_decay: 0.1"


def bomb(levels: int) -> str:
    """An alias bomb: 9**levels strings from a few hundred bytes."""
    lines = ["    description: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"    n{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines)


def test_an_alias_bomb_is_refused_at_once_in_one_short_line(tmp_path, capsys):
    text = experiments_text(tmp_path, EXPERIMENT).read_text()
    path = tmp_path / "bomb.yaml"
    path.write_text(text.replace("    query_mode", bomb(6) + "\n    query_mode", 1))
    assert len(path.read_bytes()) < 1000
    began = time.perf_counter()
    argv = ["describe", "--preset", "tiny", "--experiment", "x", "--experiments-file", str(path)]
    err = one_line_error(capsys, argv, r"bomb\.yaml: line \d+: .*more than 100,000 values")
    assert time.perf_counter() - began < 5 and len(err) < MAX_MESSAGE + 100


def test_anchors_and_merge_keys_within_bounds_still_work(tmp_path):
    path = tmp_path / "experiments.yaml"
    path.write_text(
        "experiments:\n"
        "  x: &x {query_mode: linear, mlp_ratio: 4, lr_max: 1e-3, lr_min: 1e-4,"
        " weight_decay: 0.1}\n"
        "  y:\n    <<: *x\n    lr_max: 2e-3\n"
        "groups: {all: [x, y]}\nbaseline: x\nclaims: {larger_control: x, unstable: y}\n"
    )
    experiments = load_experiments(path)
    assert experiments["y"].optimizer.lr_max == 2e-3 and experiments["y"].optimizer.lr_min == 1e-4


def test_a_self_referring_alias_and_deep_nesting_are_refused(tmp_path):
    path = experiments_text(tmp_path, EXPERIMENT + "\ndescription: &d [*d]")
    with pytest.raises(ConfigError, match=r"line \d+: not valid YAML: an alias refers to a value"):
        load_experiments(path)
    path = experiments_text(tmp_path, EXPERIMENT + "\ndescription: " + "[" * 500 + "]" * 500)
    with pytest.raises(ConfigError, match=r"line \d+: not valid YAML: nested deeper than"):
        load_experiments(path)


def test_a_file_too_large_to_be_a_configuration_is_refused(tmp_path):
    path = experiments_text(tmp_path, EXPERIMENT)
    path.write_text(path.read_text() + "#" * MAX_YAML_BYTES + "\n")
    with pytest.raises(ConfigError, match=r"more than 1,048,576: not a YAML file"):
        load_experiments(path)


def test_errors_shorten_the_values_they_quote(tmp_path, capsys):
    path = experiments_text(
        tmp_path, EXPERIMENT.replace("lr_max: 1.0e-3", "lr_max: " + "9x" * 50_000)
    )
    argv = ["describe", "--preset", "tiny", "--experiment", "x", "--experiments-file", str(path)]
    err = one_line_error(capsys, argv, r"experiments\.x\.lr_max: '9x9x.*characters \.\.\.\]")
    assert err.rstrip().endswith("is not of type 'number'") and len(err) < MAX_MESSAGE + 100


def test_exponent_floats_are_numbers_everywhere(tmp_path):
    path = experiments_text(
        tmp_path, EXPERIMENT.replace("1.0e-4", "1e-4").replace("1.0e-3", "1E-3")
    )
    optimizer = load_experiments(path)["x"].optimizer
    assert (optimizer.lr_max, optimizer.lr_min) == (1e-3, 1e-4)
    preset = load_preset(str(edited_preset(tmp_path, "train", "adam_eps: 1e-8\ngrad_clip: 1e+0")))
    assert (preset.train.adam_eps, preset.train.grad_clip) == (1e-8, 1.0)


def test_a_key_written_twice_is_refused_naming_both_lines(tmp_path):
    path = experiments_text(tmp_path, EXPERIMENT)
    lines = path.read_text().splitlines()
    lines[3:3] = ["    lr_max: 5.0e-3"]  # on line 4; the other lr_max moves to line 6
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(
        ConfigError, match=r"line 6: .*key 'lr_max' written twice \(first on line 4\)"
    ):
        load_experiments(path)
    text = (config_dir() / "experiments.yaml").read_text()
    path.write_text(
        text.replace("experiments:\n", "experiments:\n  baseline: {query_mode: identity}\n")
    )
    with pytest.raises(
        ConfigError, match=r"line 7: .*key 'baseline' written twice \(first on line 5\)"
    ):
        load_experiments(path)


def test_a_key_written_twice_in_a_preset_is_refused(tmp_path):
    path = tmp_path / "twice.yaml"
    path.write_text((config_dir() / "presets" / "tiny.yaml").read_text() + "train: {max_step: 3}\n")
    with pytest.raises(ConfigError, match=r"twice\.yaml: line \d+: .*key 'train' written twice"):
        load_preset(str(path))


def test_a_group_naming_an_experiment_twice_is_refused(tmp_path):
    path = write_experiments(tmp_path / "experiments.yaml", "x")
    data = yaml.safe_load(path.read_text())
    data["groups"]["table1"] = ["x", "x"]
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"groups\.table1: \['x', 'x'\] has non-unique elements"):
        load_experiments(path)


@pytest.mark.parametrize(
    "section,text,message",
    [
        ("train", "max_step: 40.0", r"train\.max_step: 40\.0 is not of type 'integer'"),
        ("train", "index_seed: 1.0e+23", r"train\.index_seed: 1e\+23 is not of type 'integer'"),
        (
            "train",
            "index_seed: 100000000000000000000000",
            r"index_seed: .* greater than the maximum",
        ),
        ("train", "init_seed: -1", r"train\.init_seed: -1 is less than the minimum of 0"),
        ("train", "beta1: .nan", r"train\.beta1: nan is not a finite number"),
        ("train", "loss_ceiling: .inf", r"train\.loss_ceiling: inf is not a finite number"),
        ("model", "vocab_size: 1000000000000", r"model\.vocab_size: .* greater than the maximum"),
    ],
)
def test_preset_values_of_the_wrong_kind_are_refused(tmp_path, section, text, message):
    with pytest.raises(ConfigError, match=message):
        load_preset(str(edited_preset(tmp_path, section, text)))


@pytest.mark.parametrize(
    "line,message",
    [
        ("lr_max: .nan", r"experiments\.x\.lr_max: nan is not a finite number"),
        ("mlp_ratio: .inf", r"experiments\.x\.mlp_ratio: inf is not a finite number"),
        ("train: {max_step: 4.0}", r"experiments\.x\.train\.max_step: 4\.0 is not of type"),
    ],
)
def test_experiment_values_of_the_wrong_kind_are_refused(tmp_path, line, message):
    key = line.split(":")[0]
    body = "\n".join(x for x in EXPERIMENT.splitlines() if not x.startswith(key + ":"))
    with pytest.raises(ConfigError, match=message):
        load_experiments(experiments_text(tmp_path, body + "\n" + line))


def test_an_mlp_of_zero_width_is_refused(tmp_path):
    path = experiments_text(tmp_path, EXPERIMENT.replace("mlp_ratio: 4", "mlp_ratio: 0.001"))
    with pytest.raises(ConfigError, match=r"x: mlp_ratio: 0\.001 x d_model 32 gives an MLP of 0"):
        load_run("tiny", "x", path).model


def test_seeds_stay_in_the_generators_range():
    assert (
        schema("preset.schema.yaml")["properties"]["train"]["properties"]["index_seed"]["maximum"]
        == MAX_SEED
    )
    with pytest.raises(ConfigError, match=r"seed 4294967296: seeds are 0, 1, 2, \.\.\. up to"):
        load_preset("tiny").with_seed(MAX_SEED + 1)


@pytest.mark.parametrize(
    "value, digits", [("9" * 5000, "5,000"), ("-" + "1" * 101, "101"), ("1_" * 4400 + "1", "4,401")]
)
def test_an_integer_of_thousands_of_digits_is_refused_in_one_line(tmp_path, capsys, value, digits):
    """Python refuses to read an integer of more than 4,300 digits, with a traceback."""
    preset = edited_preset(tmp_path, "train", "max_step: 12")
    preset.write_text(preset.read_text().replace("max_step: 12", f"max_step: {value}"))
    line = next(i for i, text in enumerate(preset.read_text().splitlines(), 1) if value in text)
    one_line_error(
        capsys, ["describe", "--preset", preset, "--experiment", "baseline"],
        rf"edited\.yaml: line {line}: not valid YAML: an integer of {digits} digits, more than 100",
    )  # fmt: skip
    path = experiments_text(tmp_path, EXPERIMENT + f"\nmlp_ratio_x: {value}")
    with pytest.raises(ConfigError, match=rf"experiments\.yaml: line 8: .*{digits} digits"):
        load_experiments(path)


def test_integers_of_up_to_a_hundred_digits_are_read():
    from repro.config.schema import parse_yaml

    assert parse_yaml(f"a: -{'1' * 100}\nb: 0x7f") == {"a": -int("1" * 100), "b": 127}
