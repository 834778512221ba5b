"""W&B and MLflow (runtime.trackers): metrics.csv's rows logged with the libraries' own APIs and
read back with their own readers, offline; a resume continuing the same tracker run without a step
twice; a tracker that cannot be imported or started, or fails mid-run, said in one line and
dropped, training's files the same as without it."""

import json
import os
import subprocess
import sys
import threading

import pytest
from conftest import edited_tiny_preset, read_metrics, without_timing

import repro.training.loop as loop_module
from repro.config import load_preset, load_run
from repro.config.schema import ConfigError
from repro.rundir import read_record
from repro.rundir.tensorboard import TAGS
from repro.rundir.trackers import TRACKERS_JSON
from repro.training.run import train


def offline_wandb(**runtime):
    return load_run("tiny", "baseline").with_runtime(
        trackers=["wandb"], wandb_mode="offline", **runtime
    )


def sqlite_mlflow(tmp_path, **runtime):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    return load_run("tiny", "baseline").with_runtime(
        trackers=["mlflow"], mlflow_tracking_uri=uri, **runtime
    )


def die_at_step_7(run, token_dir, tiny_indices, out, monkeypatch):
    """Train `run` into `out` until a KeyboardInterrupt at step 7; the real step, to put back."""
    real_step = loop_module.train_step

    def killed(*args, **kwargs):
        if args[3] == 7:
            raise KeyboardInterrupt
        return real_step(*args, **kwargs)

    monkeypatch.setattr(loop_module, "train_step", killed)
    with pytest.raises(KeyboardInterrupt):
        train(run, token_dir, tiny_indices, out)
    return real_step


def crash_then_resume(run, token_dir, tiny_indices, out, monkeypatch):
    """Train `run` into `out`, dying at step 7 (steps 5 and 6 logged after the step-5
    checkpoint), then resume it to the end."""
    real_step = die_at_step_7(run, token_dir, tiny_indices, out, monkeypatch)
    first_ids = json.loads((out / TRACKERS_JSON).read_text())
    monkeypatch.setattr(loop_module, "train_step", real_step)
    train(run, token_dir, tiny_indices, out)
    return first_ids


def assert_same_as_metrics(curves: dict, out) -> None:
    """A tracker's curves are metrics.csv's non-empty values, every step once. Its speeds of the
    steps a crash took again (5 and 6) are those of their first time, which it holds already."""
    rows = read_metrics(out)
    assert set(curves) == set(TAGS.values())
    for column, tag in TAGS.items():
        expected = [(int(r["step"]), float(r[column])) for r in rows if r[column]]
        if tag.startswith("speed/"):
            assert [s for s, _ in curves[tag]] == [s for s, _ in expected], tag
        else:
            assert curves[tag] == expected, tag


