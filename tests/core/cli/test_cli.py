"""The `repro` command line."""

import json
import shutil
import subprocess
import sys

import pytest
from conftest import REPO, train_args

from repro.cli.assembly import main


def test_describe_paper_baseline_json(capsys):
    assert main(["describe", "--preset", "paper", "--experiment", "baseline", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["non_embedding_params"] == 84_953_856  # docs/specification.md §1
    assert d["total_params"] == 124_373_760
    assert d["tokens_per_step"] == 491_520  # §2
    assert d["flops_per_token"] / 1e9 == pytest.approx(0.86, abs=0.01)  # §7
    assert d["flops_per_step"] == pytest.approx(4.2e14, rel=0.01)
    assert d["total_flops"] == pytest.approx(2.5e19, rel=0.04)
    assert 17 <= d["gpu_hours"] <= 18  # §7: up to 18 hours at 40% MFU of 989 TFLOP/s


def test_describe_group_with_measured_throughput(capsys):
    assert (
        main(["describe", "--preset", "paper", "--group", "table1", "--tokens-per-s", "491520"])
        == 0
    )
    out = capsys.readouterr().out
    assert "table1: 5 runs, 83.3 GPU-hours at measured" in out  # 60003 steps x 1 s = 16.67 h each


def test_describe_without_a_group_lists_the_groups(capsys):
    assert main(["describe", "--preset", "paper"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "--group NAME" in err and "table1" in err and "figure2" in err


def test_train_errors_are_one_line_and_exit_2(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "repro",
            *train_args(tmp_path, tmp_path, tmp_path / "run", preset="smoke", experiment="nope"),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "unknown experiment 'nope'" in result.stderr
    assert not (tmp_path / "run").exists()


def test_cli_trains_a_tiny_run(token_dir, tmp_path, capsys):
    assert (
        main(
            ["indices", "--preset", "tiny", "--data", str(token_dir), "--out", str(tmp_path / "ix")]
        )
        == 0
    )
    assert (
        main(train_args(token_dir, tmp_path / "ix", tmp_path / "run", experiment="identity")) == 0
    )
    assert "completed at step 12" in capsys.readouterr().out


def test_train_uses_the_config_of_the_working_directory(
    token_dir, tiny_indices, tmp_path, monkeypatch, capsys
):
    """Run from another clone: its config/ is used, and said to be (not the installed one's)."""
    config = shutil.copytree(REPO / "config", tmp_path / "clone" / "config")
    preset = config / "presets" / "tiny.yaml"
    preset.write_text(preset.read_text().replace("description:", "description: the clone's,", 1))
    monkeypatch.chdir(tmp_path / "clone")
    monkeypatch.delenv("REPRO_CONFIG_DIR", raising=False)
    assert main(train_args(token_dir, tiny_indices, "run")) == 0
    assert f"config: {config.resolve()}\n" in capsys.readouterr().out
    recorded = json.loads((tmp_path / "clone" / "run" / "run.json").read_text())
    assert recorded["config"]["preset_file"] == str(preset.resolve())


def test_every_option_of_every_subcommand_has_help():
    import argparse

    from repro.cli.assembly import build_parser

    def undocumented(parser, path):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helped = {a.dest for a in action._choices_actions if a.help}
                yield from (f"{path} {name}" for name in action.choices if name not in helped)
                for name, sub in action.choices.items():
                    yield from undocumented(sub, f"{path} {name}")
            elif not action.help:
                yield f"{path} {'/'.join(action.option_strings) or action.dest}"

    assert list(undocumented(build_parser(), "repro")) == []


def test_version(capsys):
    import repro

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out == f"repro {repro.__version__}\n"
