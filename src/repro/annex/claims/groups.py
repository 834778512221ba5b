"""The claims the groups trained beside Table 1 answer (docs/specification.md §4): tuning, the
query ablation, decay to zero and version 3's recipe; a claim holds only where the 95% interval of
the paired relative improvement lies above zero."""

from __future__ import annotations

import pandas as pd

from repro.analysis.claims import standing, verdict
from repro.analysis.seeds import paired_difference, paired_p_value
from repro.annex.groups import ablation as query_ablation
from repro.annex.groups import decay as decay_to_zero
from repro.annex.groups import tuning, v3
from repro.config import Experiments, Preset

NOT_IN = "in the experiments file"


def tuned(runs_dir, preset: Preset, experiments: Experiments, seeds: int, config_dir):
    """(claim, experiment, holds, detail) of the tuning comparison."""
    roles = {
        "baseline": experiments[experiments.baseline],
        "larger control": experiments[experiments.claims["larger_control"]],
    }
    claims = {f"beats the best-tuned {role}": e for role, e in roles.items()}
    if tuning.GROUP not in experiments.groups:
        return [(c, tuning.GROUP, None, f"no group `{tuning.GROUP}` {NOT_IN}") for c in claims]
    result = tuning.tuning(runs_dir, preset, seeds, config_dir)
    return best_against_best(result, tuning.GROUP, claims, seeds)


def decay(runs_dir, preset: Preset, experiments: Experiments, seeds: int, config_dir):
    """(claim, experiment, holds, detail) of decay to zero, both read at their last evaluation."""
    if decay_to_zero.GROUP not in experiments.groups:
        return [
            (
                decay_to_zero.CLAIM,
                decay_to_zero.GROUP,
                None,
                f"no group `{decay_to_zero.GROUP}` {NOT_IN}",
            )
        ]
    result = decay_to_zero.decay_to_zero(runs_dir, preset, seeds, config_dir)
    baseline = experiments[experiments.baseline]
    return best_against_best(result, decay_to_zero.GROUP, {decay_to_zero.CLAIM: baseline}, seeds)


def best_against_best(result: tuning.Tuning, group: str, claims: dict, seeds: int) -> list:
    """Each claim from result's row pairing the best nonlinear setting with that model's best."""
    where = f"preset {result.preset.name}, group {group}, {seeds} seed{'s' * (seeds > 1)}"
    if result.missing:
        detail = f"not answered at {where}: {len(result.missing)} runs missing: " + ", ".join(
            result.missing
        )
        return [(c, group, None, detail) for c in claims]
    rows = []
    for claim, experiment in claims.items():
        row = result.comparison[result.comparison["linear_model"] == tuning.model_of(experiment)]
        if row.empty:
            rows.append((claim, group, None, f"no complete setting at {where}"))
            continue
        row = row.iloc[0]
        at = f"{where}, step {row['step']}"
        rows.append(paired_claim(claim, at, row, row["nonlinear"], row["linear"]))
    return rows


def paired_claim(claim: str, where: str, row: pd.Series, ours: str, reference: str) -> tuple:
    """(claim, ours, holds, detail, p) of a paired comparison: holds where its interval is above
    0; p, its paired t-test's p-value (NaN below three seeds), for the correction over claims."""
    n = int(row["n_pairs"])
    low, high = row["rel_improvement_ci_low"], row["rel_improvement_ci_high"]
    interval = f" (95% CI {low:.2%}..{high:.2%})" if n > 1 else ""
    spreads = (
        f", {row['gap_in_spreads']:.1f} spreads of {row['spread_from']}"
        if pd.notna(row.get("gap_in_spreads"))
        else ""
    )
    detail = (
        f"{where}: best {ours} vs best {reference}: "
        f"paired improvement {row['rel_improvement_mean']:.2%}{interval}, "
        f"loss gap {row['loss_gap_mean']:.4f}{spreads}"
    )
    p = paired_p_value(row["rel_improvement_mean"], row["rel_improvement_sd"], n)
    return (claim, ours, *verdict(standing(row.to_frame().T, "rel_improvement"), n, detail), p)


