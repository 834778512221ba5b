"""The progress line training prints and appends to train.log every log interval."""

from repro.rundir.metrics import Progress, duration, progress_line


def rows(steps, eval_at=()):
    return [
        {
            "step": s,
            "train_loss": 4.0 + s % 2,
            "tokens_per_s": 12345.6,
            "eval_train_loss": 4.25 if s in eval_at else None,
            "eval_val_loss": 4.5 if s in eval_at else None,
        }
        for s in steps
    ]


def test_duration():
    assert duration(59.6) == "0:01:00"
    assert duration(2 * 86400 + 3 * 3600 + 4 * 60 + 5) == "2d 03:04:05"
    assert duration(float("inf")) == "?"


def test_line_has_step_loss_speed_elapsed_eta_and_evaluations():
    # resumed at 90, 10 steps in 60 s: 6 s a step, 100 steps left
    line = progress_line(
        rows(range(90, 100), eval_at=(90,)), max_step=199, elapsed=60.0, steps_done=10
    )
    assert line == (
        "step 99/199 | train loss 4.5000 | 12,346 tokens/s | elapsed 0:01:00 | "
        "ETA 0:10:00 | eval at step 90: train 4.2500, val 4.5000"
    )


def test_log_is_appended(tmp_path, capsys):
    Progress(tmp_path, 0, 9).report(rows(range(5)))
    Progress(tmp_path, 5, 9).report(rows(range(5, 10)))
    lines = (tmp_path / "train.log").read_text().splitlines()
    assert [line.split(" ", 2)[2].split(" |")[0] for line in lines] == [
        "starting at step 0/9",
        "step 4/9",
        "resuming at step 5/9",
        "step 9/9",
    ]
    assert capsys.readouterr().out.count("\n") == 4
