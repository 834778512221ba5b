#!/usr/bin/env bash
# The CPU speed-up of the smoke DAG, in one run on one machine: the DAG from a fresh copy at commit REF
# (default 0d4add5, before the CPU fixes) and at this checkout, back to back, and the time of
# `snakemake -n` (the workflow's parse) at this checkout, the median of 5.
# Usage: benchmarks/compare_smoke_dag.sh [--record] [REF] [CORES]   (default: 0d4add5, 2 cores).
#   --record also writes the figures into benchmarks/results/smoke-dag-compare.md
#   (benchmarks/record.py: date, machine, command, load).
set -euo pipefail
# The allocator's settings, where set, head the recorded command (as time_smoke_dag.sh's do).
settings="${REPRO_MALLOC:+REPRO_MALLOC=$REPRO_MALLOC }${GLIBC_TUNABLES:+GLIBC_TUNABLES=$GLIBC_TUNABLES }${LD_PRELOAD:+LD_PRELOAD=$LD_PRELOAD }"
invocation="${settings}benchmarks/compare_smoke_dag.sh $*"
record=
if [ "${1:-}" = --record ]; then record=1; shift; fi
load_start=$(awk '{printf "%.1f / %.1f / %.1f", $1, $2, $3}' /proc/loadavg)
ref=${1:-0d4add5}
cores=${2:-2}
repo=$(cd "$(dirname "$0")/.." && pwd)
summary=$(mktemp)
old=$(mktemp -d)
trap 'git -C "$repo" worktree remove --force "$old"' EXIT
git -C "$repo" worktree add --detach -q "$old" "$ref"
{
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$repo/benchmarks/time_smoke_dag.sh" "$cores" "$old" | tail -1
"$repo/benchmarks/time_smoke_dag.sh" "$cores" "$repo" | tail -1
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

work=$(mktemp -d)
cp -r "$repo/Snakefile" "$repo/workflow" "$repo/config" "$repo/notebooks" "$repo/profiles" "$repo/environment.yml" "$work/"
cd "$work"
export PYTHONPATH="$repo/src${PYTHONPATH:+:$PYTHONPATH}"
for i in 1 2 3 4 5; do
  s=$(date +%s.%N); snakemake -n main --cores "$cores" > /dev/null 2>&1; e=$(date +%s.%N)
  python3 -c "print($e - $s)"
done | sort -n | sed -n 3p | python3 -c "print(f'snakemake -n main: {float(input()):.1f} s (median of 5)')"
rm -rf "$work"
} | tee "$summary"
if [ -n "$record" ]; then
  python3 "$repo/benchmarks/record.py" smoke-dag-compare --title "The smoke DAG beside an older checkout's" \
    --command "${invocation/ --record/}" --load-start "$load_start" < "$summary"
fi
rm -f "$summary"
