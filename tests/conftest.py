import hashlib
import json

import numpy as np
import pytest

from repro.config import load_preset
from repro.indices import write_indices


def write_token_files(data_dir, train_tokens=30_000, val_tokens=6_000, seed=0):
    """Random token files with the manifest `repro prepare` writes (SPEC 5 layout)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    splits = {}
    for split, n in (("train", train_tokens), ("val", val_tokens)):
        tokens = rng.integers(0, 50257, n, dtype=np.uint16)
        (data_dir / f"{split}.bin").write_bytes(tokens.tobytes())
        splits[split] = {"file": f"{split}.bin", "documents": n // 100, "tokens": n,
                         "sha256": hashlib.sha256(tokens.tobytes()).hexdigest()}
    manifest = {"source": {"kind": "test"}, "tokenizer": {"name": "gpt2"}, "splits": splits}
    (data_dir / "manifest.json").write_text(json.dumps(manifest))
    return data_dir


@pytest.fixture(scope="session")
def token_dir(tmp_path_factory):
    return write_token_files(tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="session")
def tiny_indices(token_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("indices")
    write_indices(load_preset("tiny"), token_dir, out)
    return out
