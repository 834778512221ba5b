#!/usr/bin/env bash
# Time a workflow target from a fresh checkout: by default the smoke DAG's `main` (tokenize Python's
# docs, draw the indices, train the five Table 1 experiments, execute the notebooks: Table 1,
# Figure 1, explore); any target at any preset otherwise (a group's table, e.g. results/tuning.csv).
# Usage: benchmarks/time_smoke_dag.sh [--record] [CORES] [CHECKOUT] [TARGET] [PRESET]
#   (default: 2 cores, this checkout, main, smoke). --record also writes the figures into
#   a page per preset of benchmarks/results/ (benchmarks/record.py: date, machine, command, load).
# Works in a scratch copy of CHECKOUT's workflow, with CHECKOUT's src/ first on the path, so the
# checkout's data/ and results/ are untouched; the time includes the data preparation a fresh copy
# needs. Prints the wall time, the CPU time of the whole DAG (user + system of every process it
# ran: unlike the wall time, not inflated by other jobs), the machine's load (the 1-minute load
# average, sampled every 10 s: lowest and highest) and the allocator training used (each run.json's
# `malloc`). REPRO_MALLOC=glibc keeps glibc's malloc (repro.runtime.allocator);
# REPRO_MALLOC=glibc-hugepages GLIBC_TUNABLES=glibc.malloc.hugetlb=1 is what training restarts
# under where TCMalloc is not installed. These and LD_PRELOAD, where set, head the recorded
# command, so that each allocator's figures are a section of their own.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
settings="${REPRO_MALLOC:+REPRO_MALLOC=$REPRO_MALLOC }${GLIBC_TUNABLES:+GLIBC_TUNABLES=$GLIBC_TUNABLES }${LD_PRELOAD:+LD_PRELOAD=$LD_PRELOAD }"
invocation="${settings}benchmarks/time_smoke_dag.sh $*"
record=
if [ "${1:-}" = --record ]; then record=1; shift; fi
load_start=$(awk '{printf "%.1f / %.1f / %.1f", $1, $2, $3}' /proc/loadavg)
cores=${1:-2}
repo=$(cd "${2:-$(dirname "$0")/..}" && pwd)
target=${3:-main}
preset=${4:-smoke}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$repo/Snakefile" "$repo/workflow" "$repo/config" "$repo/notebooks" "$repo/profiles" "$repo/environment.yml" "$work/"
cd "$work"
export PYTHONPATH="$repo/src${PYTHONPATH:+:$PYTHONPATH}"
(while :; do cut -d' ' -f1 /proc/loadavg >> "$work/load"; sleep 10; done) &
sampler=$!
trap 'kill "$sampler" 2>/dev/null; rm -rf "$work"' EXIT
/usr/bin/time -o "$work/time" -f "%e %U %S" \
  snakemake "$target" --cores "$cores" --config preset="$preset" > "$work/snakemake.log" 2>&1 \
  || { tail -30 "$work/snakemake.log"; exit 1; }
load=$(sort -g "$work/load" | sed -n '1p;$p' | paste -sd- -)
allocator=$(python3 - <<'PY'
import json, pathlib
used = {json.loads(p.read_text()).get("malloc") for p in pathlib.Path("results/runs").glob("*/*/run.json")}
names = {"tcmalloc": "TCMalloc", "glibc": "glibc's malloc", "glibc-hugepages": "glibc's malloc with huge pages"}
print(" and ".join(sorted(names.get(m, str(m)) for m in used)) or "no run trained")
PY
)
{
  if [ -f results/table1.csv ]; then
    python3 - results/table1.csv <<'PY'
import sys, pandas as pd
print(pd.read_csv(sys.argv[1])[["experiment", "val_loss", "rel_improvement", "status"]].to_string(index=False))
PY
  fi
  read -r wall user sys < "$work/time"
  figures=$(python3 -c "print(f'{$wall:.0f} s wall, {$user + $sys:.0f} s CPU (user + system)')")
  echo "$target at $preset ($cores cores, $(basename "$repo")): $figures, load $load, $allocator"
} | tee "$work/summary"
if [ -n "$record" ]; then
  python3 "$here/record.py" "dag-$preset" --title "The workflow's targets at the $preset preset, timed" \
    --command "${invocation/ --record/}" --load-start "$load_start" < "$work/summary"
fi