def wandb_records(out) -> list[list[dict]]:
    """The records of each offline run folder under out/wandb, as wandb's own reader of its
    .wandb transaction log gives them."""
    files = sorted((out / "wandb").glob("offline-run-*/run-*.wandb"))
    records = []
    for path in files:
        text = subprocess.run(
            [sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(path)],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout
        records.append([json.loads(line) for line in text.splitlines() if line.strip()])
    return records


def wandb_curves(records) -> dict[str, list[tuple[int, float]]]:
    curves = {}
    for session in records:
        for record in session:
            if record["type"] == "history":
                item = record["history"]["item"]
                for tag in TAGS.values():
                    if tag in item:
                        curves.setdefault(tag, []).append((item["_step"], item[tag]))
    return curves


def test_wandb_offline_holds_metrics_csv_and_a_resume_continues_its_run(
    token_dir, tiny_indices, tmp_path, monkeypatch
):
    pytest.importorskip("wandb")
    out = tmp_path / "run"
    first_ids = crash_then_resume(offline_wandb(), token_dir, tiny_indices, out, monkeypatch)
    records = wandb_records(out)
    assert len(records) == 2  # a folder a session, as wandb works offline
    run_id = first_ids["wandb"]["run_id"]
    assert json.loads((out / TRACKERS_JSON).read_text())["wandb"] == {
        "run_id": run_id,
        "next_step": 13,
    }
    assert [r["run"]["run_id"] for s in records for r in s if r["type"] == "run"] == [run_id] * 2
    assert_same_as_metrics(wandb_curves(records), out)  # across both sessions
    assert read_record(out).trackers == ["wandb"]


def test_mlflow_holds_metrics_csv_and_a_resume_continues_its_run(
    token_dir, tiny_indices, tmp_path, monkeypatch
):
    mlflow = pytest.importorskip("mlflow")
    pytest.importorskip("sqlalchemy")
    out, run = tmp_path / "run", sqlite_mlflow(tmp_path)
    first_ids = crash_then_resume(run, token_dir, tiny_indices, out, monkeypatch)
    run_id = first_ids["mlflow"]["run_id"]
    assert json.loads((out / TRACKERS_JSON).read_text())["mlflow"]["run_id"] == run_id
    client = mlflow.MlflowClient(run.runtime.mlflow_tracking_uri)
    held = client.get_run(run_id)
    assert held.info.status == "FINISHED"
    assert len(client.search_runs([held.info.experiment_id])) == 1  # the resume's run the same
    curves = {tag: client.get_metric_history(run_id, tag) for tag in TAGS.values()}
    assert_same_as_metrics(
        {t: sorted((m.step, m.value) for m in h) for t, h in curves.items()}, out
    )
    assert read_record(out).trackers == ["mlflow"]


def test_a_crash_after_a_checkpoint_logs_no_step_twice_to_a_run_that_holds_it(
    token_dir, tiny_indices, tmp_path, monkeypatch
):
    """The tracker's own history says which steps it holds, trackers.json lost or not."""
    mlflow = pytest.importorskip("mlflow")
    pytest.importorskip("sqlalchemy")
    out, run = tmp_path / "run", sqlite_mlflow(tmp_path)
    real_step = die_at_step_7(run, token_dir, tiny_indices, out, monkeypatch)
    saved = json.loads((out / TRACKERS_JSON).read_text())
    saved["mlflow"]["next_step"] = 0  # as a process killed outright leaves it
    (out / TRACKERS_JSON).write_text(json.dumps(saved))
    monkeypatch.setattr(loop_module, "train_step", real_step)
    train(run, token_dir, tiny_indices, out)
    client = mlflow.MlflowClient(run.runtime.mlflow_tracking_uri)
    steps = [m.step for m in client.get_metric_history(saved["mlflow"]["run_id"], "loss/train")]
    assert sorted(steps) == list(range(13))


def fail_to_import(monkeypatch, module: str):
    monkeypatch.setitem(sys.modules, module, None)  # `import module` is an ImportError


def fail(monkeypatch, target: str):
    def raising(*args, **kwargs):
        raise RuntimeError("tracker down")

    monkeypatch.setattr(target, raising)


FAILURES = {
    "wandb import": ("wandb", lambda m: fail_to_import(m, "wandb"), "cannot be imported"),
    "wandb start": ("wandb", lambda m: fail(m, "wandb.init"), "cannot be imported or started"),
    "wandb log": ("wandb", lambda m: fail(m, "wandb.sdk.wandb_run.Run.log"), "while logging"),
    "mlflow import": ("mlflow", lambda m: fail_to_import(m, "mlflow"), "cannot be imported"),
    "mlflow start": ("mlflow", lambda m: fail(m, "mlflow.start_run"), "or started"),
    "mlflow log": ("mlflow", lambda m: fail(m, "mlflow.log_metrics"), "failed while logging"),
}


@pytest.mark.parametrize("failure", FAILURES)
def test_a_failing_tracker_is_one_line_and_training_completes_the_same(
    failure, token_dir, tiny_indices, tiny_baseline_run, tmp_path, monkeypatch, capfd
):
    name, make_fail, said = FAILURES[failure]
    pytest.importorskip(name)
    run = offline_wandb() if name == "wandb" else sqlite_mlflow(tmp_path)
    make_fail(monkeypatch)
    out = tmp_path / "run"
    record = train(run, token_dir, tiny_indices, out)
    assert record.status == "completed"
    assert without_timing(read_metrics(out)) == without_timing(read_metrics(tiny_baseline_run))
    lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"warning: {name}: ") and said in lines[0]
    assert "training goes on without it" in lines[0]
    assert read_record(out).trackers == []


