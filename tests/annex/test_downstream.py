"""Downstream tasks through lm-evaluation-harness, offline: tasks of our own in lm-eval's YAML
format over small JSON files, run through the same code path as hellaswag (TaskManager with an
include path); the scores checked against a direct computation with the model."""

import contextlib
import io
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import one_line_error, write_our_checkpoint
from downstream_helpers import HUB_TASK
from model_helpers import small
from scipy import stats

from repro.cli.assembly import main
from repro.config import ModelConfig
from repro.model import GPT
from repro.runtime import network

# Not on a GPU node (no lm-eval there): `pytest -m gpu` still collects this module.
pytest.importorskip("lm_eval")

from repro.annex.downstream.compare import paired_bootstrap  # noqa: E402
from repro.annex.downstream.model import DownstreamError, ReproLM  # noqa: E402

CHOICE_TASK = """task: repro_choice
dataset_path: json
dataset_kwargs:
  data_files:
    validation: {data}
output_type: multiple_choice
validation_split: validation
doc_to_text: "{{{{query}}}}"
doc_to_target: "{{{{label}}}}"
doc_to_choice: "{{{{choices}}}}"
metric_list:
  - metric: acc
  - metric: acc_norm
"""
GENERATE_TASK = """task: repro_generate
dataset_path: json
dataset_kwargs:
  data_files:
    validation: {data}
output_type: generate_until
validation_split: validation
doc_to_text: "{{{{query}}}}"
doc_to_target: "{{{{label}}}}"
"""


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory):
    """A multiple-choice task of 8 items and a generative one, over a JSON-lines file."""
    folder = tmp_path_factory.mktemp("tasks")
    data = folder / "items.json"
    docs = [
        {"query": f"Count: {i}, then", "choices": [f" {i + 1}", f" {i + 7}", " blue"], "label": 0}
        for i in range(8)
    ]
    data.write_text("\n".join(json.dumps(d) for d in docs))
    (folder / "choice.yaml").write_text(CHOICE_TASK.format(data=data))
    (folder / "generate.yaml").write_text(GENERATE_TASK.format(data=data))
    return folder


@pytest.fixture(scope="module")
def scored(tasks_dir, tmp_path_factory):
    """`repro downstream` of four models (baseline and resgelu, each at two seeds: seed 1's in
    seed1/, as the workflow writes them) on the multiple-choice task, once for the tests that read
    it: each folder it wrote, and what it printed, by the folder's path below downstream/."""
    root = tmp_path_factory.mktemp("scored")
    scores = {}
    for init, name in enumerate(["baseline", "resgelu", "seed1/baseline", "seed1/resgelu"]):
        checkpoint = write_our_checkpoint(root / f"{init}.pt", small("linear", init).eval())
        out = root / "downstream" / name
        argv = ["downstream", "--checkpoint", str(checkpoint), "--task", "repro_choice"]
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            assert main([*argv, "--include-path", str(tasks_dir), "--out", str(out)]) == 0
        scores[name] = out, printed.getvalue()
    return scores


@pytest.mark.slow  # `repro downstream` end to end: lm-eval indexes its tasks, then scores
def test_repro_downstream_on_a_local_task(scored):
    out, printed = scored["baseline"]
    results = json.loads((out / "results.json").read_text())
    acc = results["results"]["repro_choice"]["acc,none"]
    assert f"repro_choice: acc {acc:.4f} ± " in printed and "(8 items)" in printed
    items = json.loads((out / "items.json").read_text())["repro_choice"]
    assert len(items["acc"]) == 8 and sum(items["acc"]) / 8 == pytest.approx(acc)


