"""The authors' exact corpus (docs/specification.md §5): the hub's default branch first, its
commit and data files recorded, and a one-line note on whether the token counts are theirs."""

from dataclasses import replace
from types import SimpleNamespace

import pytest
from conftest import shortened

from repro.cli.assembly import main
from repro.config import load_run
from repro.data.tokens import AUTHORS_TOKENS, corpus_note
from repro.training.run import train

# Not on a GPU node: a run of the GPU tests (`pytest -m gpu`) still collects this module.
datasets = pytest.importorskip("datasets")

COMMIT = "0123456789abcdef" * 2 + "01234567"
FILES = [
    f"hf://datasets/Skylion007/openwebtext@{COMMIT}/plain_text/train-{i:05d}-of-00080.parquet"
    for i in range(80)
]
DOCS = [f"document number {i}: " + "words " * (i % 7) for i in range(40)]


@pytest.fixture
def fake_hub(monkeypatch):
    """datasets' hub loading replaced: every revision loads DOCS; data files resolve to FILES."""
    loaded = []

    def load_dataset(path, revision=None, **kwargs):
        loaded.append(revision)
        return datasets.Dataset.from_dict({"text": DOCS})

    builder = SimpleNamespace(config=SimpleNamespace(data_files={"train": FILES}))
    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    monkeypatch.setattr(datasets, "load_dataset_builder", lambda *args, **kwargs: builder)
    return loaded


def test_prepare_tries_the_default_branch_first_and_records_it(fake_hub, tmp_path, capsys):
    out = tmp_path / "owt"
    assert (
        main(
            [
                "prepare",
                "--hub-id",
                "Skylion007/openwebtext",
                "--out",
                str(out),
                "--expected-docs",
                str(len(DOCS)),
                "--test-size",
                "0.25",
                "--num-proc",
                "1",
                "--cache-dir",
                str(tmp_path / "hf"),
            ]
        )
        == 0
    )
    assert fake_hub == [None]  # the default branch, as the authors' datasets 3.6 loaded it
    manifest = __import__("json").loads((out / "manifest.json").read_text())
    assert manifest["source"]["revision"] is None
    assert manifest["source"]["commit"] == COMMIT
    assert manifest["source"]["data_files"] == FILES
    assert manifest["authors_token_counts"] is False
    note = [line for line in capsys.readouterr().out.splitlines() if "authors'" in line]
    assert len(note) == 1 and note[0].startswith("warning: token counts")
    assert "9,035,582,489 train" in note[0]


def test_the_authors_counts_are_recognised():
    manifest = {"splits": {split: {"tokens": n} for split, n in AUTHORS_TOKENS.items()}}
    assert corpus_note(manifest).startswith("token counts equal the authors'")
    manifest["splits"]["val"]["tokens"] = 4_434_897  # nanoGPT's older copy
    assert corpus_note(manifest).startswith("warning:")


def test_training_on_another_openwebtext_copy_warns(token_dir, tiny_indices, tmp_path, capsys):
    run = load_run("tiny", "baseline")
    record = train(
        replace(shortened(run, 0), corpus="openwebtext"), token_dir, tiny_indices, tmp_path / "run"
    )
    assert record.status == "completed"
    assert (
        "warning: token counts 30,000 train / 6,000 val are not the authors'"
        in capsys.readouterr().out
    )
