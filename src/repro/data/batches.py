"""What the training loop reads: (inputs, targets) micro-batches at the fixed indices."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from repro.config import Preset, RunConfig, TrainSettings
from repro.data import DataError
from repro.data.tokens import read_manifest, token_byte_lengths, token_files, token_memmap
from repro.errors import ReproError
from repro.files import file_sha256, read_json

ARRAYS = ("train", "eval_train", "eval_val")
SIDECAR = "indices.json"


class IndicesError(ReproError):
    """Index files that cannot serve a run; the message names the files."""


SIDECAR_FIELDS = (
    "block_size",
    "train_rows",
    "sequences_per_step",
    "eval_rows",
    "eval_sequences",
    "seed",
    "token_files",
    "sha256",
)


def read_sidecar(indices_dir: Path) -> dict:
    path = Path(indices_dir) / SIDECAR
    sidecar = read_json(path, IndicesError, "draw the indices with `repro indices`")
    missing = [f for f in SIDECAR_FIELDS if not isinstance(sidecar, dict) or f not in sidecar]
    if missing:
        raise IndicesError(f"{path}: missing field(s) {', '.join(missing)}; draw the indices again")
    return sidecar


def check_indices(
    sidecar: dict,
    indices_dir: Path,
    manifest: dict,
    data_dir: Path,
    reader: str,
    block_size: int,
    train: TrainSettings,
) -> None:
    """Refuse indices drawn for other token files, or too few / wrongly shaped for the reader's
    sequences and schedule (`reader`: who reads them, for the message, e.g. "preset paper")."""
    ours = token_files(manifest)
    for split, drawn_for in sidecar["token_files"].items():
        if drawn_for != ours[split]:
            raise IndicesError(
                f"{indices_dir / SIDECAR} was drawn for a {split}.bin of "
                f"{drawn_for['tokens']} tokens "
                f"(sha256 {drawn_for['sha256'][:12]}), but {data_dir / (split + '.bin')} has "
                f"{ours[split]['tokens']} tokens (sha256 {ours[split]['sha256'][:12]}); "
                f"draw the indices again for these token files"
            )
    t = train
    needed = {
        "block_size": block_size,
        "sequences_per_step": t.batch_size,
        "eval_sequences": t.eval_sequences,
        "seed": t.index_seed,
    }
    for key, value in needed.items():
        if sidecar[key] != value:
            raise IndicesError(
                f"{indices_dir / SIDECAR}: {key} is {sidecar[key]}, {reader} needs {value}"
            )
    if sidecar["train_rows"] < t.max_step + 1:
        raise IndicesError(
            f"{indices_dir / SIDECAR}: train_rows is {sidecar['train_rows']}, "
            f"{reader} runs {t.max_step + 1} steps"
        )
    if sidecar["eval_rows"] < t.evaluations:
        raise IndicesError(
            f"{indices_dir / SIDECAR}: eval_rows is {sidecar['eval_rows']}, "
            f"{reader} evaluates {t.evaluations} times"
        )


def read_starts(indices_dir: Path, name: str, sidecar: dict, tokens: int) -> np.ndarray:
    """One index file, memory-mapped, after checking it is the file the sidecar records (SHA-256)
    and that its starts fit it and the token file: shape, int64, every window inside the tokens."""
    path = indices_dir / f"{name}.npy"
    if not path.exists():
        raise IndicesError(f"{path}: no such file (listed in {SIDECAR}); draw the indices again")
    if file_sha256(path) != sidecar["sha256"].get(path.name):
        raise IndicesError(
            f"{path}: SHA-256 differs from the one {SIDECAR} records: not the file "
            f"drawn with it; draw the indices again with `repro indices`"
        )
    try:
        starts = np.load(path, mmap_mode="r")
    except (ValueError, OSError, EOFError) as e:
        raise IndicesError(f"{path}: not a NumPy array file ({e})") from None
    rows = sidecar["train_rows"] if name == "train" else sidecar["eval_rows"]
    columns = sidecar["sequences_per_step"] if name == "train" else sidecar["eval_sequences"]
    if starts.dtype != np.int64 or starts.shape != (rows, columns):
        raise IndicesError(
            f"{path}: {starts.dtype} array of shape {starts.shape}, {SIDECAR} "
            f"says int64 of shape {(rows, columns)}"
        )
    last = tokens - sidecar["block_size"] - 1  # the last start whose window fits the tokens
    if starts.size and (starts.min() < 0 or starts.max() > last):
        raise IndicesError(
            f"{path}: starts from {starts.min()} to {starts.max()}, outside "
            f"0..{last} for {tokens} tokens"
        )
    return starts


@dataclass
class Batches:
    """Gathers (inputs, targets) micro-batches from the token memmaps at the fixed indices."""

    starts: dict[str, np.ndarray]
    tokens: dict[str, np.memmap]
    block_size: int
    eval_micro_batch: int  # train.eval_micro_batch
    train_micro_batch: int  # this machine's (resolved by training.loop.with_train_micro_batch)
    manifest: dict = field(default_factory=dict)  # the token files' and the indices' metadata,
    sidecar: dict = field(default_factory=dict)  # for run.json

    @classmethod
    def open(cls, data_dir: Path, indices_dir: Path, run: RunConfig | Preset) -> "Batches":
        """Read the manifest and the sidecar once and check them against each other and `run` (a
        preset when evaluating: the training stream is read in the evaluation's micro-batch)."""
        if isinstance(run, RunConfig):
            reader = f"experiment {run.experiment.name} at preset {run.preset_name}"
            micro_batch = run.runtime.train_micro_batch
        else:
            reader, micro_batch = f"preset {run.name}", run.train.eval_micro_batch
        data_dir, indices_dir = Path(data_dir), Path(indices_dir)
        manifest = read_manifest(data_dir)
        sidecar = read_sidecar(indices_dir)
        block_size, train = run.model.block_size, run.train
        check_indices(sidecar, indices_dir, manifest, data_dir, reader, block_size, train)
        train_tokens, val_tokens = (token_memmap(data_dir, manifest, s) for s in ("train", "val"))
        streams = {"train": train_tokens, "eval_train": train_tokens, "eval_val": val_tokens}
        starts = {n: read_starts(indices_dir, n, sidecar, len(streams[n])) for n in ARRAYS}
        return cls(
            starts, streams, block_size, train.eval_micro_batch, micro_batch, manifest, sidecar
        )

    @property
    def accumulation(self) -> int:
        """Training micro-batches per optimiser step: the slices `window` takes of a train row."""
        return self.starts["train"].shape[1] // self.train_micro_batch

    def window(self, stream: str, row: int, micro_step: int) -> torch.Tensor:
        """Micro-batch `micro_step` of row `row` of a stream, columns [k*mb, (k+1)*mb), as the
        (mb, block_size + 1) token windows that hold both inputs and targets."""
        mb = self.train_micro_batch if stream == "train" else self.eval_micro_batch
        starts = np.asarray(self.starts[stream][row, micro_step * mb : (micro_step + 1) * mb])
        # One fancy-indexed read of every (sequence, position) pair: no Python loop per sequence.
        window = self.tokens[stream][starts[:, None] + np.arange(self.block_size + 1)]
        return torch.from_numpy(window.astype(np.int64))

    def get(self, stream: str, row: int, micro_step: int) -> tuple[torch.Tensor, torch.Tensor]:
        return inputs_targets(self.window(stream, row, micro_step))

    def bytes_per_target(self, stream: str, row: int, micro_batches: int) -> float:
        """UTF-8 bytes of text per target token over a row's first `micro_batches` micro-batches:
        the text an evaluation's mean loss is per token of, so that loss / ln 2 / this is bits
        per byte of the text evaluated (and not of the whole split)."""
        targets = np.concatenate(
            [self.window(stream, row, k)[:, 1:].numpy().ravel() for k in range(micro_batches)]
        )
        lengths = token_byte_lengths()
        if targets.max(initial=0) >= len(lengths):
            raise DataError(f"{stream} row {row} holds token ids past GPT-2's {len(lengths) - 1}")
        return float(lengths[targets].sum() / targets.size)


def inputs_targets(window: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return window[:, :-1], window[:, 1:]


class DeviceBatches:
    """Training micro-batches on the device, copied one ahead on CUDA: the host never waits."""

    def __init__(self, batches: Batches, device: torch.device):
        self.batches, self.device = batches, device
        self.copy_stream = torch.cuda.Stream(device) if device.type == "cuda" else None

    @property
    def accumulation(self) -> int:
        return self.batches.accumulation

    def _fetch(self, row: int, micro_step: int) -> torch.Tensor:
        window = self.batches.window("train", row, micro_step)
        if self.copy_stream is None:
            return window.to(self.device)
        with torch.cuda.stream(self.copy_stream):
            return window.pin_memory().to(self.device, non_blocking=True)

    def step(self, row: int, micro_steps: range):
        """Yield one optimiser step's (inputs, targets) micro-batches, fetching one ahead."""
        ahead = self._fetch(row, micro_steps[0])
        for k in micro_steps:
            window = ahead
            if self.copy_stream is not None:  # compute waits for this copy only, not the next one
                compute = torch.cuda.current_stream(self.device)
                compute.wait_stream(self.copy_stream)
                window.record_stream(compute)  # its memory is the compute stream's to free
            if k + 1 < micro_steps.stop:
                ahead = self._fetch(row, k + 1)
            yield inputs_targets(window)


def random_batches(run: RunConfig, rows: int, seed: int = 0) -> Batches:
    """Random-token batches of the preset's shapes at the run's training micro-batch."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, 50257, 1 << 20, dtype=np.uint16)
    starts = rng.integers(0, tokens.size - run.model.block_size - 1, (rows, run.train.batch_size))
    return Batches(
        {"train": starts},
        {"train": tokens},
        run.model.block_size,
        run.train.eval_micro_batch,
        run.runtime.train_micro_batch,
    )
