"""Token-file checks at start-up: size and sampled blocks; the full SHA-256 in `repro verify`."""

import json
import os

import numpy as np
import pytest
from conftest import random_token_files

from repro.cli.assembly import main
from repro.data import tokens as tokens_module
from repro.data.tokens import FINGERPRINT_BLOCK, DataError, fingerprint, read_manifest, verify
from repro.files import write_json

BIG = 3 * 2**20  # tokens: a 6 MiB train.bin, larger than the 64 sampled blocks of 64 KiB


@pytest.fixture
def big_data(tmp_path):
    """Token files whose manifest has fingerprints, as the package writes them."""
    return random_token_files(tmp_path / "data", train_tokens=BIG)


def without_fingerprints(data):
    """The token files `data`, their manifest as an earlier `repro prepare` wrote it."""
    manifest = json.loads((data / "manifest.json").read_text())
    for entry in manifest["splits"].values():
        del entry["fingerprint"]
    write_json(data / "manifest.json", manifest)
    return data


def flip_byte(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ 1]))


def test_start_reads_sampled_blocks_not_the_whole_file(big_data, monkeypatch):
    def no_full_hash(path):
        raise AssertionError(f"full SHA-256 of {path} at start-up")

    monkeypatch.setattr(tokens_module, "file_sha256", no_full_hash)
    read_manifest(big_data)


@pytest.mark.parametrize("where", ["first block", "last block", "middle block"])
def test_a_changed_sampled_block_is_refused_at_start(big_data, where):
    size = 2 * BIG
    offset = {
        "first block": 10,
        "last block": size - 1,
        "middle block": 32 * (size - FINGERPRINT_BLOCK) // 63 + 5,
    }[where]
    flip_byte(big_data / "train.bin", offset)
    with pytest.raises(DataError, match=r"train\.bin: fingerprint differs from manifest\.json"):
        read_manifest(big_data)


def test_verify_finds_a_change_between_sampled_blocks(big_data):
    flip_byte(big_data / "train.bin", FINGERPRINT_BLOCK + 7)  # between blocks 0 and 1
    read_manifest(big_data)  # the fast check does not see it, by design
    with pytest.raises(DataError, match=r"train\.bin: SHA-256 differs from manifest\.json"):
        verify(big_data)
    assert main(["verify", "--data", str(big_data)]) == 2


def test_a_manifest_without_fingerprints_is_hashed_in_full(tmp_path):
    data = without_fingerprints(random_token_files(tmp_path / "data"))
    tokens = np.fromfile(data / "val.bin", dtype=np.uint16)
    tokens[-1] ^= 1
    tokens.tofile(data / "val.bin")
    with pytest.raises(DataError, match=r"val\.bin: SHA-256 differs from manifest\.json"):
        read_manifest(data)


def test_verify_adds_fingerprints_and_keeps_the_manifest_time(tmp_path, capsys):
    data = without_fingerprints(random_token_files(tmp_path / "data"))
    path = data / "manifest.json"
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    assert main(["verify", "--data", str(data)]) == 0
    assert "train.bin: 30,000 tokens, SHA-256" in capsys.readouterr().out
    splits = json.loads(path.read_text())["splits"]
    assert splits["train"]["fingerprint"] == fingerprint(data / "train.bin")
    assert path.stat().st_mtime_ns == 1_000_000_000  # Snakemake sees no new token files
