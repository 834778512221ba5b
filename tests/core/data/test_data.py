"""Corpus preparation: nanoGPT's split and token files, its checks, and the smoke corpus.

The procedure is docs/specification.md §5."""

import hashlib
import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from repro.cli import assembly as cli
from repro.cli import data as cli_data
from repro.data import corpus as corpus_module
from repro.data import openwebtext
from repro.data.corpus import Source
from repro.data.tokenizer import gpt2_encoding
from repro.data.tokens import DataError, fingerprint, read_manifest, token_memmap
from repro.errors import ReproError

# Not on a GPU node: a run of the GPU tests (`pytest -m gpu`) still collects this module.
datasets = pytest.importorskip("datasets")
prepare_module = pytest.importorskip("repro.data.prepare")  # the preparation side: datasets
prepare = prepare_module.prepare

TEST_SIZE = 0.1  # §5's 0.0005 would leave a 600-document corpus with no val document
N_DOCS = 600


def _documents(n):
    rng = np.random.default_rng(0)
    words = [
        "attention",
        "query",
        "key",
        "value",
        "nonlinear",
        "the",
        "of",
        "GELU",
        "résumé",
        "日本",
        "🙂",
        "<|endoftext|>",
        "\n",
        "  ",
        "3.14",
        "don't",
        "x+f(x)",
    ]
    return [" ".join(rng.choice(words, size=rng.integers(0, 120))) for _ in range(n)]


def write_corpus(folder):
    """A three-shard Parquet corpus, as the hub's Parquet conversion or a user's files look."""
    docs = _documents(N_DOCS)
    shards = folder / "corpus"
    shards.mkdir()
    for i, chunk in enumerate(np.array_split(np.arange(N_DOCS), 3)):
        pq.write_table(
            pa.table({"text": [docs[j] for j in chunk], "id": chunk}),
            shards / f"train-{i:05d}.parquet",
        )
    return Source("files", data_files=(str(shards / "*.parquet"),), cache_dir=str(folder / "hf"))


@pytest.fixture
def corpus(tmp_path):
    return write_corpus(tmp_path)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """The corpus prepared once for the tests that read or break its token files (a copy each)."""
    folder = tmp_path_factory.mktemp("prepared")
    prepare(write_corpus(folder), folder / "out", expected_docs=N_DOCS, test_size=TEST_SIZE)
    return folder / "out"


@pytest.fixture
def prepared_copy(prepared, tmp_path):
    return shutil.copytree(prepared, tmp_path / "out")


def _reference_splits(source):
    """datasets' own split of the same files (§5), and per-document tiktoken encodings."""
    dataset = datasets.load_dataset(
        "parquet", data_files=list(source.data_files), split="train", cache_dir=source.cache_dir
    )
    parts = dataset.train_test_split(test_size=TEST_SIZE, seed=2357, shuffle=True)
    enc = gpt2_encoding()
    return {
        name: (
            part["id"],
            np.array(
                [t for text in part["text"] for t in enc.encode_ordinary(text) + [50256]], np.uint16
            ),
        )
        for name, part in (("train", parts["train"]), ("val", parts["test"]))
    }


def test_prepare_matches_datasets_split_and_per_document_encoding(corpus, tmp_path):
    out = tmp_path / "out"
    manifest = prepare(corpus, out, expected_docs=N_DOCS, test_size=TEST_SIZE, num_proc=2)
    for name, (ids, tokens) in _reference_splits(corpus).items():
        entry = manifest["splits"][name]
        assert entry["documents"] == len(ids) and entry["tokens"] == len(tokens)
        assert np.array_equal(token_memmap(out, read_manifest(out), name), tokens)
        assert entry["sha256"] == hashlib.sha256(tokens.tobytes()).hexdigest()
        assert entry["fingerprint"] == fingerprint(out / f"{name}.bin")
    assert manifest["splits"]["val"]["documents"] == N_DOCS // 10
    assert read_manifest(out) == json.loads((out / "manifest.json").read_text())
    assert manifest["tokenizer"]["vocab_bpe_sha256"].startswith("1ce16647")
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "train.bin", "val.bin"]


