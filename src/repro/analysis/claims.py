"""The text's claims (docs/specification.md §4.3), checked against the runs that exist: those of
Table 1's nonlinear rows and the baseline's divergence at weight decay 0.05, with Holm's correction
over the claims checked together. The claims of the groups trained beside Table 1 join them in
repro.annex.claims.joint."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from repro.analysis.curves import relative_improvement, relative_improvement_curves
from repro.analysis.results import scale_caveat
from repro.analysis.seeds import (
    ALPHA,
    BySeed,
    checked_runs,
    holm,
    losses_at,
    over_seeds,
    paired,
    paired_p_value,
    read_seed_runs,
    summarise,
)
from repro.config import Experiments, Preset, load_config
from repro.config.plan import equal_rate_arms

# group: whose runs answer it; p_value: its paired t-test's (three seeds or more), p_holm: that
# p-value corrected by Holm's method over the claims of one check (seeds.holm)
CLAIM_COLUMNS = ["claim", "experiment", "holds", "detail", "group", "p_value", "p_holm"]


def standing(summary: pd.DataFrame, value: str) -> np.ndarray:
    """Per row: 'ahead', 'not ahead' or 'not distinguishable'; with one seed, the value's sign."""
    mean = summary[f"{value}_mean"]
    low, high = summary[f"{value}_ci_low"].fillna(mean), summary[f"{value}_ci_high"].fillna(mean)
    return np.select([low > 0, high <= 0], ["ahead", "not ahead"], "not distinguishable")


def verdict(standing, n_seeds: int, detail: str) -> tuple[bool | None, str]:
    """Holds where every interval is above zero, fails where one is not; else indistinguishable."""
    if all(s == "ahead" for s in standing):
        return True, detail
    if any(s == "not ahead" for s in standing):
        return False, detail
    return None, f"not distinguishable at {n_seeds} seeds: {detail}"


def verdicts_caveat(preset: Preset, config_dir: str | Path | None = None) -> str:
    """The scale caveat: below the paper's scale, a claim that holds is no evidence for it."""
    caveat = scale_caveat(preset, config_dir)
    return caveat and (
        f"{caveat}; so these verdicts are not evidence for or against the paper's claims: at "
        f"this scale the nonlinear query's larger learning rate alone can beat the baseline, "
        f"which the claim against the linear query at its learning rate separates"
    )


def _early_limit(preset: Preset) -> int:
    """The last 'early' step: warm-up's end, or the first evaluation if later (smoke's case)."""
    return max(preset.train.warmup_steps, preset.train.eval_interval)


def _beats_baseline(curve: pd.DataFrame) -> tuple[bool | None, str, float]:
    """Ahead at every evaluation; p, the largest of the steps' p-values: the claim is that every
    step is ahead, so it is no more certain than its least certain step (intersection-union)."""
    by_step = pd.Series(standing(curve, "rel_improvement"), index=curve["step"])
    n = int(curve["n_seeds"].min())
    columns = curve[["rel_improvement_mean", "rel_improvement_sd", "n_seeds"]]
    ps = [paired_p_value(m, sd, int(k)) for m, sd, k in columns.itertuples(index=False)]
    where = [
        f"{s} at steps {list(by_step.index[by_step == s])}"
        for s in ("not ahead", "not distinguishable")
        if (by_step == s).any()
    ]
    detail = (
        f"{len(curve)} evaluations, steps {curve['step'].min()}..{curve['step'].max()}, "
        f"{n} seed{'s' * (n > 1)}; " + ("; ".join(where) or "ahead at all")
    )
    return (*verdict(by_step, n, detail), float(np.max(ps)) if ps else np.nan)  # NaN: untested


def _beats_control(name: str, control: str, by_seed: BySeed, step: int) -> tuple:
    """(holds, detail, p) of `name` against `control` at `step`, paired over seeds."""
    losses = losses_at(by_seed, [name, control], step).pivot(
        index="seed", columns="experiment", values="val_loss"
    )
    gains = relative_improvement(losses[name], losses[control]).rename("rel_improvement")
    summary = summarise(gains.to_frame().groupby(lambda _: name), "rel_improvement")
    n, (ours, theirs) = int(summary["n_seeds"].iloc[0]), losses[[name, control]].mean()
    detail = f"val loss at step {step}: {ours:.4f} vs {control} {theirs:.4f}"
    if n == 0:
        return None, detail, np.nan
    if n > 1:
        low, high = summary.iloc[0][["rel_improvement_ci_low", "rel_improvement_ci_high"]]
        detail += (
            f" (means of {n} seeds; paired improvement "
            f"{summary['rel_improvement_mean'].iloc[0]:.2%}, 95% CI {low:.2%}..{high:.2%})"
        )
    mean, sd = summary[["rel_improvement_mean", "rel_improvement_sd"]].iloc[0]
    return (*verdict(standing(summary, "rel_improvement"), n, detail), paired_p_value(mean, sd, n))


