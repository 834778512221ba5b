"""A measure of this checkout beside another's: the two alternate, REPEATS times each, so that both
meet the same load; the median of each is printed, and their ratio."""

import statistics
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def add_arguments(parser, repeats: int) -> None:
    parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--against", type=Path, help="another checkout, run side by side")


def print_side_by_side(name: str, measure, args, unit: str) -> None:
    """One line: the median of measure(src) for this checkout's src/ and --against's, and the
    ratio of the two."""
    sources = {"this": REPO / "src"}
    if args.against:
        sources["against"] = args.against.resolve() / "src"
    times = {k: [] for k in sources}
    for _ in range(args.repeats):
        for k, src in sources.items():
            times[k].append(measure(src))
    medians = {k: statistics.median(v) for k, v in times.items()}
    line = f"{name:<32} " + "  ".join(f"{k} {m:.2f} {unit}" for k, m in medians.items())
    if args.against:
        line += f"  ratio {medians['this'] / medians['against']:.2f}"
    print(line)
