"""Artefacts in the authors' format (docs/specification.md §8), written here at any scale: their
loss tensors and a ckpt.pt with their parameter names, for the import, evaluation and workflow
tests."""

from __future__ import annotations

import math
from pathlib import Path

import torch

from repro.annex.authors.checkpoint import AUTHORS_RENAMES
from repro.config import RunConfig
from repro.model import GPT

AUTHORS_NAMES = {"linear": "original", "residual_gelu": "residual_gelu"}


def authors_model_args(run: RunConfig) -> dict:
    """model_args as their configs write them, for one of our runs."""
    m, t, o = run.model, run.train, run.optimizer
    return {
        "block_size": m.block_size,
        "vocab_size": m.vocab_size,
        "n_layer": m.n_layer,
        "num_heads": m.n_head,
        "n_embd": m.d_model,
        "head_size": m.head_size,
        "mlp_hidden_size": m.mlp_hidden,
        "tie_weights": m.tie_embeddings,
        "query_mode": AUTHORS_NAMES[m.query_mode],
        "dropout": 0.0,
        "bias": False,
        "scale": m.resolved_query_scale / math.sqrt(m.head_size),
        "learning_rate": o.lr_max,
        "min_lr": o.lr_min,
        "weight_decay": o.weight_decay,
        "warmup_iters": t.warmup_steps,
        "lr_decay_iters": t.decay_steps,
        "max_iters": t.max_step,
    }


def write_authors_checkpoint(path, model: GPT, run: RunConfig, iter_num: int) -> None:
    """ckpt.pt as their train.py writes it: their parameter names, torch.compile's prefix."""
    theirs = {}
    for key, value in model.state_dict().items():
        for their_name, ours in AUTHORS_RENAMES.items():
            key = key.replace(ours, their_name)
        theirs["_orig_mod." + key] = value
    torch.save(
        {
            "model": theirs,
            "optimizer": {},
            "model_args": authors_model_args(run),
            "iter_num": iter_num,
            "best_val_loss": 3.0,
            "config": {"eval_iters": 2},
        },
        path,
    )


def authors_folder(
    root, run: RunConfig, name="out_config_tiedw_original", ckpt=True, diverge_at=None, gain=0.0
):
    """Their out_<config> folder after a whole run at the tiny scale: loss tensors and ckpt.pt."""
    folder = root / name
    folder.mkdir(parents=True)
    t = run.train
    losses = torch.zeros(t.max_step + 1, 3)
    losses[:, 0] = torch.linspace(10, 5, t.max_step + 1)
    losses[t.max_step, 0] = 0  # logged after the last evaluation: never saved
    if diverge_at is not None:
        losses[diverge_at : t.max_step, 0] = float("nan")
    torch.save(losses, folder / "tensor.pt")
    rows = t.evaluations
    for split, offset in (("train", -0.1), ("val", 0.0)):
        evals = torch.zeros(rows, 3)
        evals[:, 0] = t.eval_batches
        evals[:, 1] = torch.linspace(10.5, 5.5, rows) + offset - gain
        evals[:, 2] = 0.01
        torch.save(evals, folder / f"eval_{split}_tensor.pt")
    if ckpt:
        torch.manual_seed(0)
        write_authors_checkpoint(folder / "ckpt.pt", GPT(run.model), run, t.max_step)
    return folder


def write_artefacts(root: Path, runs: dict[str, RunConfig]) -> Path:
    """A downloaded artefacts folder: one out_config_* folder per run, named by its source."""
    for i, run in enumerate(runs.values()):
        kind, name = run.experiment.source.split("/")
        authors_folder(root, run, f"out_config_{kind}w_{name}", gain=0.1 * i)
    return root
