"""Hostile and careless input: files reached through symbolic links, YAML bombs, values a schema
let through, command-line numbers that divide by zero. Each ends in one line naming the file, key
or flag, and nothing it points at is touched."""

import errno
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
import torch
import yaml
from conftest import REPO, one_line_error, random_token_files, train_args, write_experiments

from repro.analysis import report
from repro.cli import main
from repro.config import MAX_SEED, config_dir, load_experiments, load_preset, load_run
from repro.config.schema import MAX_YAML_BYTES, ConfigError, schema
from repro.data.tokens import DataError, read_manifest
from repro.errors import MAX_MESSAGE, ReproError
from repro.files import WriteError, atomic_write, write_csv, write_json
from repro.rundir import Progress
from repro.runtime import device
from repro.runtime.lock import LockError, hold
from repro.training.run import train

ENV = dict(
    os.environ,
    PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])),
)
PRECIOUS = "a result that must survive\n"


def precious(tmp_path) -> Path:
    path = tmp_path / "precious.txt"
    path.write_text(PRECIOUS)
    return path


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


DESCRIBE = ["describe", "--preset", "tiny", "--experiment", "baseline"]
BENCH = ["bench", "--preset", "tiny", "--device", "cpu", "--experiment", "baseline"]
EXPERIMENT = "query_mode: linear\nmlp_ratio: 4\nlr_max: 1.0e-3\nlr_min: 1.0e-4\nweight_decay: 0.1"


# ---- symbolic links in a run folder: never written through ------------------------------------


def test_a_lock_file_that_is_a_link_is_refused_and_its_target_kept(tmp_path):
    target = precious(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    (run / ".lock").symlink_to(target)
    with pytest.raises(LockError, match=r"run/\.lock: a symbolic link"):
        with hold(run, "run"):
            pass
    assert target.read_text() == PRECIOUS


def test_train_refuses_a_linked_lock_file_in_one_line(token_dir, tiny_indices, tmp_path, capsys):
    target = precious(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    (run / ".lock").symlink_to(target)
    one_line_error(capsys, train_args(token_dir, tiny_indices, run), r"\.lock: a symbolic link")
    assert target.read_text() == PRECIOUS


def test_a_train_log_that_is_a_link_is_refused_and_its_target_kept(tmp_path, capsys):
    target = precious(tmp_path)
    (tmp_path / "train.log").symlink_to(target)
    with pytest.raises(ReproError, match=r"train\.log: a symbolic link"):
        Progress(tmp_path, 0, 9)
    assert target.read_text() == PRECIOUS


@pytest.mark.parametrize("linked", ["target", "partial"])
def test_written_files_replace_links_never_their_targets(tmp_path, linked):
    """run.json, metrics.csv, ckpt.pt and published files are all written by atomic_write."""
    target = precious(tmp_path)
    path = tmp_path / "run.json"
    link = path if linked == "target" else tmp_path / "run.json.partial"
    link.symlink_to(target)
    write_json(path, {"status": "completed"})
    assert target.read_text() == PRECIOUS
    assert not path.is_symlink() and json.loads(path.read_text()) == {"status": "completed"}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        {"run.json", link.name, "precious.txt"}
    )


def write_figure(path):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    report.save_figure(fig, path)
    plt.close(fig)


TABLE = pd.DataFrame({"experiment": ["baseline", "resgelu"], "val_loss": [3.5, 3.4]})
WRITERS = {  # what the notebooks write: tables as CSV and HTML, figures as PNG, PDF and HTML
    "table1.csv": lambda path: write_csv(TABLE, path),
    "table1.html": lambda path: report.write_table_html(TABLE, path),
    "figure1.png": write_figure,
    "figure1.pdf": write_figure,
    "figure1.html": write_figure,
}


@pytest.mark.parametrize("name", WRITERS)
def test_tables_and_figures_replace_links_never_their_targets(tmp_path, name):
    target = precious(tmp_path)
    path = tmp_path / name
    path.symlink_to(target)
    WRITERS[name](path)
    assert target.read_text() == PRECIOUS and not path.is_symlink() and path.stat().st_size


def test_a_failed_write_leaves_a_linked_target_intact(tmp_path):
    target = precious(tmp_path)
    (tmp_path / "ckpt.pt.partial").symlink_to(target)
    with pytest.raises(RuntimeError):
        with atomic_write(tmp_path / "ckpt.pt", "wb") as f:
            f.write(b"half")
            raise RuntimeError("disk full")
    assert target.read_text() == PRECIOUS and not (tmp_path / "ckpt.pt").exists()


def test_a_write_the_disk_refuses_is_one_line_naming_the_file(tmp_path):
    (tmp_path / "table.csv").write_text("earlier\n")
    with pytest.raises(
        WriteError, match=r"table\.csv: cannot be written \(No space left on device\)"
    ):
        with atomic_write(tmp_path / "table.csv") as f:
            f.write("half")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert (tmp_path / "table.csv").read_text() == "earlier\n"
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]


