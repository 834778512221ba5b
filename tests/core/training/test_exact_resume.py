"""What exact resume means (docs/runs.md): with the same settings (device, torch threads, versions,
micro-batch), a resumed run equals the uninterrupted one bit for bit; run.json records those
settings for each session, so that a reader can tell whether that condition held."""

import pytest
import torch
from conftest import read_metrics, without_timing

from repro.config import load_run
from repro.rundir import read_record
from repro.runtime import signals
from repro.training.run import train

RUN = load_run("tiny", "baseline")


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_a_resume_with_the_same_thread_count_is_bit_for_bit_and_recorded(
    one_thread, token_dir, tiny_indices, tiny_baseline_run, tmp_path, monkeypatch
):
    """The uninterrupted run is the session's tiny baseline, trained with one thread."""
    asked = []
    monkeypatch.setattr(signals, "requested", lambda: len(asked.append(1) or asked) > 5)
    with pytest.raises(signals.Preempted):
        train(RUN, token_dir, tiny_indices, tmp_path / "resumed")
    monkeypatch.undo()
    train(RUN, token_dir, tiny_indices, tmp_path / "resumed")

    resumed, whole = read_metrics(tmp_path / "resumed"), read_metrics(tiny_baseline_run)
    assert without_timing(resumed) == without_timing(whole)  # the same decimal strings
    sessions = read_record(tmp_path / "resumed").sessions
    assert [s["first_step"] for s in sessions] == [0, 5]
    assert {s["torch_threads"] for s in sessions} == {1}
    assert {(s["device"], s["torch_version"]) for s in sessions} == {("cpu", torch.__version__)}
    assert read_record(tiny_baseline_run).sessions[0]["torch_threads"] == 1
