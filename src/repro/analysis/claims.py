"""The text's claims (docs/specification.md §4), checked against the runs that exist.

Which experiments play which role (the baseline, the larger linear control, the unstable baseline)
is data: `baseline` and `claims` in the experiments file. Over several seeds
(repro.analysis.seeds) one configuration beats another only where the 95% interval of the
paired relative improvement lies above zero; where it spans zero the claim is "not
distinguishable at N seeds".
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from repro.analysis import ablation, decay, tuning
from repro.analysis.curves import relative_improvement, relative_improvement_curves
from repro.analysis.results import scale_caveat
from repro.analysis.seeds import (
    BySeed,
    checked_runs,
    losses_at,
    over_seeds,
    paired,
    read_seed_runs,
    summarise,
)
from repro.config import Experiments, Preset, load_config

CLAIM_COLUMNS = ["claim", "experiment", "holds", "detail"]
NOT_IN = "in the experiments file"


def verdicts_caveat(preset: Preset, config_dir: str | Path | None = None) -> str:
    """The preset's scale caveat (repro.analysis.results.scale_caveat) and what it means for a
    verdict: below the paper's scale a claim that holds is no evidence for the paper's (on smoke
    the nonlinear query "beats" the baseline by its larger learning rate, docs/tuning.md)."""
    caveat = scale_caveat(preset, config_dir)
    return (
        caveat and f"{caveat}; so these verdicts are not evidence for or against the paper's claims"
    )


def _early_limit(preset: Preset) -> int:
    """The last step that counts as 'early': the end of warm-up, or the first evaluation after
    step 0 if warm-up ends before it (the smoke preset evaluates every 20 steps, warms up 10)."""
    return max(preset.train.warmup_steps, preset.train.eval_interval)


def _standing(summary: pd.DataFrame, value: str) -> np.ndarray:
    """Per row: 'ahead' (the interval above zero), 'not ahead' (at or below zero) or 'not
    distinguishable' (across zero). One seed has no interval: its value's sign decides."""
    mean = summary[f"{value}_mean"]
    low, high = summary[f"{value}_ci_low"].fillna(mean), summary[f"{value}_ci_high"].fillna(mean)
    return np.select([low > 0, high <= 0], ["ahead", "not ahead"], "not distinguishable")


def _verdict(standing, n_seeds: int, detail: str) -> tuple[bool | None, str]:
    """Holds where every interval is above zero, fails where one is at or below it; otherwise the
    claim is neither: not distinguishable at this many seeds."""
    if all(s == "ahead" for s in standing):
        return True, detail
    if any(s == "not ahead" for s in standing):
        return False, detail
    return None, f"not distinguishable at {n_seeds} seeds: {detail}"


def _beats_baseline(curve: pd.DataFrame) -> tuple[bool | None, str]:
    standing = pd.Series(_standing(curve, "rel_improvement"), index=curve["step"])
    n = int(curve["n_seeds"].min())
    where = [
        f"{s} at steps {list(standing.index[standing == s])}"
        for s in ("not ahead", "not distinguishable")
        if (standing == s).any()
    ]
    detail = (
        f"{len(curve)} evaluations, steps {curve['step'].min()}..{curve['step'].max()}, "
        f"{n} seed{'s' * (n > 1)}; " + ("; ".join(where) or "ahead at all")
    )
    return _verdict(standing, n, detail)


def _beats_control(name: str, control: str, by_seed: BySeed, step: int) -> tuple[bool | None, str]:
    losses = losses_at(by_seed, [name, control], step).pivot(
        index="seed", columns="experiment", values="val_loss"
    )
    gains = relative_improvement(losses[name], losses[control]).rename("rel_improvement")
    summary = summarise(gains.to_frame().groupby(lambda _: name), "rel_improvement")
    n, (ours, theirs) = int(summary["n_seeds"].iloc[0]), losses[[name, control]].mean()
    detail = f"val loss at step {step}: {ours:.4f} vs {control} {theirs:.4f}"
    if n == 0:
        return None, detail
    if n > 1:
        low, high = summary.iloc[0][["rel_improvement_ci_low", "rel_improvement_ci_high"]]
        detail += (
            f" (means of {n} seeds; paired improvement "
            f"{summary['rel_improvement_mean'].iloc[0]:.2%}, 95% CI {low:.2%}..{high:.2%})"
        )
    return _verdict(_standing(summary, "rel_improvement"), n, detail)


def _nonlinear_claims(
    name: str, by_seed: BySeed, experiments: Experiments, preset: Preset
) -> list[tuple]:
    """(claim, holds, detail) for one nonlinear experiment of Table 1, over the seeds that have
    both it and the baseline (or the control)."""
    base, control = experiments.baseline, experiments.claims["larger_control"]
    beats, beats_control, early = (
        "beats baseline at every evaluation",
        f"beats {control}",
        "largest relative gain early",
    )
    pairs = paired(by_seed, base, name)
    if not pairs:
        return [(claim, None, "run missing") for claim in (beats, beats_control, early)]
    table_step = preset.report.table_step
    curve = over_seeds(
        pairs,
        lambda runs: relative_improvement_curves(
            {base: runs[base], name: runs[name]}, base, last_step=table_step
        ),
        ["experiment", "step"],
        "rel_improvement",
    )
    rows = [
        (beats, None, "no common evaluation steps")
        if curve.empty
        else (beats, *_beats_baseline(curve))
    ]
    if paired(by_seed, name, control):
        rows.append(
            (
                beats_control,
                *_beats_control(name, control, paired(by_seed, name, control), table_step),
            )
        )
    else:
        rows.append((beats_control, None, f"{control} run missing"))
    if curve.empty:
        rows.append((early, None, "no common evaluation steps"))
    else:
        best, limit = curve.loc[curve["rel_improvement_mean"].idxmax()], _early_limit(preset)
        rows.append(
            (
                early,
                bool(best["step"] <= limit),
                f"largest gain {best['rel_improvement_mean']:.2%} at step {int(best['step'])} "
                f"(early: step <= {limit})",
            )
        )
    return rows


def _tuned_claims(runs_dir, preset: Preset, experiments: Experiments, seeds: int, config_dir):
    """(claim, experiment, holds, detail) of the tuning comparison (repro.analysis.tuning): the
    best nonlinear setting against the best setting of the baseline's model and of the larger
    control's; not answered while a run of the group is missing, which the detail lists."""
    roles = {
        "baseline": experiments[experiments.baseline],
        "larger control": experiments[experiments.claims["larger_control"]],
    }
    claims = {f"beats the best-tuned {role}": e for role, e in roles.items()}
    if tuning.GROUP not in experiments.groups:
        return [(c, tuning.GROUP, None, f"no group `{tuning.GROUP}` {NOT_IN}") for c in claims]
    result = tuning.tuning(runs_dir, preset, seeds, config_dir)
    return _best_against_best(result, tuning.GROUP, claims, seeds)