def test_a_full_disk_under_train_log_loses_no_line_printed_and_training_goes_on(tmp_path, capsys):
    progress = Progress(tmp_path, 0, 9)
    progress.path = Path("/dev/full")  # every write: ENOSPC
    rows = [{"step": s, "train_loss": 4.0, "tokens_per_s": 100.0} for s in range(3)]
    progress.report(rows)
    progress.report(rows)
    out, err = capsys.readouterr()
    assert out.count("step 2/9") == 2  # the lines are printed all the same
    assert err.count("warning: /dev/full: cannot append (No space left on device)") == 1


def test_a_run_whose_train_log_cannot_be_appended_completes(
    token_dir, tiny_indices, tmp_path, capsys
):
    (tmp_path / "run" / "train.log").mkdir(parents=True)  # every append fails (EISDIR)
    record = train(load_run("tiny", "baseline"), token_dir, tiny_indices, tmp_path / "run")
    assert record.status == "completed" and record.last_step == 12
    assert len((tmp_path / "run" / "metrics.csv").read_text().splitlines()) == 1 + 13
    assert capsys.readouterr().err.count("train.log: cannot append (Is a directory)") == 1


@pytest.mark.parametrize("log", ["metrics.csv", "events.out.tfevents.repro"])
def test_a_disk_that_fills_during_training_is_one_line_and_the_run_resumes(
    log, token_dir, tiny_indices, tiny_baseline_run, tmp_path, monkeypatch, capsys
):
    """The disk fills at step 7 (the run's log file becomes /dev/full: every write is the kernel's
    ENOSPC): one line naming the file; the checkpoint of step 5 is kept, and the same command,
    once there is room, resumes to the rows of a run never stopped."""
    from test_train import read_metrics, without_timing

    import repro.rundir.metrics
    import repro.runtime.tensorboard

    opened = {}
    for module in (repro.rundir.metrics, repro.runtime.tensorboard):

        def recording(path, flags, what, opener=module.open_no_link):
            opened[Path(path).name] = fd = opener(path, flags, what)
            return fd

        monkeypatch.setattr(module, "open_no_link", recording)
    append = repro.rundir.MetricsLog.append

    def filling(self, row):
        if row["step"] == 7:
            os.dup2(os.open("/dev/full", os.O_WRONLY), opened[log])
        append(self, row)

    monkeypatch.setattr(repro.rundir.MetricsLog, "append", filling)
    out = tmp_path / "run"
    argv = train_args(token_dir, tiny_indices, out)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith(f"repro: error: {out / log}: cannot be written (No space left on device)")
    assert "resume" in err
    assert torch.load(out / "ckpt.pt", weights_only=True)["step"] == 5

    monkeypatch.setattr(repro.rundir.MetricsLog, "append", append)
    assert main(argv) == 0
    assert without_timing(read_metrics(out)) == without_timing(read_metrics(tiny_baseline_run))


