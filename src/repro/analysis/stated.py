"""What a user stated of an imported run whose log records no configuration (the audit's logs
hold losses alone; `--stated`, the workflow's `audit_configs`), held against a run's identity."""

from repro.config import resolve_run

# Where each stated key sits in a run's identity (RunConfig.identity), and its value when absent.
STATED_IN_IDENTITY = {
    "query_mode": ("model", "query_mode", None),
    "qk_norm": ("model", "qk_norm", False),
    "gate": ("model", "attention_gate", "none"),
    "peak_lr": ("optimizer", "lr_max", None),
    "schedule": ("train", "schedule", "cosine"),
    "steps": ("train", "max_step", None),
}


# What no statement can say (audit_run.schema.yaml has no key for it): a log stated in full may
# still be any experiment that differs from the stated one only in these.
UNSTATABLE = ("model.mlp_hidden", "optimizer.weight_decay", "optimizer.lr_min")


def stated_conflicts(stated: dict, identity: dict) -> list[str]:
    """What a run's identity differs in from a statement, "key: stated -> run's"."""
    differences = []
    for key, (section, name, absent) in STATED_IN_IDENTITY.items():
        ours = identity.get(section, {}).get(name)
        ours = absent if ours is None else ours  # an identity says "no gate" as None or not at all
        if key in stated and stated[key] != ours:
            differences.append(f"{key}: {stated[key]} -> {ours}")
    return differences


def stated_differences(stated: dict, identity: dict) -> list[str]:
    """stated_conflicts, and what is unknown for want of a statement (UNSTATABLE always)."""
    unstated = [k for k in STATED_IN_IDENTITY if k not in stated]
    unknown = [f"configuration unknown: {', '.join(unstated)} not stated"] if unstated else []
    cannot = f"{', '.join(k.split('.')[1] for k in UNSTATABLE)}: unknown (no statement says them)"
    return stated_conflicts(stated, identity) + unknown + [cannot]


def stated_configuration(record) -> dict:
    """What was stated of an imported log's configuration (its RunRecord); empty: unknown."""
    return {k: v for k, v in record.data.get("stated", {}).items() if k != "steps"}


def stated_as(record, preset, experiments) -> list[str]:
    """The experiments an imported log's run is by its stated_configuration: none when nothing is
    stated; several where they differ only in what no statement says (UNSTATABLE)."""
    stated = stated_configuration(record)
    if not stated:
        return []
    return [
        e.name
        for e in experiments
        if not stated_conflicts(stated, resolve_run(preset, e).identity())
    ]


def ambiguity(matches: list[str]) -> list[str]:
    """What a log's rows say where its statement fits more than one experiment (stated_as)."""
    if len(matches) < 2:
        return []
    return [
        f"ambiguous: its statement fits {len(matches)} experiments alike ({', '.join(matches)})"
    ]