def _decay_claims(runs_dir, preset: Preset, experiments: Experiments, seeds: int, config_dir):
    """(claim, experiment, holds, detail) of decay to zero (repro.analysis.decay): the best
    nonlinear rate against the best linear baseline's, both read at their last evaluation."""
    if decay.GROUP not in experiments.groups:
        return [(decay.CLAIM, decay.GROUP, None, f"no group `{decay.GROUP}` {NOT_IN}")]
    result = decay.decay_to_zero(runs_dir, preset, seeds, config_dir)
    baseline = experiments[experiments.baseline]
    return _best_against_best(result, decay.GROUP, {decay.CLAIM: baseline}, seeds)


def _best_against_best(result: tuning.Tuning, group: str, claims: dict, seeds: int) -> list:
    """Each claim (-> an experiment of the linear model it compares with) from result's row
    pairing the best nonlinear setting with that model's best; while a run of the group is
    missing, the detail lists the missing runs instead."""
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
        rows.append(_paired_claim(claim, at, row, row["nonlinear"], row["linear"]))
    return rows


def _paired_claim(claim: str, where: str, row: pd.Series, ours: str, reference: str) -> tuple:
    """(claim, ours, holds, detail) from the paired comparison of best settings `ours` and
    `reference` (repro.analysis.seeds.paired_difference): holds where its interval lies above
    zero."""
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
    standing = _standing(row.to_frame().T, "rel_improvement")
    return (claim, ours, *_verdict(standing, n, detail))