def ablation(runs_dir, preset: Preset, experiments: Experiments, seeds: int, config_dir):
    """(claim, experiment, holds, detail) of the query ablation, arms at their best settings."""
    if query_ablation.GROUP not in experiments.groups:
        return [
            (c, query_ablation.GROUP, None, f"no group `{query_ablation.GROUP}` {NOT_IN}")
            for c, _, _ in query_ablation.CLAIMS
        ]
    result = query_ablation.ablation(runs_dir, preset, seeds, config_dir)
    where = f"preset {preset.name}, group {query_ablation.GROUP}, {seeds} seed{'s' * (seeds > 1)}"
    rows = []
    for claim, ours, reference in query_ablation.CLAIMS:
        missing = result.missing_of(ours, reference)
        incomplete = [
            query_ablation.arm_name(a) for a in (ours, reference) if result.best(a) is None
        ]
        if missing:
            detail = f"not answered at {where}: {len(missing)} runs missing: " + ", ".join(missing)
            rows.append((claim, query_ablation.GROUP, None, detail))
        elif incomplete:
            detail = f"no complete setting of {' or '.join(incomplete)} at {where}"
            rows.append((claim, query_ablation.GROUP, None, detail))
        else:
            step = f"{where}, step {preset.report.table_step}"
            row = result.compare(ours, reference)
            rows.append(paired_claim(claim, step, row, result.best(ours), result.best(reference)))
    return rows


def version3(runs_dir, preset: Preset, experiments: Experiments, seeds: int, config_dir):
    """(claim, experiment, holds, detail) of version 3's recipe, read at the last evaluation."""
    if v3.GROUP not in experiments.groups:
        return [(c, v3.GROUP, None, f"no group `{v3.GROUP}` {NOT_IN}") for c in v3.CLAIM_NAMES]
    result = v3.version3(runs_dir, preset, seeds, config_dir)
    where = f"preset {preset.name}, group {v3.GROUP}, {seeds} seed{'s' * (seeds > 1)}"
    if result.missing:
        detail = f"not answered at {where}: {len(result.missing)} runs missing: " + ", ".join(
            result.missing
        )
        return [(c, v3.GROUP, None, detail) for c in v3.CLAIM_NAMES]
    best = {role: result.best(rows) for role, rows in result.roles(experiments.baseline).items()}
    at = f"{where}, step {result.step}"

    def pair(claim, losses, ours, reference):
        if ours is None or reference is None:
            return (claim, v3.GROUP, None, f"no complete setting at {where}")
        return paired_claim(claim, at, paired_difference(losses, ours, reference), ours, reference)

    rows = [pair(c, result.losses, best["nonlinear"], best[ref]) for c, ref in v3.CLAIMS]
    rows.append(_against_decay_to_zero(result, experiments, best["nonlinear"], config_dir, pair))
    wider = pair(v3.PARAMETERS_CLAIM, result.losses, best["nonlinear"], best["wider"])
    if wider[2] is not False and best["wider"] is not None:  # not behind: the control is too small
        extra = result.table.set_index("experiment").loc[best["wider"], "extra_params"]
        wider = (
            *wider[:2],
            None,
            f"not testable with these runs: the widest control, {best['wider']}, has "
            f"{extra:.1%} more non-embedding parameters; against it: {wider[3]}",
        )  # no p-value: a claim these runs cannot test is not among those corrected together
    return [*rows, wider]


def _against_decay_to_zero(result: v3.Version3, experiments: Experiments, ours, config_dir, pair):
    """Version 3's best nonlinear setting against decay_to_zero's best linear baseline."""
    group = decay_to_zero.GROUP
    if group not in experiments.groups:
        return (v3.D2Z_CLAIM, group, None, f"no group `{group}` {NOT_IN}")
    members = [e for e in experiments.group(group) if e.query_mode == "linear"]
    d2z = tuning.settings(result.runs_dir, result.preset, result.seeds, config_dir, members, True)
    if d2z.step != result.step:
        detail = f"not comparable: read at step {d2z.step}, not {result.step}"
        return (v3.D2Z_CLAIM, group, None, detail)
    if d2z.missing:
        detail = f"not answered: {len(d2z.missing)} runs missing: " + ", ".join(d2z.missing)
        return (v3.D2Z_CLAIM, group, None, detail)
    reference = d2z.table.loc[d2z.table["best"], "experiment"]
    losses = result.losses.join(d2z.losses.drop(columns=result.losses.columns, errors="ignore"))
    return pair(v3.D2Z_CLAIM, losses, ours, reference.iloc[0] if len(reference) else None)


# Each group trained beside Table 1 and the function that answers its claims, in the claims' order.
GROUPS = {
    tuning.GROUP: tuned,
    decay_to_zero.GROUP: decay,
    query_ablation.GROUP: ablation,
    v3.GROUP: version3,
}