def test_token_memmap_is_read_only(prepared):
    tokens = token_memmap(prepared, read_manifest(prepared), "val")
    assert tokens.dtype == np.uint16
    with pytest.raises(ValueError):
        tokens[0] = 1
    with pytest.raises(DataError, match="no split 'test'"):
        token_memmap(prepared, read_manifest(prepared), "test")


def test_wrong_document_count_is_refused(corpus, tmp_path):
    with pytest.raises(DataError, match="600 documents, expected 8,013,769"):
        prepare(corpus, tmp_path / "out", test_size=TEST_SIZE)  # OpenWebText's count by default
    assert not (tmp_path / "out").exists()


def test_too_little_disk_is_refused_before_loading(corpus, tmp_path, monkeypatch):
    monkeypatch.setattr(corpus_module, "free_bytes", lambda path: 1000)
    monkeypatch.setattr(datasets, "load_dataset", pytest.fail)  # nothing may be read or written
    with pytest.raises(DataError, match=r"0\.00 GB free, preparing needs about"):
        prepare(corpus, tmp_path / "out", expected_docs=N_DOCS, test_size=TEST_SIZE)


def _failing_on_second_piece(encoded_split):
    """encoded_split whose second piece of tokens, over all splits, is an interruption."""
    pieces = []

    def pieces_then_fail(*args):
        for ids in encoded_split(*args):
            pieces.append(ids)
            if len(pieces) == 2:
                raise RuntimeError("interrupted")
            yield ids

    return pieces_then_fail


def test_interrupted_write_leaves_no_finished_looking_file(corpus, tmp_path, monkeypatch):
    out = tmp_path / "out"
    with monkeypatch.context() as m:
        m.setattr(
            prepare_module, "encoded_split", _failing_on_second_piece(prepare_module.encoded_split)
        )
        with pytest.raises(RuntimeError, match="interrupted"):
            prepare(corpus, out, expected_docs=N_DOCS, test_size=TEST_SIZE)
    assert list(out.iterdir()) == []


def test_interrupted_write_keeps_the_finished_files(corpus, prepared_copy, monkeypatch):
    out = prepared_copy
    finished = {p.name: p.read_bytes() for p in out.iterdir()}
    monkeypatch.setattr(
        prepare_module, "encoded_split", _failing_on_second_piece(prepare_module.encoded_split)
    )
    with pytest.raises(RuntimeError, match="interrupted"):
        prepare(corpus, out, expected_docs=N_DOCS, test_size=TEST_SIZE)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == finished
    read_manifest(out)


def test_truncated_file_is_refused(prepared_copy):
    out = prepared_copy
    size = 2 * read_manifest(out)["splits"]["train"]["tokens"]
    with open(out / "train.bin", "r+b") as f:
        f.truncate(size - 2)
    with pytest.raises(DataError) as e:
        read_manifest(out)
    assert str(e.value).startswith(f"{out / 'train.bin'}: {size - 2:,} bytes, expected {size:,}")
    read_manifest(out, verify=False)  # the manifest itself is fine


def test_changed_file_is_refused(prepared_copy):
    out = prepared_copy
    tokens = np.fromfile(out / "val.bin", dtype=np.uint16)
    tokens[0] ^= 1
    tokens.tofile(out / "val.bin")
    with pytest.raises(DataError, match=r"val\.bin: fingerprint differs from manifest\.json"):
        read_manifest(out)
    with pytest.raises(DataError, match=r"val\.bin: SHA-256 differs from manifest\.json"):
        read_manifest(out, full=True)


def test_bad_data_files_are_named(tmp_path):
    (tmp_path / "notes.csv").write_text("text\nhello\n")
    with pytest.raises(DataError, match=r"notes\.csv: unsupported file type '\.csv'"):
        prepare(Source("files", data_files=(str(tmp_path / "*.csv"),)), tmp_path / "out")
    with pytest.raises(DataError, match=r"missing\*\.parquet: no such file"):
        prepare(Source("files", data_files=(str(tmp_path / "missing*.parquet"),)), tmp_path / "out")
    pq.write_table(pa.table({"body": ["a"]}), tmp_path / "a.parquet")
    with pytest.raises(DataError, match=r"a\.parquet: no 'text' column \(columns: body\)"):
        prepare(
            Source(
                "files", data_files=(str(tmp_path / "a.parquet"),), cache_dir=str(tmp_path / "hf")
            ),
            tmp_path / "out",
        )