def _ablation_claims(runs_dir, preset: Preset, experiments: Experiments, seeds: int, config_dir):
    """(claim, experiment, holds, detail) of the query ablation (repro.analysis.ablation): each
    claim's two arms at their best settings, paired; not answered while a run of either arm is
    missing, which the detail lists."""
    if ablation.GROUP not in experiments.groups:
        return [
            (c, ablation.GROUP, None, f"no group `{ablation.GROUP}` in the experiments file")
            for c, _, _ in ablation.CLAIMS
        ]
    result = ablation.ablation(runs_dir, preset, seeds, config_dir)
    where = f"preset {preset.name}, group {ablation.GROUP}, {seeds} seed{'s' * (seeds > 1)}"
    rows = []
    for claim, ours, reference in ablation.CLAIMS:
        missing = result.missing_of(ours, reference)
        incomplete = [ablation.arm_name(a) for a in (ours, reference) if result.best(a) is None]
        if missing:
            detail = f"not answered at {where}: {len(missing)} runs missing: " + ", ".join(missing)
            rows.append((claim, ablation.GROUP, None, detail))
        elif incomplete:
            detail = f"no complete setting of {' or '.join(incomplete)} at {where}"
            rows.append((claim, ablation.GROUP, None, detail))
        else:
            step = f"{where}, step {preset.report.table_step}"
            row = result.compare(ours, reference)
            rows.append(_paired_claim(claim, step, row, result.best(ours), result.best(reference)))
    return rows


def check_claims(
    runs_dir: str | Path,
    preset: str | Preset,
    config_dir: str | Path | None = None,
    divergence_step: int | None = None,
    seeds: int = 1,
) -> pd.DataFrame:
    """One row per (claim, experiment): holds (True/False, or None when the runs needed are
    missing or, over several seeds, when the paired 95% interval includes zero: "not
    distinguishable at N seeds") and a detail line. Over seeds 0..seeds-1 a comparison holds only
    where the interval of its paired relative improvement excludes zero; with one seed, where the
    improvement is positive (the paper's single run). The claims, for each residual_gelu
    experiment of Table 1:
      - it beats the baseline at every evaluation from the first after step 0 to the table step;
      - it beats the larger linear control at the table step;
      - its largest relative gain over the baseline (mean over seeds) comes early (by the end of
        warm-up).
    And, if it was trained: the unstable baseline diverges before `divergence_step`
    (20k on the paper preset; default: a third of the preset's max_step). And, from the tuning
    comparison (repro.analysis.tuning): the best nonlinear setting beats the best-tuned baseline
    and the best-tuned larger control; while a run of group `tuning` is missing, the detail lists
    the missing runs instead. And, from the query ablation (repro.analysis.ablation): the gain
    needs the nonlinearity, survives QK-norm, beats the best-tuned stabilised baseline and the
    parameter-matched gate; each names the missing runs of its two arms while any is missing.
    And, from decay to zero (repro.analysis.decay): the best nonlinear rate beats the best linear
    baseline's, both decaying to zero and read at their last evaluation.
    """
    preset, experiments = load_config(preset, config_dir)
    nonlinear = [e.name for e in experiments.group("table1") if e.query_mode == "residual_gelu"]
    unstable = experiments.claims["unstable"]
    names = [experiments.baseline, experiments.claims["larger_control"], unstable, *nonlinear]
    by_seed, _ = checked_runs(  # a run that is not its experiment's answers no claim
        read_seed_runs(runs_dir, names, seeds), [experiments[n] for n in names], preset
    )
    rows = [
        (claim, name, holds, detail)
        for name in nonlinear
        for claim, holds, detail in _nonlinear_claims(name, by_seed, experiments, preset)
    ]
    runs = by_seed[0]  # the divergence claim: seed 0's run

    limit = divergence_step if divergence_step is not None else preset.train.max_step // 3
    claim = "baseline diverges at weight decay 0.05"
    if unstable in runs:
        run = runs[unstable]
        step = run.record.diverged_step
        holds = run.status == "diverged" and step is not None and step < limit
        at = f", diverged at step {step}" if step is not None else ""
        detail = f"status {run.status}{at} (claim: before step {limit})"
        margin = run.record.identity.get("train", {}).get("divergence_margin")
        if margin is not None:  # the authors' loop had no such stop: their claim is not tested
            holds, detail = (
                None,
                (
                    f"{detail}; not answered: trained with the divergence stop "
                    f"(train.divergence_margin {margin}), which the authors' training did not have"
                ),
            )
        rows.append((claim, unstable, holds, detail))
    else:
        rows.append((claim, unstable, None, "not trained (group `claims`)"))
    rows += _tuned_claims(runs_dir, preset, experiments, seeds, config_dir)
    rows += _decay_claims(runs_dir, preset, experiments, seeds, config_dir)
    rows += _ablation_claims(runs_dir, preset, experiments, seeds, config_dir)
    claims = pd.DataFrame(rows, columns=CLAIM_COLUMNS)
    claims["caveat"] = verdicts_caveat(preset, config_dir)
    return claims