# ---- YAML: bounded, and read as researchers write it -----------------------------------------


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
    with pytest.raises(ConfigError, match=r"larger than 1,048,576 bytes"):
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


# ---- values a schema must refuse ---------------------------------------------------------------


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


def test_a_preset_path_that_is_a_directory_is_one_line(tmp_path, capsys):
    folder = tmp_path / "presets.yaml"
    folder.mkdir()
    argv = ["describe", "--preset", str(folder), "--experiment", "baseline"]
    one_line_error(capsys, argv, r"presets\.yaml: not a regular file")


def test_a_manifest_of_the_wrong_shape_is_one_line(tmp_path, capsys):
    data = random_token_files(tmp_path / "data")
    manifest = json.loads((data / "manifest.json").read_text())
    manifest["splits"]["train"]["tokens"] = "30000"
    (data / "manifest.json").write_text(json.dumps(manifest))
    argv = ["indices", "--preset", "tiny", "--data", str(data), "--out", str(tmp_path / "ix")]
    one_line_error(capsys, argv, r"manifest\.json: splits\.train\.tokens: '30000' is not a count")
    del manifest["splits"]["val"]
    manifest["splits"]["train"]["tokens"] = 30000
    (data / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataError, match=r"splits: a 'train' and a 'val' entry are expected"):
        read_manifest(data)
    manifest["splits"]["val"] = {**manifest["splits"]["train"], "file": "../train.bin"}
    (data / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataError, match=r"splits\.val\.file: '\.\./train\.bin' is not a file name"):
        read_manifest(data)


def test_sizes_this_machine_cannot_hold_are_refused_before_allocating(
    token_dir, tiny_indices, tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(device, "physical_memory", lambda: 1 << 14)  # a machine of 16 KiB
    one_line_error(
        capsys,
        train_args(token_dir, tiny_indices, tmp_path / "run"),
        r"training baseline at preset tiny needs [0-9.]+ GiB, more than the 0\.0 GiB of this "
        r"machine's cpu memory",
    )
    argv = ["indices", "--preset", "tiny", "--data", str(token_dir), "--out", str(tmp_path / "ix")]
    one_line_error(capsys, argv, r"the indices of preset tiny needs [0-9.]+ GiB")
    assert not (tmp_path / "ix" / "train.npy").exists()
    argv = BENCH + ["--inference", "--decode-tokens", "8"]
    one_line_error(capsys, argv, r"the model of baseline at preset tiny needs [0-9.]+ GiB")


# ---- command-line values -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv,message",
    [
        (DESCRIBE + ["--mfu", "0"], r"--mfu: 0\.0 is not a positive number"),
        (DESCRIBE + ["--mfu", "nan"], r"--mfu: nan is not a positive number"),
        (DESCRIBE + ["--mfu", "2"], r"--mfu: 2\.0 is more than 1"),
        (DESCRIBE + ["--tokens-per-s", "0"], r"--tokens-per-s: 0\.0 is not a positive number"),
        (DESCRIBE + ["--tokens-per-s", "inf"], r"--tokens-per-s: inf is not a positive number"),
        (DESCRIBE + ["--peak-tflops", "-1"], r"--peak-tflops: -1\.0 is not a positive number"),
        (BENCH + ["--steps", "0"], r"--steps: 0 is not a positive number"),
        (BENCH + ["--warmup", "-1"], r"--warmup: -1 is not a number of steps"),
        (BENCH + ["--loss-chunks", "0"], r"--loss-chunks: 0 is not a positive number"),
        (BENCH + ["--inference", "--decode-tokens", "0"], r"--decode-tokens: 0 is not a positive"),
        (BENCH + ["--inference", "--repeats", "0"], r"--repeats: 0 is not a positive number"),
    ],
)
def test_command_line_numbers_out_of_range_are_one_line(argv, message, capsys):
    one_line_error(capsys, argv, message)


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--loss-chunks", "0"], r"--loss-chunks: 0 is not a positive number"),
        (["--stop-signal", "SIGKILL"], r"--stop-signal: SIGKILL cannot be caught"),
        (["--stop-signal", "STOP"], r"--stop-signal: SIGSTOP cannot be caught"),
        (["--seed", str(MAX_SEED + 1)], r"seed 4294967296: seeds are 0, 1, 2"),
    ],
)
def test_train_options_out_of_range_are_one_line(
    extra, message, token_dir, tiny_indices, tmp_path, capsys
):
    one_line_error(capsys, train_args(token_dir, tiny_indices, tmp_path / "run", *extra), message)
    assert not (tmp_path / "run" / "metrics.csv").exists()


