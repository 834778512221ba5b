"""Run directories that older versions of the package wrote, read as today's: the one module that
knows how they differ.

- run.json without `format`: the training micro-batch under `micro_batch`, and an identity laid
  out as preset/experiment/model (legacy_record, legacy_identity).
- Settings that runs were recorded without (LATER_MODEL_OPTIONS, LATER_TRAIN_DEFAULTS): an
  identity read without one gets it at the value those runs trained with (with_later_defaults),
  so that they keep their identity: they resume, and the results do not call them stale.

Only readers call this; RunConfig.identity(), what training computes with, knows nothing of it.
"""

LATER_MODEL_OPTIONS = {"qk_norm": False, "attention_gate": None}
LATER_TRAIN_DEFAULTS = {
    "schedule": "cosine",
    "divergence_margin": None,
    "divergence_evaluations": 2,
}


def with_later_defaults(identity: dict) -> dict:
    """A recorded identity (today's layout) with the settings it was recorded without, at the
    values its run trained with; an empty one (a run of no known configuration) stays empty."""
    if not identity:
        return identity
    model = LATER_MODEL_OPTIONS | identity.get("model", {})
    return identity | {"model": model, "train": LATER_TRAIN_DEFAULTS | identity.get("train", {})}


def legacy_record(data: dict) -> dict:
    """A run.json without `format` in today's fields (KeyError or TypeError where it is none)."""
    data = dict(data)
    data["train_micro_batch"] = data.pop("micro_batch", None)
    eval_micro_batch = data["config"]["preset"]["train"]["micro_batch"]
    data["identity"] = legacy_identity(data["identity"], eval_micro_batch)
    return data


def legacy_identity(identity: dict, eval_micro_batch: int) -> dict:
    """An identity of the preset/experiment/model layout in today's, given its micro-batch."""
    if "preset" not in identity:
        return identity
    train = {
        k: v
        for k, v in identity["preset"]["train"].items()
        if k not in ("table_step", "checkpoint_interval")
    }  # report and runtime settings, outside today's identity
    e = identity["experiment"]
    return {
        "model": identity["model"],
        "train": train | {"eval_micro_batch": eval_micro_batch},
        "optimizer": {
            "lr_max": e["lr_max"],
            "lr_min": e["lr_min"],
            "weight_decay": e["weight_decay"],
        },
    }
