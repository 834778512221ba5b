"""The audit's logs beside our runs: `repro compare` takes one as its reference, and Figure 1
draws those imported as an experiment or stated to be one."""

import json

import matplotlib
import pytest
from audit_helpers import curve, write_log

matplotlib.use("Agg")

from repro.analysis import plots
from repro.analysis.runs import read_run
from repro.annex.authors.audit import import_audit_log
from repro.cli.assembly import main
from repro.config import load_config, resolve_run


def tiny_log(path, run_dir, offset):
    """An audit log at the tiny preset's evaluation steps: the validation losses of the run in
    run_dir shifted by `offset`."""
    ours = read_run(run_dir).evals()
    rows = [
        (s, ours.at[s, "eval_train_loss"], ours.at[s, "eval_val_loss"] + offset) for s in ours.index
    ]
    return write_log(path, rows)


@pytest.mark.parametrize("offset,verdict", [(0.004, "on course"), (0.5, "off course")])
def test_repro_compare_takes_an_audit_log_as_reference(
    tiny_baseline_run, tmp_path, capsys, offset, verdict
):
    log = tiny_log(tmp_path / "gpt3large_reference.csv", tiny_baseline_run, offset)
    assert main(["compare", str(tiny_baseline_run), "--reference", str(log)]) == 0
    out = capsys.readouterr().out
    # A log holds losses alone: the verdict cannot claim the configurations are the same.
    unknown = (
        "across configurations (they differ in configuration unknown, mlp_hidden, weight_decay, "
        "lr_min)"
    )
    assert out.strip().splitlines()[-1].startswith(f"{unknown}: {verdict}")
    assert "(stopped)" in out.splitlines()[0]  # its name says no horizon


def test_repro_compare_is_off_course_where_the_audit_log_diverged(
    tiny_baseline_run, tmp_path, capsys
):
    log = tiny_log(tmp_path / "gpt3large_reference.csv", tiny_baseline_run, 0.004)
    rows = log.read_text().splitlines()
    log.write_text("\n".join(rows[:-1] + [rows[-1].split(",")[0] + ",nan,nan"]) + "\n")
    assert main(["compare", str(tiny_baseline_run), "--reference", str(log)]) == 0
    out = capsys.readouterr().out
    assert "(diverged)" in out.splitlines()[0]
    assert "off course: the reference diverged at step 12 (the log ends on a non-finite loss" in out


def test_repro_compare_names_what_differs_from_the_stated_configuration(
    tiny_baseline_run, tmp_path, capsys
):
    log = tiny_log(tmp_path / "gpt3large_reference.csv", tiny_baseline_run, 0.004)
    out = tmp_path / "imported"
    stated = {"query_mode": "residual_gelu", "qk_norm": False, "gate": "none", "peak_lr": 6e-4}
    stated |= {"schedule": "cosine", "steps": 12}
    preset = ["--preset", "tiny", "--stated", json.dumps(stated)]
    assert main(["import-audit-log", str(log), "--out", str(out), *preset]) == 0
    assert "(completed its 12-step horizon)" in capsys.readouterr().out
    assert main(["compare", str(tiny_baseline_run), "--reference", str(out)]) == 0
    printed = capsys.readouterr().out
    assert (
        "configurations differ (reference -> run): query_mode: residual_gelu -> linear" in printed
    )
    assert "configuration unknown" not in printed


def test_figure1_draws_an_audit_log_imported_as_an_experiment(tiny_runs, tmp_path):
    log = write_log(
        tmp_path / "gpt3large_plain.csv",
        [(0, 9.9, 10.0), (4, 7.9, 8.0), (8, 5.9, 7.0), (12, 4.9, 5.0)],
    )
    preset, experiments = load_config("tiny")
    audit = tmp_path / "audit" / "tiny"
    record = import_audit_log(log, audit / "baseline", preset, experiments, "baseline")
    assert record.identity["model"]["query_mode"] == "linear"  # the experiment's configuration
    assert json.loads((audit / "baseline" / "run.json").read_text())["data"]["audit_log"] == str(
        log
    )
    fig = plots.figure1(tiny_runs, "tiny", audit_runs_dir=audit)
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert "baseline (audit's run)" in labels
    assert "outside the audit's band" in labels  # at step 8, 1 nat above ours


