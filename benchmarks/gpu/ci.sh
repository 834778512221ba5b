#!/usr/bin/env bash
# CI: what a GPU window runs, rehearsed on CPU under a GPU node's own packages (docs/gpu.md): a
# fresh virtual environment of node-packages.txt (the node's torch; no jsonschema, as on the node)
# with the wheelhouse beside it. First the one command of a window, validate.sh window in CPU
# mode, which must find what the environment lacks and bring it from the wheelhouse without pip;
# then the GPU path compiled on CPU (tests/core/training/test_gpu.py and test_micro_batch_probe.py with
# REPRO_TEST_COMPILED_CPU=1: inductor, bf16 autocast, fused AdamW, the chunked loss, the probe
# compiling once) on the modules it brought, with the levers' tests and the window's failures
# forced; then the pairs, extras and dag stages (the dag's Snakemake, papermill and kernel from the
# wheelhouse). Each stage must write its JSON with no failed step,
# and, where all passed, no line of their output may read as a warning or error (steps.py).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
python=$work/venv/bin/python
"$python" -m pip install --quiet -r "$here/node-packages.txt"
if "$python" -c "import jsonschema" 2>/dev/null; then
  echo "gpu validation: the node's package set holds jsonschema: the rehearsal would not be" \
    "the node's" >&2
  exit 1
fi
version=$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
"$here/wheelhouse.sh" "$version" >/dev/null
export PYTHON=$python REPRO_VALIDATE_SCRATCH=$work/scratch TORCHINDUCTOR_CACHE_DIR=$work/inductor
status=0
log=$work/output.log
cd "$repo"
"$here/validate.sh" window --device cpu --out "$work/results" 2>&1 | tee -a "$log" || status=1
files=$(ls "$work/results" | wc -l)
[ "$files" -le 8 ] || { echo "gpu validation: $files files, more than a window brings back" >&2; status=1; }
# The GPU's compiled path on CPU; then what only a GPU would show, forced: the real graph failing
# to compile, a leg left out, the resume's tolerance, every lever trained and recorded.
forced="fails_to_compile or did_not_finish or tolerance"
REPRO_TEST_COMPILED_CPU=1 PYTHONPATH="src:$work/scratch/site-packages-py$version" \
  "$python" -m pytest tests/core/training/test_gpu.py tests/core/training/test_micro_batch_probe.py tests/core/training/test_levers.py \
  tests/benchmarks/test_gpu_validation.py -m "" \
  -k "not test_gpu_validation or $forced" -q -p no:cacheprovider 2>&1 | tee -a "$log" || status=1
for stage in pairs extras dag; do
  "$here/validate.sh" "$stage" --device cpu --out "$work/results" 2>&1 | tee -a "$log" || status=1
done
if [ "$status" -eq 0 ] && ! "$python" "$here/steps.py" "$log" >&2; then
  echo "gpu validation: the lines above read as warnings or errors where nothing failed" >&2
  status=1
fi
for stage in window pairs extras dag; do
  [ -s "$work/results/$stage.json" ] || { echo "gpu validation: no $stage.json" >&2; status=1; }
done
echo "gpu validation (CPU mode, torch $("$python" -c 'import torch; print(torch.__version__)')):" \
  "$(ls "$work/results" | tr '\n' ' ')"
exit "$status"
