"""The result tables' CSVs: counts as integers, other numbers to 9 significant digits
(repro.files.CSV_FLOAT_FORMAT, as results/README.md says); metrics.csv keeps its full repr."""

import csv
import re

from repro.cli.assembly import main

DIGITS = re.compile(r"[0-9]")


def significant_digits(text: str) -> int:
    mantissa = text.lower().split("e")[0].lstrip("-+")
    return len(DIGITS.findall(mantissa.replace(".", "").lstrip("0")))


def test_the_evidence_table_writes_counts_as_integers_and_numbers_to_nine_digits(
    tiny_runs, tmp_path
):
    out = tmp_path / "evidence.csv"
    argv = ["evidence", "--preset", "tiny", "--runs", str(tiny_runs), "--seeds", "1"]
    assert main([*argv, "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    counts = [r["n_seeds"] for r in rows if r["n_seeds"]]
    assert counts and set(counts) == {"1"}  # not 1.0
    values = [r["value"] for r in rows if r["value"] and r["source"] == "ours"]
    assert values and max(map(significant_digits, values)) <= 9
    # 5.0 - 0.07 is 4.93 to 9 digits, though not in binary: no 4.9299999999999997
    assert "4.93" in {r["value"] for r in rows if r["experiment"] == "resgelu-lr3e-3"}
