"""`repro export` over an earlier export and of damaged runs: the folder holds exactly one export's
files, whole or not at all; a run.json it cannot read is one line; the card runs no code."""

import ast
import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, one_line_error, shortened

from repro.annex.models.export import export
from repro.config import load_run
from repro.errors import ReproError
from repro.training.run import train

pytest.importorskip("transformers")  # the `hf` extra, which `repro export` needs
CODE = {"modeling_repro.py", "attention.py", "model.py", "sizes.py"}


def trained(token_dir, indices, out, experiment):
    train(shortened(load_run("tiny", experiment), 2), token_dir, indices, out)
    return out


@pytest.fixture(scope="module")
def runs(token_dir, tiny_indices, tmp_path_factory):
    """A linear run (a plain GPT-2 export) and a residual_gelu run (one that carries its code)."""
    root = tmp_path_factory.mktemp("runs")
    return {
        name: trained(token_dir, tiny_indices, root / name, name)
        for name in ("baseline", "resgelu-lr3e-3")
    }


def test_a_linear_export_over_a_custom_code_export_carries_no_code(runs, tmp_path):
    out = export(runs["resgelu-lr3e-3"], tmp_path / "model")
    assert CODE <= {p.name for p in out.iterdir()}
    export(runs["baseline"], out)
    fresh = export(runs["baseline"], tmp_path / "fresh")
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in fresh.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh", "model"]


@pytest.mark.parametrize("failing", [1, 2])
def test_a_re_export_whose_move_fails_leaves_one_export_whole(runs, tmp_path, monkeypatch, failing):
    """The `failing`th move of a file or folder into the export's folder fails: the folder holds
    the earlier export or the new one, never part of each."""
    out = export(runs["resgelu-lr3e-3"], tmp_path / "model")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    after = {p.name for p in export(runs["baseline"], tmp_path / "fresh").iterdir()}
    real, moves = os.replace, []

    def move(src, dst):
        if out in (Path(dst), Path(dst).parent):
            moves.append(dst)
            if len(moves) == failing:
                raise OSError(28, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", move)
    monkeypatch.setattr(os, "rename", move)
    try:
        export(runs["baseline"], out)
    except ReproError as e:
        assert "No space left on device" in str(e)
        monkeypatch.undo()
        assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    else:
        monkeypatch.undo()
        assert {p.name for p in out.iterdir()} == after
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh", "model"]


def test_the_card_s_snippets_quote_the_folder_s_name(runs, tmp_path, capsys):
    name = 'x");__import__("os").system("id");("'
    out = tmp_path / name
    out = export(runs["baseline"], out)
    card = (out / "README.md").read_text()
    python = card.split("```python\n", 1)[1].split("```", 1)[0]
    calls = [n for n in ast.walk(ast.parse(python)) if isinstance(n, ast.Call)]
    loads = [c for c in calls if getattr(c.func, "attr", "") == "from_pretrained"]
    assert [c.args[0].value for c in loads] == [name, name]  # the name as a string, nothing more
    assert "system" not in {getattr(c.func, "attr", "") for c in calls}
    assert f"load_model({json.dumps(name)})" in card
    shell = card.split("```sh\n", 1)[1].split("```", 1)[0]
    assert shlex.split(shell)[4] == f"pretrained={name}"  # one word, as lm_eval reads it


def damaged_copy(run, tmp_path, edit):
    """A copy of `run` (run.json, metrics.csv, ckpt.pt) with run.json changed by `edit`."""
    copy = tmp_path / "damaged"
    copy.mkdir()
    for name in ("metrics.csv", "ckpt.pt"):
        os.link(run / name, copy / name)
    record = json.loads((run / "run.json").read_text())
    edit(record)
    (copy / "run.json").write_text(json.dumps(record))
    return copy


EDITS = {
    "config.corpus": lambda r: [r["config"].pop("corpus"), r["config"].pop("preset", None)],
    "config.experiment": lambda r: r["config"].update(experiment="resgelu"),
    "token_files.train.tokens": lambda r: r["data"]["token_files"]["train"].update(tokens="many"),
    "identity.model": lambda r: r["identity"].update(model={}),
    "identity.train.max_step": lambda r: r["identity"]["train"].update(max_step="4"),
}


@pytest.mark.parametrize("field", EDITS)
def test_an_export_of_a_run_json_with_a_bad_field_is_one_line(runs, tmp_path, capsys, field):
    run = damaged_copy(runs["baseline"], tmp_path, EDITS[field])
    argv = ["export", run, "--out", tmp_path / "model"]
    one_line_error(capsys, argv, r"damaged/run\.json: ")
    assert not (tmp_path / "model").exists()


EXPORTING = """
import sys, time
import repro.annex.models.hub as hub
from repro.cli.assembly import main
write = hub.write_model
def slow(model, folder):
    write(model, folder)
    print("written", flush=True)
    time.sleep(60)
hub.write_model = slow
import repro.annex.models.export as export
export.write_model = slow
sys.exit(main(sys.argv[1:]))
"""


def test_sigterm_during_an_export_leaves_no_partial_folder(runs, tmp_path):
    env = os.environ | {"PYTHONPATH": str(REPO / "src")}
    argv = [sys.executable, "-c", EXPORTING, "export", str(runs["baseline"])]
    process = subprocess.Popen(
        [*argv, "--out", str(tmp_path / "model")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout.readline() == "written\n"
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode != 0 and "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []
