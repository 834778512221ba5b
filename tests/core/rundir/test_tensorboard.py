"""TensorBoard: a run's metrics as an event file beside metrics.csv, read back with TensorBoard's
own reader: every step once, across a crash and resume; the authors' imported runs the same way."""

import math

import pytest
from authors_helpers import authors_folder
from conftest import PRECIOUS, one_line_error, precious, read_metrics, train_args
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import repro.training.loop as loop_module
from repro.cli.assembly import main
from repro.config import load_config, load_run, resolve_run
from repro.errors import ReproError
from repro.rundir.tensorboard import EVENTS, TAGS, EventLog, kept_events
from repro.training.run import train


def scalars(run_dir) -> dict[str, list[tuple[int, float]]]:
    """(step, value) per tag as TensorBoard loads them, orphaned data kept: a step written twice
    would show twice."""
    events = EventAccumulator(str(run_dir), purge_orphaned_data=False)
    events.Reload()
    return {
        tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]
    }


def assert_same_as_metrics(run_dir):
    """The event file holds metrics.csv: each column's non-empty values, step by step."""
    rows, curves = read_metrics(run_dir), scalars(run_dir)
    for column, tag in TAGS.items():
        expected = [(int(r["step"]), float(r[column])) for r in rows if r[column]]
        assert [step for step, _ in curves.get(tag, [])] == [step for step, _ in expected], tag
        for (_, value), (_, logged) in zip(curves.get(tag, []), expected):
            assert value == pytest.approx(logged, rel=1e-6)  # stored as float32


def test_a_run_writes_its_scalars_live_and_resumes_without_a_step_twice(
    token_dir, tiny_indices, tmp_path, monkeypatch
):
    run = load_run("tiny", "baseline")
    real_step = loop_module.train_step

    def killed(*args, **kwargs):
        if args[3] == 7:  # die part-way: steps 5 and 6 are logged after the step-5 checkpoint
            raise KeyboardInterrupt
        return real_step(*args, **kwargs)

    monkeypatch.setattr(loop_module, "train_step", killed)
    with pytest.raises(KeyboardInterrupt):
        train(run, token_dir, tiny_indices, tmp_path / "run")
    events = tmp_path / "run" / EVENTS
    # live: the steps logged so far are in the file while the run is still going (or died)
    assert [s for s, _ in scalars(tmp_path / "run")["loss/train"]] == list(range(7))
    first_session = kept_events(events, 5)

    monkeypatch.setattr(loop_module, "train_step", real_step)
    train(run, token_dir, tiny_indices, tmp_path / "run")
    curves = scalars(tmp_path / "run")
    assert set(curves) == set(TAGS.values())
    assert [step for step, _ in curves["loss/train"]] == list(range(13))
    assert [step for step, _ in curves["loss/eval_val"]] == [0, 4, 8, 12]
    assert curves["loss/eval_val"][0][1] == pytest.approx(math.log(50304), rel=0.05)
    assert_same_as_metrics(tmp_path / "run")
    # Appended: the first session's events up to the checkpoint are the file's start, unchanged.
    assert events.read_bytes().startswith(first_session)
    assert [p.name for p in (tmp_path / "run").glob("*tfevents*")] == [EVENTS]


def test_a_record_cut_short_by_a_crash_is_dropped_on_resume(tmp_path):
    log = EventLog(tmp_path, 0)
    for step in range(3):
        log.append({"step": step, "train_loss": 5.0 - step, "eval_val_loss": None})
    log.close()
    events = tmp_path / EVENTS
    whole = events.read_bytes()
    events.write_bytes(whole[:-3])  # the step-2 event, half written
    log = EventLog(tmp_path, 3)
    log.append({"step": 2, "train_loss": 2.5})
    log.close()
    assert scalars(tmp_path) == {"loss/train": [(0, 5.0), (1, 4.0), (2, 2.5)]}


def test_the_authors_run_imports_with_its_curves(tmp_path):
    preset, experiments = load_config("tiny")
    folder = authors_folder(tmp_path, resolve_run(preset, experiments["baseline"]))
    out = tmp_path / "imported"
    args = ["import-authors-run", str(folder), "--out", str(out), "--preset", "tiny"]
    assert main(args) == 0
    assert main(args) == 0  # imported again: the event file is written afresh
    assert_same_as_metrics(out)
    curves = scalars(out)
    assert [s for s, _ in curves["loss/eval_val"]] == [0, 4, 8, 12]
    assert "speed/tokens_per_s" not in curves  # their tensors hold no timings


@pytest.mark.parametrize("resume_step", [0, 3])
def test_an_event_file_that_is_a_link_is_replaced_never_its_target(tmp_path, resume_step):
    target = precious(tmp_path)
    (tmp_path / EVENTS).symlink_to(target)
    log = EventLog(tmp_path, resume_step)
    log.append({"step": 3, "train_loss": 2.5})
    log.close()
    assert target.read_text() == PRECIOUS and not (tmp_path / EVENTS).is_symlink()
    assert scalars(tmp_path) == {"loss/train": [(3, 2.5)]}


def test_an_event_file_in_the_way_stops_training_in_one_line_before_it_runs(
    token_dir, tiny_indices, tmp_path, capsys
):
    run = tmp_path / "run"
    (run / EVENTS).mkdir(parents=True)  # a folder where the event file goes
    argv = train_args(token_dir, tiny_indices, run)
    one_line_error(capsys, argv, rf"{EVENTS}: cannot be written \(Is a directory\)")
    assert not (run / "run.json").exists()  # never said "running"


def test_an_event_whose_payload_is_garbage_is_one_line_on_resume(tmp_path):
    log = EventLog(tmp_path, 0)
    for step in range(3):
        log.append({"step": step, "train_loss": 5.0 - step})
    log.close()
    events = tmp_path / EVENTS
    data = bytearray(events.read_bytes())
    first = int.from_bytes(data[:8], "little") + 16  # the file-version record, whole
    length = int.from_bytes(data[first : first + 8], "little")
    data[first + 12 : first + 12 + length] = b"\xff" * length  # step 0's payload
    events.write_bytes(bytes(data))
    with pytest.raises(ReproError, match=r"events\.out\.tfevents\.repro: a record that is not"):
        EventLog(tmp_path, 3)
    assert events.read_bytes() == bytes(data)  # left as it was
