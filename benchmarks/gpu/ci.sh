#!/usr/bin/env bash
# CI: what a GPU window runs, rehearsed on CPU under a GPU node's own packages (docs/gpu.md): a
# fresh virtual environment of node-packages.txt (the node's torch) plus what validate.sh installs
# from the wheelhouse. First the GPU path compiled on CPU (tests/test_gpu.py with
# REPRO_TEST_COMPILED_CPU=1: inductor, bf16 autocast, fused AdamW, the chunked loss, the probe's
# pass), then every stage of validate.sh in CPU mode: each must write its JSON with no failed step.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
python=$work/venv/bin/python
"$python" -m pip install --quiet -r "$here/node-packages.txt"
version=$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
"$here/wheelhouse.sh" "$version" >/dev/null
"$python" -m pip install --quiet --no-index --find-links "$here/wheelhouse/py$version" \
  -r "$here/requirements.txt"
status=0
cd "$repo"
REPRO_TEST_COMPILED_CPU=1 TORCHINDUCTOR_CACHE_DIR="$work/inductor" PYTHONPATH=src \
  "$python" -m pytest tests/test_gpu.py -q -p no:cacheprovider || status=1
for stage in A B C D; do
  PYTHON=$python REPRO_VALIDATE_SCRATCH="$work/scratch" \
    "$here/validate.sh" "$stage" --device cpu --out "$work/results" || status=1
  [ -s "$work/results/$stage.json" ] || { echo "gpu validation: no $stage.json" >&2; status=1; }
done
echo "gpu validation (CPU mode, torch $("$python" -c 'import torch; print(torch.__version__)')):" \
  "$(ls "$work/results" | tr '\n' ' ')"
exit "$status"
