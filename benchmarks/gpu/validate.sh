#!/usr/bin/env bash
# Validate and measure the paper's training on this machine, one stage per command (docs/gpu.md);
# each stage runs on a fresh node from the repository alone and fits one 10-minute command:
#
#   benchmarks/gpu/validate.sh A      environment, the compiled probe's micro-batch, baseline and
#                                     residual_gelu timed (tokens/s, MFU, ratio, peak memory)
#   benchmarks/gpu/validate.sh B      the before/after pairs that decide the defaults
#   benchmarks/gpu/validate.sh C      a paper-size run stopped by a signal and resumed; pytest -m gpu
#   benchmarks/gpu/validate.sh D      optional, slow: every Table 1 row, max-autotune, the probe test
#
# Options after the stage: --out DIR (default results/bench/<gpu>; the stage writes DIR/<stage>.json
# and DIR/<stage>.log only), --micro-batch N (else the stage probes), --device cpu (every stage at
# the tiny preset's size, as CI runs it), --budget SECONDS (per stage, default 510).
# Needs no internet: what the node lacks comes from benchmarks/gpu/wheelhouse/ (wheelhouse.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo"
python=${PYTHON:-python3}
export PYTHONPATH="$repo/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# One compile cache for every stage and process: a graph compiled once is loaded after that.
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$here/.cache/inductor}

if ! "$python" -c "import repro.config" 2>/dev/null; then
  version=$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
  wheels=$here/wheelhouse/py$version
  if [ ! -d "$wheels" ]; then
    echo "validate: this Python cannot import repro.config (its dependencies are missing), and" \
      "there is no $wheels to install them from: on a machine with internet run" \
      "benchmarks/gpu/wheelhouse.sh $version, and copy benchmarks/gpu/wheelhouse/ here" >&2
    exit 2
  fi
  "$python" -m pip install --quiet --no-index --find-links "$wheels" -r "$here/requirements.txt"
  "$python" -c "import repro.config"
fi
exec "$python" "$here/stages.py" "$@"
