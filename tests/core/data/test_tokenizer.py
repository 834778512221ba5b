"""The offline GPT-2 encoding is tiktoken's; BPE files other than the pinned ones are refused.

docs/specification.md §5 names the files and their hashes."""

import shutil

import pytest

from repro.data.tokenizer import (
    GPT2_FILE_HASHES,
    TokenizerError,
    bundled_data_dir,
    gpt2_encoding,
    tokenizer_identity,
)


def test_known_encodings():
    enc = gpt2_encoding()
    assert enc.encode_ordinary("Hello world") == [15496, 995]
    assert enc.eot_token == 50256 and enc.n_vocab == 50257 and enc.max_token_value == 50256
    # encode_ordinary treats the special token's text as plain text
    assert 50256 not in enc.encode_ordinary("a<|endoftext|>b")


def test_round_trip():
    enc = gpt2_encoding()
    text = "Queries, keys and values: q = (x + f(x)) / 2.\n\tÜnïcödé — 日本語 🙂  end "
    assert enc.decode(enc.encode_ordinary(text)) == text


def test_identity_names_the_pinned_hashes():
    identity = tokenizer_identity()
    assert identity["name"] == "gpt2"
    assert identity["vocab_bpe_sha256"] == GPT2_FILE_HASHES["vocab.bpe"]
    assert identity["encoder_json_sha256"] == GPT2_FILE_HASHES["encoder.json"]


def test_tampered_copy_is_refused(tmp_path):
    for name in GPT2_FILE_HASHES:
        shutil.copy(bundled_data_dir() / name, tmp_path / name)
    with open(tmp_path / "vocab.bpe", "a") as f:
        f.write("Ġx y\n")
    with pytest.raises(TokenizerError) as e:
        gpt2_encoding(tmp_path)
    message = str(e.value)
    assert "vocab.bpe" in message and GPT2_FILE_HASHES["vocab.bpe"] in message
    assert "\n" not in message


def test_missing_file_is_refused(tmp_path):
    with pytest.raises(TokenizerError, match="vocab.bpe: no such file"):
        gpt2_encoding(tmp_path)