@pytest.mark.slow  # lm-eval's own command line, in a process of its own
@pytest.mark.parametrize("query_mode", ["linear", "residual_gelu"])
def test_lm_eval_s_hf_backend_on_an_export_scores_as_repro_downstream(
    query_mode, tasks_dir, tmp_path
):
    """`lm_eval --model hf` on the exported model (a plain GPT-2; the package's code, with
    trust_remote_code) gives each item the score `repro downstream` gives the checkpoint."""
    pytest.importorskip("transformers")  # the `hf` extra
    from repro.annex.models.hub import save_model

    model = small(query_mode).eval()
    checkpoint = write_our_checkpoint(tmp_path / "ckpt.pt", model)
    argv = ["downstream", "--checkpoint", str(checkpoint), "--task", "repro_choice"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main([*argv, "--include-path", str(tasks_dir), "--out", str(tmp_path / "ours")]) == 0
    save_model(model, tmp_path / "model")
    run = subprocess.run(
        [
            Path(sys.executable).with_name("lm_eval"),
            *("--model", "hf", "--tasks", "repro_choice", "--include_path", str(tasks_dir)),
            *("--model_args", f"pretrained={tmp_path / 'model'},trust_remote_code=True"),
            *("--device", "cpu", "--output_path", str(tmp_path / "theirs"), "--log_samples"),
        ],
        env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"},
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    theirs = json.loads(next((tmp_path / "theirs").rglob("results_*.json")).read_text())
    ours = json.loads((tmp_path / "ours" / "results.json").read_text())
    for metric in ("acc,none", "acc_norm,none"):
        assert theirs["results"]["repro_choice"][metric] == ours["results"]["repro_choice"][metric]
    samples = next((tmp_path / "theirs").rglob("samples_repro_choice_*.jsonl")).read_text()
    samples = sorted(map(json.loads, samples.splitlines()), key=lambda s: s["doc_id"])
    items = json.loads((tmp_path / "ours" / "items.json").read_text())["repro_choice"]
    assert [s["acc"] for s in samples] == items["acc"]


@pytest.mark.slow  # `repro downstream` end to end: lm-eval indexes its tasks, then scores
def test_generation_and_unknown_tasks_are_one_line_errors(tmp_path, tasks_dir, capsys):
    checkpoint = write_our_checkpoint(tmp_path / "ckpt.pt", small("linear").eval())
    for task, message in (("repro_generate", "generate_until"), ("no_such_task", "unknown")):
        argv = ["downstream", "--checkpoint", str(checkpoint), "--task", task]
        argv += ["--include-path", tasks_dir, "--out", tmp_path / "o"]
        one_line_error(capsys, argv, message, after_progress=True)
    with pytest.raises(DownstreamError, match="not supported"):
        ReproLM(model=small("linear").eval()).generate_until([])
    with pytest.raises(DownstreamError, match="vocabulary"):
        ReproLM(model=GPT(ModelConfig(n_layer=1, n_head=1, d_model=8, vocab_size=64)))


@pytest.mark.slow  # `repro downstream` end to end: lm-eval indexes its tasks, then scores
def test_an_export_carries_its_downstream_scores_in_the_hub_s_format(
    scored, tiny_baseline_run, tmp_path
):
    """`repro export --downstream`: the card states each task's score; .eval_results/ holds those
    scored on a Hub dataset in the Hub's format (a local task has no Hub dataset to name)."""
    pytest.importorskip("transformers")
    from huggingface_hub import parse_eval_result_entries

    folder, _ = scored["baseline"]
    results = json.loads((folder / "results.json").read_text())
    acc_norm = results["results"]["repro_choice"]["acc_norm,none"]
    local = tmp_path / "local"
    argv = ["export", str(tiny_baseline_run), "--out"]
    assert main([*argv, str(local), "--downstream", str(folder)]) == 0
    card = (local / "README.md").read_text()
    assert f"- repro_choice: acc_norm {acc_norm:.4f} ± " in card and "(a local task)" in card
    assert not (local / ".eval_results").exists()
    # the same scores, their task's data named as lm-eval names a Hub dataset
    hub_scored = tmp_path / "hub-scored"
    hub_scored.mkdir()
    results["configs"]["repro_choice"]["dataset_path"] = "Rowan/hellaswag"
    (hub_scored / "results.json").write_text(json.dumps(results))
    hub = tmp_path / "hub"
    assert main([*argv, str(hub), "--downstream", str(hub_scored)]) == 0
    written = yaml.safe_load((hub / ".eval_results" / "repro_choice.yaml").read_text())
    (entry,) = parse_eval_result_entries(written)
    assert (entry.dataset_id, entry.task_id, entry.value) == (
        "Rowan/hellaswag",
        "repro_choice",
        acc_norm,
    )
    assert "(Hub dataset `Rowan/hellaswag`)" in (hub / "README.md").read_text()


def test_export_refuses_a_downstream_folder_without_scores(tiny_baseline_run, tmp_path, capsys):
    pytest.importorskip("transformers")
    argv = ["export", str(tiny_baseline_run), "--out", str(tmp_path / "m")]
    one_line_error(capsys, [*argv, "--downstream", tmp_path], "no results.json")
    assert not (tmp_path / "m").exists()


# lm-eval's results.json, as `repro downstream --out` writes it, damaged: the field each names.
SCORES = {
    "results": {"hellaswag": {"acc_norm,none": 0.25, "acc_norm_stderr,none": 0.01}},
    "configs": {"hellaswag": {"dataset_path": "Rowan/hellaswag"}},
    "n-shot": {"hellaswag": 0},
}
DAMAGED_SCORES = [
    ([], "no results.json"),
    ("without results", "no results.json"),
    ({"results": []}, r": results: not a mapping"),
    ({"results": {"hellaswag": [0.25]}}, r": results\.hellaswag: not a mapping"),
    ({"results": {"hellaswag": "0.25"}}, r": results\.hellaswag: not a mapping"),
    ({"configs": ["hellaswag"]}, r": configs: not a mapping"),
    ({"configs": {"hellaswag": "Rowan/hellaswag"}}, r": configs\.'hellaswag': not a mapping"),
    ({"n-shot": {"hellaswag": "zero"}}, r": n-shot\.'hellaswag': 'zero', not a count"),
    ({"n-shot": {"hellaswag": True}}, r": n-shot\.'hellaswag': True, not a count"),
] + [
    ({"results": {name: {"acc_norm,none": 0.25}}}, r"not a task's name")
    for name in ("../../x", "/tmp/x", "../README", "a\x00b", ".hidden", "", "a/b")
]


@pytest.mark.parametrize("damage,message", DAMAGED_SCORES)
def test_export_refuses_damaged_downstream_scores_in_one_line_and_writes_nothing(
    damage, message, tiny_baseline_run, tmp_path, capsys
):
    """A results.json of the wrong shape, or a task name that would lead its .eval_results/ file
    out of the folder: one line naming the file and the field; no folder, nothing elsewhere."""
    pytest.importorskip("transformers")
    scores = tmp_path / "scores"
    scores.mkdir()
    if damage == "without results":
        data = {key: value for key, value in SCORES.items() if key != "results"}
    else:
        data = damage if isinstance(damage, list) else SCORES | damage
    (scores / "results.json").write_text(json.dumps(data))
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    argv = ["export", str(tiny_baseline_run), "--out", str(tmp_path / "m"), "--downstream", scores]
    one_line_error(capsys, argv, message)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


@pytest.mark.slow  # `repro downstream` end to end: lm-eval indexes its tasks, then scores
def test_downstream_table_pairs_each_experiment_with_the_baseline(scored, tmp_path):
    folders = [str(scored[name][0]) for name in ("baseline", "resgelu")]
    csv, earlier = tmp_path / "downstream.csv", tmp_path / "earlier.csv"
    earlier.write_text("a table kept elsewhere\n")
    csv.symlink_to(earlier)  # replaced, never written through
    assert main(["downstream-table", *folders, "--out", str(csv)]) == 0
    assert earlier.read_text() == "a table kept elsewhere\n" and not csv.is_symlink()
    table = pd.read_csv(csv).set_index(["experiment", "metric"])
    base, ours = table.loc[("baseline", "acc")], table.loc[("resgelu", "acc")]
    assert base["diff_vs_baseline"] == 0 and base["diff_ci_low"] == 0
    assert ours["diff_vs_baseline"] == pytest.approx(ours["value"] - base["value"])
    assert ours["diff_ci_low"] <= ours["diff_vs_baseline"] <= ours["diff_ci_high"]
    assert ours["n_items"] == 8 and ours["stderr"] > 0
    # one seed: its mean is its value, and there is no spread
    assert ours["n_seeds"] == 1 and ours["value_mean"] == ours["value"]
    assert pd.isna(ours["value_sd"]) and pd.isna(ours["diff_seeds_ci_low"])


def scores_of(scored, name: str) -> dict[str, float]:
    results = json.loads((scored[name][0] / "results.json").read_text())["results"]
    return {m: results["repro_choice"][f"{m},none"] for m in ("acc", "acc_norm")}


@pytest.mark.slow  # `repro downstream` end to end: lm-eval indexes its tasks, then scores
def test_downstream_table_over_seeds_pairs_seed_k_with_the_baseline_s_seed_k(
    scored, tmp_path, capsys
):
    csv = tmp_path / "downstream.csv"
    folders = [str(out) for out, _ in reversed(scored.values())]
    assert main(["downstream-table", *folders, "--out", str(csv)]) == 0
    assert "(2 experiments, 2 seeds)" in capsys.readouterr().out
    table = pd.read_csv(csv)
    assert list(table["experiment"]) == ["resgelu"] * 2 + ["baseline"] * 2  # as the folders
    table = table.set_index(["experiment", "metric"])
    assert len(table) == 4  # one row per experiment and metric, whatever the seeds
    for metric in ("acc", "acc_norm"):
        values = {name: scores_of(scored, name)[metric] for name in scored}
        ours, base = table.loc[("resgelu", metric)], table.loc[("baseline", metric)]
        assert ours["value"] == values["resgelu"]  # seed 0's, with its per-item interval
        assert (ours["n_seeds"], ours["n_pairs"]) == (2, 2)
        seeds = [values["resgelu"], values["seed1/resgelu"]]
        assert ours["value_mean"] == pytest.approx(np.mean(seeds))
        assert ours["value_sd"] == pytest.approx(np.std(seeds, ddof=1))
        diffs = np.array(seeds) - [values["baseline"], values["seed1/baseline"]]
        assert ours["diff_seeds_mean"] == pytest.approx(diffs.mean())
        half = stats.t.ppf(0.975, 1) * diffs.std(ddof=1) / np.sqrt(2)
        assert ours["diff_seeds_ci_low"] == pytest.approx(diffs.mean() - half)
        assert ours["diff_seeds_ci_high"] == pytest.approx(diffs.mean() + half)
        assert base["diff_seeds_mean"] == 0 and base["diff_seeds_sd"] == 0


@pytest.mark.slow  # `repro downstream` end to end: lm-eval indexes its tasks, then scores
def test_a_copied_or_linked_seed_folder_is_refused_not_counted(scored, tmp_path, capsys):
    """seed2/ made of seed 0's folders, copied or linked, or a seed folder linking to another
    experiment's: one line naming both folders, never a third seed."""
    import shutil

    base, ours = scored["baseline"][0], scored["resgelu"][0]
    folders = [str(scored[name][0]) for name in scored]
    copied = tmp_path / "copied" / "seed2"
    shutil.copytree(base, copied / "baseline")
    shutil.copytree(ours, copied / "resgelu")
    linked = tmp_path / "linked" / "seed2"
    linked.mkdir(parents=True)
    (linked / "baseline").symlink_to(base)
    (linked / "resgelu").symlink_to(ours)
    crossed = tmp_path / "crossed" / "seed2"
    shutil.copytree(base, crossed / "baseline")
    (crossed / "resgelu").symlink_to(crossed / "baseline")
    for made in (copied, linked, crossed):
        argv = ["downstream-table", *folders, str(made / "baseline"), str(made / "resgelu")]
        argv += ["--out", tmp_path / "d.csv"]
        one_line_error(capsys, argv, "one scoring counted twice")
    assert not (tmp_path / "d.csv").exists()


DAMAGED_RESULTS = {  # what results.json holds -> the field the one line names
    "[]": r"\(top level\): not a mapping",
    "{}": r"results: missing",
    '{"results": []}': r"results: not a mapping of task to metrics",
    '{"results": {"repro_choice": "acc"}}': r"results\.repro_choice: not a mapping",
    '{"results": {"../x": {}}}': r"results\.'\.\./x': not a task's name",
    '{"results": {"a\\u0000b": {}}}': r"results\.'a\\x00b': not a task's name",
    '{"results": {}, "n-samples": []}': r"n-samples: not a mapping",
    '{"results": {}, "n-samples": {"repro_choice": 8}}': r"n-samples\.'repro_choice'",
    '{"results": {}, "n-shot": {"repro_choice": "²"}}': r"n-shot\.'repro_choice': '²'",
}
DAMAGED_ITEMS = {
    "[]": r"\(top level\): not a mapping",
    '{"repro_choice": [1, 0]}': r"'repro_choice': not a mapping",
    '{"repro_choice": {"acc": "1"}}': r"'repro_choice'\.'acc': not a list of numbers",
    '{"repro_choice": {"acc": [1, "x"]}}': r"'repro_choice'\.'acc': not a list of numbers",
}


@pytest.mark.slow  # `repro downstream` end to end: lm-eval indexes its tasks, then scores
def test_a_damaged_scores_file_is_one_line_naming_the_file_and_the_field(scored, tmp_path, capsys):
    import shutil

    ours = str(scored["resgelu"][0])
    for name, damaged in (("results.json", DAMAGED_RESULTS), ("items.json", DAMAGED_ITEMS)):
        for k, (text, field) in enumerate(damaged.items()):
            folder = tmp_path / f"{name}-{k}" / "baseline"
            shutil.copytree(scored["baseline"][0], folder)
            (folder / name).write_text(text)
            argv = ["downstream-table", folder, ours, "--out", tmp_path / "d.csv"]
            one_line_error(capsys, argv, re.escape(str(folder / name)) + ": " + field)
    assert not (tmp_path / "d.csv").exists()


@pytest.mark.slow  # `repro downstream` end to end: lm-eval indexes its tasks, then scores
def test_a_seed_without_the_baseline_s_is_one_line_naming_the_folder(scored, tmp_path, capsys):
    ours = str(scored["seed1/resgelu"][0])
    folders = [str(scored[name][0]) for name in ("baseline", "resgelu")]
    argv = ["downstream-table", *folders, ours, "--out", tmp_path / "d.csv"]
    one_line_error(capsys, argv, re.escape(f"{ours}: no folder of the baseline baseline at seed 1"))
    twice = ["downstream-table", *folders, str(scored["baseline"][0]), "--out", tmp_path / "d.csv"]
    one_line_error(capsys, twice, "seed 0 of baseline is also")
    argv = ["downstream-table", folders[1], "--baseline", "nothing", "--out", tmp_path / "d.csv"]
    one_line_error(capsys, argv, "--baseline nothing: no result folder of that name")
    assert not (tmp_path / "d.csv").exists()


def test_paired_bootstrap():
    diff, low, high = paired_bootstrap([1, 1, 0, 1] * 25, [0, 1, 0, 1] * 25)
    assert diff == 0.25 and 0.1 < low < 0.25 < high < 0.4


def test_downstream_checks_its_options_and_files_before_any_task(tmp_path, capsys, monkeypatch):
    def no_tasks(*args, **kwargs):
        raise AssertionError("tasks loaded (their data perhaps from the hub) before the checks")

    monkeypatch.setattr("repro.annex.downstream.tasks.TaskManager", no_tasks)
    checkpoint = write_our_checkpoint(tmp_path / "ckpt.pt", small("linear").eval())
    a_file = tmp_path / "a_file"
    a_file.write_text("mine")
    argv = ["downstream", "--task", "hellaswag", "--checkpoint", str(checkpoint)]
    argv += ["--out", str(tmp_path / "out")]
    for wrong, message in (
        (["--limit", "0"], "--limit: 0 is not a positive number"),
        (["--limit", "-3"], "--limit: -3 is not a positive number"),
        (["--num-fewshot", "-1"], "--num-fewshot: -1 is negative"),
        (["--out", str(a_file)], "a_file: a file, not a folder"),
        (["--checkpoint", str(tmp_path / "none.pt")], "none.pt: no such file"),
        (["--include-path", str(tmp_path / "nowhere")], "nowhere: no such folder"),
        (["--include-path", str(a_file)], "a_file: no such folder"),
    ):
        one_line_error(capsys, [*argv, *wrong], re.escape(message))
    assert a_file.read_text() == "mine" and not (tmp_path / "out").exists()


@pytest.mark.slow  # lm-eval indexes its tasks, then loads them
def test_task_data_that_cannot_be_had_are_one_line_naming_the_task(tmp_path, tasks_dir, capsys):
    """Offline (conftest sets HF_HUB_OFFLINE=1, HF_DATASETS_OFFLINE=1) with a task's data not in
    the cache; a task of one's own whose data file is gone."""
    (tasks_dir / "hub.yaml").write_text(HUB_TASK)
    (tasks_dir / "items.json").unlink()  # the data of repro_choice
    checkpoint = write_our_checkpoint(tmp_path / "ckpt.pt", small("linear").eval())
    argv = ["downstream", "--checkpoint", str(checkpoint), "--include-path", str(tasks_dir)]
    errors = {}
    for task in ("repro_hub", "repro_choice"):
        assert main([*argv, "--task", task, "--out", str(tmp_path / "out")]) == 2
        errors[task] = capsys.readouterr().err.strip().splitlines()[-1]  # after progress bars
        assert errors[task].startswith(f"repro: error: task {task}: "), errors[task]
    hub = errors["repro_hub"]
    assert "neither in the datasets cache nor reachable on the Hugging Face hub" in hub
    assert "HF_DATASETS_OFFLINE=1" in hub and "--include-path" in hub
    assert "lm-eval cannot load it" in errors["repro_choice"]
    assert not (tmp_path / "out").exists()


def test_an_unreachable_hub_is_offline_at_once(monkeypatch):
    # Offline, the hub's clients retry each request for about a minute: one connection says so.
    for name in (*network.OFFLINE, *network.PROXIES):
        monkeypatch.delenv(name, raising=False)
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{listening.getsockname()[1]}")
        network.offline_unless_reachable()
        assert not any(os.environ.get(name) for name in network.OFFLINE)
    network.offline_unless_reachable()  # the port now closed: nothing listens
    assert all(os.environ.get(name) == "1" for name in network.OFFLINE)


@pytest.mark.parametrize("endpoint", ["http://localhost:99999", "http://[::1"])
def test_a_malformed_hub_address_is_one_line_naming_it(endpoint, tmp_path, capsys, monkeypatch):
    for name in (*network.OFFLINE, *network.PROXIES):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    checkpoint = write_our_checkpoint(tmp_path / "ckpt.pt", small("linear").eval())
    argv = ["downstream", "--checkpoint", checkpoint, "--task", "hellaswag"]
    one_line_error(
        capsys, [*argv, "--out", tmp_path / "out"], re.escape(f"HF_ENDPOINT {endpoint}: ")
    )
    assert not (tmp_path / "out").exists()


def test_a_hub_whose_name_does_not_resolve_in_time_is_offline_at_once(monkeypatch):
    # A resolver that does not answer (a network cut off) takes 20 s or more to give up.
    for name in (*network.OFFLINE, *network.PROXIES):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(network, "TIMEOUT_S", 0.2)
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: time.sleep(30))
    started = time.monotonic()
    network.offline_unless_reachable()
    assert time.monotonic() - started < 2
    assert all(os.environ.get(name) == "1" for name in network.OFFLINE)