def test_out_naming_a_file_is_one_line_and_leaves_the_file(
    token_dir, tiny_indices, tmp_path, capsys
):
    target = precious(tmp_path)
    one_line_error(
        capsys, train_args(token_dir, tiny_indices, target), r"precious\.txt: exists and is not a"
    )
    argv = ["indices", "--preset", "tiny", "--data", str(token_dir), "--out", str(target / "ix")]
    one_line_error(capsys, argv, r"precious\.txt/ix: cannot be created \(Not a directory\)")
    assert target.read_text() == PRECIOUS


def read_only_run(folder: Path, code: str) -> subprocess.CompletedProcess:
    """`python -c CODE` with `folder` read-only: mode 555, and for root (whom modes do not bind)
    a read-only bind mount in a mount namespace of its own."""
    command = [sys.executable, "-c", code]
    folder.chmod(0o555)
    if os.geteuid() == 0:
        mount = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" "$0" && exec "$@"'
        command = [shutil.which("unshare"), "-m", "sh", "-c", mount, str(folder), *command]
    try:
        return subprocess.run(command, capture_output=True, text=True, env=ENV)
    finally:
        folder.chmod(0o755)


def test_out_in_a_read_only_folder_is_one_line(tmp_path):
    data = random_token_files(tmp_path / "data")
    folder = tmp_path / "read-only"
    folder.mkdir()
    argv = ["indices", "--preset", "tiny", "--data", str(data), "--out"]
    # Both commands in one process: one import of torch.
    code = (
        "from repro.cli import main; "
        f"print(main({argv + [str(folder)]!r}), main({argv + [str(folder / 'ix')]!r}))"
    )
    result = read_only_run(folder, code)
    assert result.stdout == "2 2\n", result.stdout + result.stderr
    existing, below = result.stderr.splitlines()
    assert existing == f"repro: error: {folder}: not writable (read-only folder or file system)"
    # Read-only file system under root's bind mount, Permission denied under mode 555.
    assert re.fullmatch(
        rf"repro: error: {folder / 'ix'}: cannot be created \((Read-only|Perm).*\)", below
    )
    assert not list(folder.iterdir())


@pytest.mark.parametrize(
    "report,message",
    [
        ([], r"not a `repro bench --json` report \(no list of 'fastest' rows\)"),
        ({"preset": "tiny", "device": "cpu", "fastest": [{"model": {}}]}, r"fastest\[0\] names no"),
        (
            {
                "preset": "tiny",
                "device": "cpu",
                "fastest": [
                    {"experiment": "baseline", "model": {}, "tokens_per_s": 0, "flops_per_token": 1}
                ],
            },
            r"fastest\[0\]\.tokens_per_s: 0 is not a positive number",
        ),
        ("[" * 100_000, r"bench\.json: nested more than 32 levels deep"),
    ],
    ids=["a list", "a row without experiment", "zero tokens/s", "nested 100,000 deep"],
)
def test_a_bench_report_of_the_wrong_shape_is_one_line(tmp_path, capsys, report, message):
    path = tmp_path / "bench.json"
    path.write_text(report if isinstance(report, str) else json.dumps(report))
    one_line_error(capsys, DESCRIBE + ["--bench", str(path)], message)


