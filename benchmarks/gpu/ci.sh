#!/usr/bin/env bash
# CI: the GPU validation's CPU mode end to end (docs/gpu.md), in a fresh virtual environment that
# holds only a GPU node's packages (node-packages.txt) plus what validate.sh installs itself from
# the wheelhouse: every stage must run, write its JSON, and have no failed step.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet -r "$here/node-packages.txt"
version=$("$work/venv/bin/python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
"$here/wheelhouse.sh" "$version" >/dev/null
status=0
for stage in A B C; do
  PYTHON="$work/venv/bin/python" REPRO_VALIDATE_SCRATCH="$work/scratch" \
    "$here/validate.sh" "$stage" --device cpu --out "$work/results" || status=1
done
for name in A A-sweep-auto B B-table1 C; do
  [ -s "$work/results/$name.json" ] || { echo "gpu validation: no $name.json" >&2; status=1; }
done
echo "gpu validation (CPU mode): $(ls "$work/results" | tr '\n' ' ')"
exit "$status"
