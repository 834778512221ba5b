"""The evidence table carries every claim the package checks: Table 1's (v1), version 3's (its
losses derived from the abstract's two percentages) beside our runs of its recipe, and the
verdict of each claim of repro.annex.claims, with the group's runs the audit has beside it,
each log beside the arm of the schedule it was stated to have."""

import json

import pandas as pd
import pytest
from audit_helpers import curve, write_log

from repro.annex.claims import evidence
from repro.annex.claims.joint import joint_claims
from repro.cli.assembly import main

V3_BEST = "v3-resgelu-wd0.1-lr3.6e-3"


def test_every_checked_claim_and_version_3s_stand_in_the_table(tiny_runs, write_run, tmp_path):
    write_run(tiny_runs / V3_BEST, V3_BEST, {0: 10.0, 4: 7.5, 8: 5.8, 12: 4.88}, last_step=12)
    out = tmp_path / "evidence.csv"
    command = ["evidence", "--preset", "tiny", "--runs", str(tiny_runs), "--out", str(out)]
    assert main([*command, "--html", str(tmp_path / "evidence.html")]) == 0
    table = pd.read_csv(out)
    assert evidence.verify_evidence(table) == []
    v3 = table[table["claim"].str.endswith(f"({evidence.V3})")].set_index(["experiment", "source"])
    derived = "paper v3 (2026-05-26), derived from its abstract's 2.40% and 6.81%"
    assert v3.loc[("baseline", derived), "value"] == 2.939
    assert v3.loc[(V3_BEST, derived), "value"] == 2.868
    ours = v3.loc[(V3_BEST, "ours")].set_index("quantity")
    end = ours[ours["read_at"] == "its own end"]
    assert end.at["val_loss", "value"] == pytest.approx(4.88)
    assert end.at["rel_improvement", "value"] == pytest.approx((5.0 - 4.88) / 5.0)
    assert set(v3.loc[(V3_BEST, "authors"), "status"]) == {evidence.NOT_AVAILABLE}

    verdicts = table[table["quantity"] == "verdict"]
    claims = joint_claims(tiny_runs, "tiny")
    assert list(zip(verdicts["claim"], verdicts["experiment"])) == list(
        zip(claims["claim"], claims["experiment"])
    )
    assert {"tuning", "query_ablation", "decay_to_zero", "v3"} <= set(claims["group"])
    beats = verdicts.set_index(["claim", "experiment"]).loc[
        ("beats baseline at every evaluation", "resgelu-lr3e-3")
    ]
    assert beats["status"] == "holds" and beats["detail"].startswith("3 evaluations")
    missing = verdicts[verdicts["claim"] == "version 3: beats the linear baseline"].iloc[0]
    assert missing["status"] == "not answered" and "runs missing" in missing["detail"]
    html = (tmp_path / "evidence.html").read_text()
    assert "version 3: beats the tuned decay-to-zero linear baseline" in html
    assert "derived from its abstract" in html


def test_an_audit_log_stands_beside_the_arm_of_its_stated_schedule(tiny_runs, tmp_path):
    """The audit's decay-to-zero logs were trained by cosine to zero: stated so, a log stands
    beside the cosine arm of group decay_to_zero; stated linear, beside the linear arm; never
    across."""
    logs = tmp_path / "logs" / "tiny"
    for name, schedule, end in (("d2z_cos", "cosine", 4.7), ("d2z_linear", "linear", 4.8)):
        log = write_log(tmp_path / f"{name}.csv", curve(12, interval=4, start=10.0, end=end))
        stated = {"query_mode": "linear", "peak_lr": 4.8e-3, "schedule": schedule}
        command = ["import-audit-log", str(log), "--preset", "tiny", "--out", str(logs / name)]
        assert main([*command, "--stated", json.dumps(stated)]) == 0
    table = evidence.evidence_table(tiny_runs, "tiny", audit_logs_dir=logs)
    beside = {
        name: set(table.loc[table["source"] == f"audit: {name}", "experiment"])
        for name in ("d2z_cos", "d2z_linear")
    }
    assert beside == {
        "d2z_cos": {"d2z-cos-baseline-lr4.8e-3"},
        "d2z_linear": {"d2z-baseline-lr4.8e-3"},
    }
    rows = table[table["source"] == "audit: d2z_cos"]
    assert set(rows["claim"]) == {"group decay_to_zero: d2z-cos-baseline-lr4.8e-3"}
    assert rows.loc[rows["read_at"] == "its own end", "value"].iloc[0] == pytest.approx(4.7)