def test_prepare_never_writes_through_a_linked_partial_file(tmp_path, capsys):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": f"document {i}"}) + "\n" for i in range(40)))
    out = tmp_path / "tokens"
    out.mkdir()
    target = precious(tmp_path)
    (out / "train.bin.partial").symlink_to(target)
    argv = ["prepare", "--data-files", str(corpus), "--out", str(out), "--expected-docs", "40"]
    assert main(argv + ["--num-proc", "1", "--cache-dir", str(tmp_path / "cache")]) == 0
    assert target.read_text() == PRECIOUS
    assert read_manifest(out)["splits"]["train"]["documents"] + 1 == 40


# ---- JSON within bounds: integers of at most 18 digits, at most 32 levels deep ------------------


HUGE = "1" * 5000  # past Python's 4,300 digits, which int() refuses with a ValueError


@pytest.mark.parametrize(
    "damage,message",
    [
        (lambda text: text.replace('"last_step": 12', f'"last_step": {HUGE}'),
         r"run\.json: not valid JSON \(an integer of 5,000 digits, more than 18\)"),
        (lambda text: text.replace('"identity": {', '"identity": "baseline", "x": {'),
         r"run\.json: identity: 'baseline' is not of type dict"),
        (lambda text: text.replace('"data": {', '"data": "tokens", "x": {'),
         r"run\.json: data: 'tokens' is not of type dict"),
    ],
    ids=["a 5000-digit integer", "identity a string", "data a string"],
)  # fmt: skip
@pytest.mark.parametrize("command", ["compare", "evidence", "export", "train"])
def test_a_damaged_run_json_is_one_line_for_every_reader(
    tiny_runs, token_dir, tiny_indices, tmp_path, capsys, damage, message, command
):
    path = tiny_runs / "baseline" / "run.json"
    path.write_text(damage(path.read_text()))
    run, other = tiny_runs / "baseline", tiny_runs / "mlp4.75"
    argv = {
        "compare": ["compare", run, "--reference", other],
        "evidence": ["evidence", "--preset", "tiny", "--runs", tiny_runs, "--out", tmp_path / "e"],
        "export": ["export", run, "--out", tmp_path / "model"],
        "train": train_args(token_dir, tiny_indices, run),  # resuming it
    }[command]  # fmt: skip
    one_line_error(capsys, argv, message)


def test_status_shows_a_run_with_a_huge_integer_as_damaged_and_the_others(tiny_runs, capsys):
    path = tiny_runs / "baseline" / "run.json"
    path.write_text(path.read_text().replace('"last_step": 12', f'"last_step": {HUGE}'))
    assert main(["status", "--runs-dir", str(tiny_runs.parent), "--preset", "tiny"]) == 0
    out = capsys.readouterr().out
    assert "tiny/baseline: " in out and "an integer of 5,000 digits" in out
    assert "mlp4.75 " in out and "completed" in out


@pytest.mark.parametrize(
    "stated,message",
    [
        ("[" * 30_000 + "]" * 30_000, r"--stated: nested more than 32 levels deep"),
        ('{"steps": ' + HUGE + "}", r"--stated: not valid JSON \(an integer of 5,000 digits"),
    ],
    ids=["nested 30,000 deep", "a 5000-digit integer"],
)
@pytest.mark.parametrize("command", ["import-audit-log", "import-audit-logs"])
def test_a_stated_configuration_beyond_the_bounds_is_one_line(
    tmp_path, capsys, stated, message, command
):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "gpt3large_x.csv").write_text("step,train_loss,val_loss\n0,10.0000,10.1000\n")
    given = logs / "gpt3large_x.csv" if command == "import-audit-log" else logs
    argv = [command, given, "--out", tmp_path / "out", "--stated", stated]
    one_line_error(capsys, argv, message)
    assert not (tmp_path / "out").exists()
