#!/usr/bin/env bash
# Time the smoke DAG from a fresh checkout: tokenize Python's docs, draw the indices, train the
# five Table 1 experiments, execute the notebooks (target `main`: Table 1, Figure 1, explore).
# Usage: benchmarks/time_smoke_dag.sh [CORES] [CHECKOUT]   (default: 2 cores, this checkout).
# Works in a scratch copy of CHECKOUT's workflow, with CHECKOUT's src/ first on the path, so the
# checkout's data/ and results/ are untouched. Prints the wall time, the machine's load (the
# 1-minute load average, sampled every 10 s: lowest and highest) and the allocator training used.
set -euo pipefail
cores=${1:-2}
repo=$(cd "${2:-$(dirname "$0")/..}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$repo/Snakefile" "$repo/workflow" "$repo/config" "$repo/notebooks" "$repo/profiles" "$repo/environment.yml" "$work/"
cd "$work"
export PYTHONPATH="$repo/src${PYTHONPATH:+:$PYTHONPATH}"
(while :; do cut -d' ' -f1 /proc/loadavg >> "$work/load"; sleep 10; done) &
sampler=$!
trap 'kill "$sampler" 2>/dev/null; rm -rf "$work"' EXIT
start=$(date +%s.%N)
snakemake main --cores "$cores" --config preset=smoke > "$work/snakemake.log" 2>&1 \
  || { tail -30 "$work/snakemake.log"; exit 1; }
end=$(date +%s.%N)
load=$(sort -g "$work/load" | sed -n '1p;$p' | paste -sd- -)
allocator=$(python3 -c "import ctypes.util as u; print('TCMalloc' if u.find_library('tcmalloc_minimal') else \"glibc's malloc\")")
python3 - "$work/results/table1.csv" <<'PY'
import sys, pandas as pd
print(pd.read_csv(sys.argv[1])[["experiment", "val_loss", "rel_improvement", "status"]].to_string(index=False))
PY
elapsed=$(python3 -c "print(f'{$end - $start:.0f}')")
echo "smoke DAG (target main, $cores cores, $(basename "$repo")): $elapsed s wall, load $load, $allocator"
