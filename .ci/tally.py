"""The one line CI ends with: every test that its pytest runs ran, totalled.

    python .ci/tally.py REPORT...

A REPORT ending in .xml is pytest's JUnit XML (`--junitxml`); any other is a command's output,
whose pytest summary lines ("12 passed, 1 skipped, 433 deselected in 9.81s") are added up: the
GPU validation runs its pytest inside its own script. Errors count as failed. Exits 1 when a test
failed or when no test ran at all.

The line has the form of pytest's own summary ("== N passed, N failed, N skipped in Ts (...) =="),
so that whatever reads a log's last pytest summary reads the total, not the last suite's.
"""

import re
import sys
from pathlib import Path
from xml.etree import ElementTree

# pytest's last line, with or without its '=' rule and whatever prefix a log adds.
SUMMARY = re.compile(r"(\d+ \w+(?:, \d+ \w+)*) in (\d+(?:\.\d+)?)s\b")
KINDS = {
    "passed": "passed",
    "failed": "failed",
    "error": "failed",
    "errors": "failed",
    "skipped": "skipped",
}


def from_junit(path: Path) -> dict[str, float]:
    """A file that fails to import is a testcase with an error, like a failed fixture."""
    counts = dict.fromkeys(("passed", "failed", "skipped", "seconds"), 0)
    for suite in ElementTree.parse(path).iter("testsuite"):
        counts["seconds"] += float(suite.get("time", 0))
    for case in ElementTree.parse(path).iter("testcase"):
        tags = {child.tag for child in case}
        kind = "failed" if tags & {"failure", "error"} else "skipped" if "skipped" in tags else None
        counts[kind or "passed"] += 1
    return counts


def from_output(path: Path) -> dict[str, float]:
    counts = dict.fromkeys(("passed", "failed", "skipped", "seconds"), 0)
    for line in path.read_text(errors="replace").splitlines():
        if match := SUMMARY.search(line):
            counts["seconds"] += float(match.group(2))
            for part in match.group(1).split(", "):
                n, kind = part.split(" ")
                if kind in KINDS:
                    counts[KINDS[kind]] += int(n)
    return counts


def main(reports: list[str]) -> int:
    total = dict.fromkeys(("passed", "failed", "skipped", "seconds"), 0)
    for report in map(Path, reports):
        if not report.exists():  # a suite that did not run (an earlier stage failed)
            continue
        counts = from_junit(report) if report.suffix == ".xml" else from_output(report)
        for kind, n in counts.items():
            total[kind] += n
    counts = f"{total['passed']} passed, {total['failed']} failed, {total['skipped']} skipped"
    print(f"==== {counts} in {total['seconds']:.2f}s (ci: every suite) ====")
    return 1 if total["failed"] or not total["passed"] + total["skipped"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