def _equal_rate_claim(name: str, linear: str, by_seed: BySeed, step: int) -> tuple:
    """(claim, holds, detail) against the linear query at the same rate and weight decay."""
    claim = f"beats the linear query at its learning rate ({linear})"
    pairs = paired(by_seed, name, linear)
    if not pairs:
        return claim, None, f"{linear} run missing (group `tuning`; Table 1 at the small presets)"
    return claim, *_beats_control(name, linear, pairs, step)


def _nonlinear_claims(
    name: str, by_seed: BySeed, experiments: Experiments, preset: Preset
) -> list[tuple]:
    """(claim, holds, detail) for one nonlinear Table 1 experiment, over seeds with both."""
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
    linear = equal_rate_arms(experiments, [name]).get(name)
    if linear:
        rows.append(_equal_rate_claim(name, linear, by_seed, table_step))
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


def claim_rows(
    runs_dir: str | Path,
    preset: Preset,
    experiments: Experiments,
    divergence_step: int | None = None,
    seeds: int = 1,
) -> list[tuple]:
    """(claim, experiment, holds, detail, group, p_value) of each text claim, uncorrected."""
    nonlinear = [e.name for e in experiments.group("table1") if e.query_mode == "residual_gelu"]
    unstable = experiments.claims["unstable"]
    names = [experiments.baseline, experiments.claims["larger_control"], unstable, *nonlinear]
    names += list(dict.fromkeys(equal_rate_arms(experiments, nonlinear).values()))
    by_seed, _ = checked_runs(  # a run that is not its experiment's answers no claim
        read_seed_runs(runs_dir, names, seeds), [experiments[n] for n in names], preset
    )
    rows = [  # (claim, experiment, holds, detail, group[, p])
        (claim, name, holds, detail, "table1", *p)
        for name in nonlinear
        for claim, holds, detail, *p in _nonlinear_claims(name, by_seed, experiments, preset)
    ]
    rows.append(_divergence_claim(by_seed[0], unstable, preset, divergence_step))
    return [(*row, np.nan) if len(row) == 5 else row for row in rows]  # no p-value: NaN


def _divergence_claim(runs: dict, unstable: str, preset: Preset, divergence_step) -> tuple:
    """The divergence claim, from seed 0's run of the baseline at weight decay 0.05."""
    limit = divergence_step if divergence_step is not None else preset.train.max_step // 3
    claim = "baseline diverges at weight decay 0.05"
    if unstable not in runs:
        return (claim, unstable, None, "not trained (group `claims`)", "claims")
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
    return (claim, unstable, holds, detail, "claims")


def check_claims(
    runs_dir: str | Path,
    preset: str | Preset,
    config_dir: str | Path | None = None,
    divergence_step: int | None = None,
    seeds: int = 1,
) -> pd.DataFrame:
    """One row per (claim, experiment) of the text's claims, holding where the paired 95% interval
    excludes zero (one seed: the gain is positive) and Holm's correction over these rows keeps it;
    the claims: docs/specification.md §4.3."""
    preset, experiments = load_config(preset, config_dir)
    rows = claim_rows(runs_dir, preset, experiments, divergence_step, seeds)
    return claims_table(rows, preset, config_dir)


def claims_table(rows: list[tuple], preset: Preset, config_dir) -> pd.DataFrame:
    """The rows as the claims table: Holm's correction over all of them, and the scale caveat."""
    claims = corrected(pd.DataFrame(rows, columns=CLAIM_COLUMNS[:-1]))
    claims["caveat"] = verdicts_caveat(preset, config_dir)
    return claims


def corrected(claims: pd.DataFrame) -> pd.DataFrame:
    """p_holm beside each p_value; a claim whose interval holds but whose corrected p-value is
    not below ALPHA no longer holds: among this many claims, one as strong may be chance."""
    claims = claims.copy()
    claims["p_holm"] = holm(claims["p_value"])
    weak = (claims["holds"] == True) & (claims["p_holm"] >= ALPHA)  # noqa: E712 (NaN: untested)
    m = int(claims["p_value"].notna().sum())
    for i in claims.index[weak]:
        claims.at[i, "holds"] = None
        claims.at[i, "detail"] = (
            f"not distinguishable after Holm's correction over the {m} claims checked "
            f"together: paired t-test p {claims.at[i, 'p_value']:.3g}, corrected "
            f"{claims.at[i, 'p_holm']:.3g} (not below {ALPHA:.2g}): {claims.at[i, 'detail']}"
        )
    return claims