def test_figure1_draws_the_logs_whose_stated_configuration_is_an_experiments(tiny_runs, tmp_path):
    """Logs imported at the figure's preset, each drawn beside the experiment its user stated it
    to be (the diverged one, with fewer rows, too); one nobody stated is counted, not drawn."""
    preset, experiments = load_config("tiny")
    resgelu = resolve_run(preset, experiments["resgelu-lr2.6e-3"]).identity()["optimizer"]
    stated = {
        "gpt3large_resgelu_s0p5_seed43.csv": {"query_mode": "residual_gelu", "peak_lr": 3e-3},
        "gpt3large_resgelu_seed44_diverged.csv": {
            "query_mode": "residual_gelu",
            "peak_lr": resgelu["lr_max"],
        },
        "gpt3small_d2z_lr4p8e3_60k.csv": {"query_mode": "linear", "schedule": "linear"},
        "gpt3large_unknown.csv": {},
    }
    logs = tmp_path / "logs"
    write_log(logs / "gpt3large_resgelu_s0p5_seed43.csv", curve(12, interval=4, start=10, end=4.9))
    write_log(logs / "gpt3large_resgelu_seed44_diverged.csv", curve(8, interval=4, spike_at=8))
    write_log(logs / "gpt3small_d2z_lr4p8e3_60k.csv", curve(12, interval=4, end=5.1))
    write_log(logs / "gpt3large_unknown.csv", curve(12, interval=4, end=5.2))
    imported = tmp_path / "audit" / "logs" / "tiny"
    for name, statement in stated.items():
        command = ["import-audit-log", str(logs / name), "--preset", "tiny", "--stated"]
        out = imported / (logs / name).stem
        assert main([*command, json.dumps(statement), "--out", str(out)]) == 0
    fig = plots.figure1(tiny_runs, "tiny", audit_logs_dir=imported)
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    said = "(audit's log, configuration stated by the user)"
    for log, experiment in (
        ("gpt3large_resgelu_s0p5_seed43", "resgelu-lr3e-3"),
        ("gpt3large_resgelu_seed44_diverged", "resgelu-lr2.6e-3"),
    ):
        drawn = lines[f"{log} as {experiment} {said}"]
        assert drawn.get_color() == lines[experiment].get_color()  # beside its experiment
    assert list(lines[f"gpt3large_resgelu_seed44_diverged as resgelu-lr2.6e-3 {said}"].get_xdata())
    assert not any("gpt3small_d2z" in label or "unknown" in label for label in lines)  # no match
    title = fig.axes[0].get_legend().get_title().get_text()
    assert "1 imported log not drawn: configuration unknown" in title


def test_a_log_stated_in_full_as_the_baseline_is_no_plain_verdict_nor_drawn_as_mlp475(
    tiny_runs, tiny_baseline_run, tmp_path, capsys
):
    """A statement cannot say the MLP's width, the weight decay or the final rate: a log stated
    in full to be the baseline fits the MLP-widened control as well."""
    log = tiny_log(tmp_path / "gpt3large_linear.csv", tiny_baseline_run, 0.004)
    out = tmp_path / "logs" / "tiny" / "gpt3large_linear"
    stated = {"query_mode": "linear", "qk_norm": False, "gate": "none", "peak_lr": 6e-4}
    stated |= {"schedule": "cosine", "steps": 12}
    command = ["import-audit-log", str(log), "--preset", "tiny", "--out", str(out)]
    assert main([*command, "--stated", json.dumps(stated)]) == 0
    assert main(["compare", str(tiny_baseline_run), "--reference", str(out)]) == 0
    verdict = capsys.readouterr().out.strip().splitlines()[-1]
    assert verdict.startswith("across configurations (they differ in mlp_hidden, weight_decay, ")
    fig = plots.figure1(tiny_runs, "tiny", audit_logs_dir=out.parent)
    assert not any("gpt3large_linear" in line.get_label() for line in fig.axes[0].get_lines())
    title = fig.axes[0].get_legend().get_title().get_text()
    assert "1 imported log not drawn: configuration unknown" in title
