"""Careless input beyond the configuration files: a preset path that is a folder, a manifest of
the wrong shape, sizes this machine cannot hold, command-line numbers out of range, --out where
nothing can be written, damaged reports and run.json files. Each ends in one line naming the file,
key or flag, and nothing it points at is touched (configuration files: test_config_files.py;
links and full disks: test_written_files.py)."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, one_line_error, random_token_files, train_args

from repro.cli.assembly import main
from repro.config import MAX_SEED
from repro.data.tokens import DataError, read_manifest
from repro.runtime import device

ENV = dict(
    os.environ,
    PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])),
)
DESCRIBE = ["describe", "--preset", "tiny", "--experiment", "baseline"]
BENCH = ["bench", "--preset", "tiny", "--device", "cpu", "--experiment", "baseline"]


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
        "from repro.cli.assembly import main; "
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
    tiny_runs,
    tiny_baseline_run,
    token_dir,
    tiny_indices,
    tmp_path,
    capsys,
    damage,
    message,
    command,
):
    path = tiny_runs / "baseline" / "run.json"
    path.write_text(damage(path.read_text()))
    run, other = tiny_runs / "baseline", tiny_runs / "mlp4.75"
    # its checkpoint beside it: export and resume reach the record, not the checkpoint's absence
    shutil.copy(tiny_baseline_run / "ckpt.pt", run)
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