def test_a_tracker_that_falls_behind_is_one_line_and_training_does_not_wait_for_it(
    token_dir, tiny_indices, tmp_path, monkeypatch, capfd
):
    """An unreachable server: its tracker's thread hangs; past BACKLOG rows it is dropped."""
    mlflow = pytest.importorskip("mlflow")
    import repro.rundir.trackers

    monkeypatch.setattr(repro.rundir.trackers, "BACKLOG", 2)
    reachable, start_run = threading.Event(), mlflow.start_run

    def hanging(*args, **kwargs):
        reachable.wait()
        return start_run(*args, **kwargs)

    monkeypatch.setattr(mlflow, "start_run", hanging)
    out = tmp_path / "run"
    assert train(sqlite_mlflow(tmp_path), token_dir, tiny_indices, out).status == "completed"
    lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith("warning:")]
    assert lines == [
        "warning: mlflow: 2 rows behind (is its server reachable?); training goes on without it "
        "(metrics.csv is the record)"
    ]
    assert read_record(out).trackers == []
    written = sorted(p.name for p in out.iterdir())
    reachable.set()  # the thread, let go, ends without logging or writing
    for thread in threading.enumerate():
        if thread.name == "repro-mlflow":
            thread.join(60)
    assert capfd.readouterr().err.count("warning:") == 0
    assert sorted(p.name for p in out.iterdir()) == written
    assert TRACKERS_JSON not in written


@pytest.mark.parametrize(
    "content",
    [
        "{",
        "[]",
        '{"mlflow": "abc"}',
        '{"mlflow": {"run_id": "../x", "next_step": 0}}',
        '{"mlflow": {"run_id": "abc", "next_step": 1e400}}',
        '{"mlflow": {"run_id": "abc", "next_step": true}}',
        '{"mlflow": {"run_id": "abc\\u0000", "next_step": 0}}',
        '{"mlflow": {"run_id": "abc", "next_step": ' + "9" * 5000 + "}}",
    ],
)
def test_a_damaged_trackers_json_is_one_line_and_left_as_it_is(
    content, token_dir, tiny_indices, tmp_path, capfd
):
    out = tmp_path / "run"
    out.mkdir()
    (out / TRACKERS_JSON).write_text(content)
    # No tracker is imported: the file is refused before any starts.
    run = load_run("tiny", "baseline").with_runtime(trackers=["mlflow"])
    assert train(run, token_dir, tiny_indices, out).status == "completed"
    lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(lines) == 1 and str(out / TRACKERS_JSON) in lines[0], lines
    assert "training goes on without mlflow" in lines[0]
    assert (out / TRACKERS_JSON).read_text() == content


@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_a_trackers_json_that_is_a_link_or_a_fifo_is_one_line_and_not_written_through(
    kind, token_dir, tiny_indices, tmp_path, capfd
):
    out, target = tmp_path / "run", tmp_path / "elsewhere.json"
    out.mkdir()
    target.write_text("{}")
    if kind == "link":
        (out / TRACKERS_JSON).symlink_to(target)
    else:
        os.mkfifo(out / TRACKERS_JSON)
    run = sqlite_mlflow(tmp_path)
    assert train(run, token_dir, tiny_indices, out).status == "completed"
    lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(lines) == 1 and str(out / TRACKERS_JSON) in lines[0], lines
    assert target.read_text() == "{}"
    assert (out / TRACKERS_JSON).is_symlink() == (kind == "link")


@pytest.mark.parametrize(
    "runtime, field",
    [
        ({"trackers": ["comet"]}, "runtime.trackers"),
        ({"trackers": ["wandb", "wandb"]}, "runtime.trackers"),
        ({"trackers": "wandb"}, "runtime.trackers"),
        ({"tracker_project": "../x"}, "runtime.tracker_project"),
        ({"tracker_project": "a/b"}, "runtime.tracker_project"),
        ({"wandb_mode": "sometimes"}, "runtime.wandb_mode"),
        ({"mlflow_tracking_uri": "sqlite:///a\0b"}, "runtime.mlflow_tracking_uri"),
        ({"mlflow_tracking_uri": 5}, "runtime.mlflow_tracking_uri"),
    ],
)
def test_the_tracker_keys_refuse_what_they_cannot_be(runtime, field, tmp_path):
    path = edited_tiny_preset(tmp_path, runtime=runtime)
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        load_preset(path)


def test_a_preset_without_tracker_keys_has_none():
    assert load_preset("tiny").runtime.trackers == []