def test_hub_copy_with_too_few_documents_points_to_data_files(tmp_path, monkeypatch):
    """Neither the script revision nor the Parquet conversion (here: a partial copy) is used."""
    loaded = []

    def fake_load_dataset(path, revision=None, **kwargs):
        loaded.append(revision)
        if revision == openwebtext.PARQUET_REVISION:
            return datasets.Dataset.from_dict({"text": ["a", "b"]})
        raise RuntimeError("Dataset scripts are no longer supported")

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    with pytest.raises(DataError) as e:
        source = Source(
            "hub", hub_id=openwebtext.OWT_HUB_ID, revision="main", cache_dir=str(tmp_path)
        )
        prepare(source, tmp_path / "out")
    assert loaded == ["main", "refs/convert/parquet"]  # the revision asked for first
    message = str(e.value)
    assert "2 documents, expected 8,013,769" in message and "--data-files" in message
    assert "scripts are no longer supported" in message


def prepare_files(corpus, out, expected_docs: int) -> list[str]:
    """`repro prepare` of the test corpus's local files, as a user types it."""
    return [
        "prepare",
        "--data-files",
        *corpus.data_files,
        "--cache-dir",
        corpus.cache_dir,
        "--out",
        str(out),
        "--expected-docs",
        str(expected_docs),
        "--test-size",
        "0.1",
    ]


def test_cli_prints_data_errors_on_one_line(corpus, tmp_path, capsys):
    assert cli.main(prepare_files(corpus, tmp_path / "out", 7)) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"repro: error: {corpus.data_files[0]}: 600 documents, expected 7 "
        "(pass --expected-docs 600 if this is the corpus you mean)"
    )


def test_cli_prepares_local_files(corpus, tmp_path, capsys):
    cli.main(prepare_files(corpus, tmp_path / "out", 600) + ["--num-proc", "2"])
    assert "val.bin: 60 documents" in capsys.readouterr().out
    assert read_manifest(tmp_path / "out")["source"]["kind"] == "files"


def test_cli_names_a_corpus_and_where_it_comes_from(corpus, tmp_path, capsys):
    # --corpus openwebtext with --data-files: the workflow's prepare rule with local copies
    cli.main(
        ["prepare", "--corpus", "openwebtext"] + prepare_files(corpus, tmp_path / "o", 600)[1:]
    )
    assert read_manifest(tmp_path / "o")["source"]["kind"] == "files"


def test_a_corpus_name_maps_to_its_source():
    def resolved(*flags):
        args = cli.build_parser().parse_args(["prepare", "--out", "x", *flags])
        cli_data.resolve_corpus(args)
        return args.python_docs, args.hub_id, args.data_files

    assert resolved("--corpus", "openwebtext") == (False, openwebtext.OWT_HUB_ID, None)
    assert resolved("--corpus", "openwebtext", "--hub-id", "me/owt") == (False, "me/owt", None)
    assert resolved("--corpus", "python-docs") == (True, None, None)
    for flags, named in [
        (["--corpus", "python-docs", "--hub-id", "me/owt"], "--hub-id"),
        (["--corpus", "python-docs", "--python-docs"], "--python-docs"),
        ([], "--corpus"),
    ]:
        with pytest.raises(ReproError, match=named):
            resolved(*flags)


def test_an_unknown_corpus_is_refused(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["prepare", "--corpus", "nope", "--out", "x"])
    assert stop.value.code == 2 and "'openwebtext', 'python-docs'" in capsys.readouterr().err


@pytest.mark.slow  # the whole smoke corpus, twice (about 15 s on 2 cores)
def test_python_docs_is_deterministic_and_large_enough_for_the_smoke_preset(tmp_path):
    first = prepare_module.prepare_python_docs(tmp_path / "docs1")
    second = prepare_module.prepare_python_docs(tmp_path / "docs2")
    assert first["splits"] == second["splits"]
    assert first["source"]["kind"] == "python-docs"
    assert first["splits"]["train"]["tokens"] >= 1_000_000
    assert first["splits"]["val"]["tokens"] >= 50_000
