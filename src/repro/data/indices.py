"""The fixed batch indices: every model sees the same sequences at every step.

Drawn exactly as the authors' Generate_Indices notebook (docs/specification.md §6); a JSON sidecar
names the token files they were drawn for and the index files' hashes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from repro.config import Preset
from repro.data.batches import SIDECAR, IndicesError
from repro.data.tokens import check_token_values, read_manifest, token_files
from repro.files import atomic_write, file_sha256, make_dir, write_json
from repro.runtime.device import check_memory


def draw_indices(
    train_tokens: int,
    val_tokens: int,
    *,
    train_rows: int,
    sequences_per_step: int,
    eval_rows: int,
    eval_sequences: int,
    block_size: int,
    seed: int = 42,
) -> dict[str, np.ndarray]:
    """The authors' draws. torch's CPU generator fills row by row, so drawing only the first
    `train_rows` of their 600,000 gives the same rows. Their second draw from the first generator
    (val starts for training, never used) is skipped: nothing drawn later depends on it."""
    generator = torch.Generator().manual_seed(seed)
    train = torch.randint(
        train_tokens - block_size, (train_rows, sequences_per_step), generator=generator
    )
    # The eval arrays come from a fresh generator and must be drawn at their full shape: the
    # eval-val stream starts where the eval-train draw ends.
    generator = torch.Generator().manual_seed(seed)
    eval_train = torch.randint(
        train_tokens - block_size, (eval_rows, eval_sequences), generator=generator
    )
    eval_val = torch.randint(
        val_tokens - block_size, (eval_rows, eval_sequences), generator=generator
    )
    return {"train": train.numpy(), "eval_train": eval_train.numpy(), "eval_val": eval_val.numpy()}


def write_indices(
    preset: Preset, data_dir: Path, out_dir: Path, train_rows: int | None = None
) -> dict:
    """Draw the indices a preset needs for the token files in data_dir; write .npy files + sidecar.
    train_rows: the optimiser steps they serve; the first rows are the same whatever their number.
    """
    manifest = read_manifest(data_dir)
    t = preset.train
    if train_rows is not None and train_rows < 1:
        raise IndicesError(f"train rows {train_rows}: at least 1")
    shape = {
        "block_size": preset.model.block_size,
        "train_rows": train_rows or t.max_step + 1,
        "sequences_per_step": t.batch_size,
        "eval_rows": t.eval_rows,
        "eval_sequences": t.eval_sequences,
        "seed": t.index_seed,
    }
    splits = manifest["splits"]
    for split in ("train", "val"):
        if splits[split]["tokens"] <= preset.model.block_size:
            raise IndicesError(
                f"{data_dir / splits[split]['file']}: {splits[split]['tokens']} "
                f"tokens, shorter than a sequence of preset {preset.name} "
                f"({preset.model.block_size} + 1 tokens)"
            )
    starts = (t.max_step + 1) * t.batch_size + 2 * t.eval_rows * t.eval_sequences
    check_memory(f"the indices of preset {preset.name}", 8 * starts)  # int64 starts
    check_token_values(data_dir, manifest, preset.model.vocab_size)
    arrays = draw_indices(splits["train"]["tokens"], splits["val"]["tokens"], **shape)
    make_dir(out_dir)
    hashes = {}
    for name, array in arrays.items():
        with atomic_write(out_dir / f"{name}.npy", "wb") as f:
            np.save(f, array)
        hashes[f"{name}.npy"] = file_sha256(out_dir / f"{name}.npy")
    sidecar = {**shape, "token_files": token_files(manifest), "sha256": hashes}
    write_json(out_dir / SIDECAR, sidecar)
    return sidecar
