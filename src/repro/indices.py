"""The fixed batch indices (SPEC 6): every model sees the same sequences at every step.

Drawn exactly as the authors' Generate_Indices notebook: torch's CPU generator seeded 42, train
starts of shape (rows, sequences per step); then a fresh generator seeded 42 for the eval-train
and eval-val starts, (eval_rows, eval_sequences) each. A start i gives inputs [i, i+T) and
targets [i+1, i+T+1). A JSON sidecar names the token files the starts were drawn for.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from repro.config import Preset
from repro.data import file_sha256, read_manifest, token_memmap

ARRAYS = ("train", "eval_train", "eval_val")
SIDECAR = "indices.json"


class IndicesError(ValueError):
    """Index files that cannot serve a run; the message names the files."""


def draw_indices(train_tokens: int, val_tokens: int, *, train_rows: int, sequences_per_step: int,
                 eval_rows: int, eval_sequences: int, block_size: int, seed: int = 42
                 ) -> dict[str, np.ndarray]:
    """The authors' draws. torch's CPU generator fills row by row, so drawing only the first
    `train_rows` of their 600,000 gives the same rows. Their second draw from the first generator
    (val starts for training, never used) is skipped: nothing drawn later depends on it."""
    generator = torch.Generator().manual_seed(seed)
    train = torch.randint(train_tokens - block_size, (train_rows, sequences_per_step),
                          generator=generator)
    # The eval arrays come from a fresh generator and must be drawn at their full shape: the
    # eval-val stream starts where the eval-train draw ends.
    generator = torch.Generator().manual_seed(seed)
    eval_train = torch.randint(train_tokens - block_size, (eval_rows, eval_sequences),
                               generator=generator)
    eval_val = torch.randint(val_tokens - block_size, (eval_rows, eval_sequences),
                             generator=generator)
    return {"train": train.numpy(), "eval_train": eval_train.numpy(), "eval_val": eval_val.numpy()}


def _token_files(manifest: dict) -> dict:
    return {split: {"tokens": manifest["splits"][split]["tokens"],
                    "sha256": manifest["splits"][split]["sha256"]} for split in ("train", "val")}


def write_indices(preset: Preset, data_dir: Path, out_dir: Path) -> dict:
    """Draw the indices a preset needs for the token files in data_dir; write .npy files + sidecar.

    Each file is written under a temporary name and renamed when complete.
    """
    manifest = read_manifest(data_dir)
    t = preset.train
    shape = {"block_size": preset.block_size, "train_rows": t.max_step + 1,
             "sequences_per_step": t.batch_size, "eval_rows": t.eval_rows,
             "eval_sequences": t.eval_sequences, "seed": t.index_seed}
    arrays = draw_indices(manifest["splits"]["train"]["tokens"], manifest["splits"]["val"]["tokens"],
                          **shape)
    out_dir.mkdir(parents=True, exist_ok=True)
    hashes = {}
    for name, array in arrays.items():
        path = out_dir / f"{name}.npy"
        partial = out_dir / f"{name}.npy.partial"
        with open(partial, "wb") as f:
            np.save(f, array)
        os.replace(partial, path)
        hashes[f"{name}.npy"] = file_sha256(path)
    sidecar = {**shape, "token_files": _token_files(manifest), "sha256": hashes}
    partial = out_dir / f"{SIDECAR}.partial"
    partial.write_text(json.dumps(sidecar, indent=2) + "\n")
    os.replace(partial, out_dir / SIDECAR)
    return sidecar


def read_sidecar(indices_dir: Path) -> dict:
    try:
        return json.loads((indices_dir / SIDECAR).read_text())
    except FileNotFoundError:
        raise IndicesError(f"{indices_dir / SIDECAR}: no such file "
                           f"(draw the indices with `repro indices`)") from None


def check_indices(sidecar: dict, indices_dir: Path, manifest: dict, data_dir: Path,
                  preset: Preset) -> None:
    """Refuse indices drawn for other token files, or too few / wrongly shaped for the preset."""
    ours = _token_files(manifest)
    for split, drawn_for in sidecar["token_files"].items():
        if drawn_for != ours[split]:
            raise IndicesError(
                f"{indices_dir / SIDECAR} was drawn for a {split}.bin of {drawn_for['tokens']} tokens "
                f"(sha256 {drawn_for['sha256'][:12]}), but {data_dir / (split + '.bin')} has "
                f"{ours[split]['tokens']} tokens (sha256 {ours[split]['sha256'][:12]}); "
                f"draw the indices again for these token files")
    t = preset.train
    needed = {"block_size": preset.block_size, "sequences_per_step": t.batch_size,
              "eval_sequences": t.eval_sequences, "seed": t.index_seed}
    for key, value in needed.items():
        if sidecar[key] != value:
            raise IndicesError(f"{indices_dir / SIDECAR}: {key} is {sidecar[key]}, "
                               f"preset {preset.name} needs {value}")
    if sidecar["train_rows"] < t.max_step + 1:
        raise IndicesError(f"{indices_dir / SIDECAR}: train_rows is {sidecar['train_rows']}, "
                           f"preset {preset.name} runs {t.max_step + 1} steps")
    if sidecar["eval_rows"] <= t.max_step // t.eval_interval:
        raise IndicesError(f"{indices_dir / SIDECAR}: eval_rows is {sidecar['eval_rows']}, "
                           f"preset {preset.name} evaluates {t.max_step // t.eval_interval + 1} times")


@dataclass
class Batches:
    """Gathers (inputs, targets) micro-batches from the token memmaps at the fixed indices."""
    starts: dict[str, np.ndarray]
    tokens: dict[str, np.memmap]
    block_size: int
    micro_batch: int  # of evaluation, as in the preset
    train_micro_batch: int  # of training, this machine's (Preset.train_micro_batch)

    @classmethod
    def open(cls, data_dir: Path, indices_dir: Path, preset: Preset) -> "Batches":
        manifest = read_manifest(data_dir)
        sidecar = read_sidecar(indices_dir)
        check_indices(sidecar, indices_dir, manifest, data_dir, preset)
        starts = {name: np.load(indices_dir / f"{name}.npy", mmap_mode="r") for name in ARRAYS}
        train, val = token_memmap(data_dir, "train"), token_memmap(data_dir, "val")
        return cls(starts, {"train": train, "eval_train": train, "eval_val": val},
                   preset.block_size, preset.train.micro_batch, preset.train_micro_batch)

    def window(self, stream: str, row: int, micro_step: int) -> torch.Tensor:
        """Micro-batch `micro_step` of row `row` of a stream, columns [k*mb, (k+1)*mb), as the
        (mb, block_size + 1) token windows that hold both inputs and targets."""
        mb = self.train_micro_batch if stream == "train" else self.micro_batch
        starts = np.asarray(self.starts[stream][row, micro_step * mb:(micro_step + 1) * mb])
        # One fancy-indexed read of every (sequence, position) pair: no Python loop per sequence.
        window = self.tokens[stream][starts[:, None] + np.arange(self.block_size + 1)]
        return torch.from_numpy(window.astype(np.int64))

    def get(self, stream: str, row: int, micro_step: int) -> tuple[torch.Tensor, torch.Tensor]:
        return inputs_targets(self.window(stream, row, micro_step))


def inputs_targets(window: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return window[:, :-1], window[:, 1:]
