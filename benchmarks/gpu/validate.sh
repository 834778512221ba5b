#!/usr/bin/env bash
# Validate and measure the paper's training on this machine (docs/gpu.md), one stage a command:
#
#   benchmarks/gpu/validate.sh window   for a GPU window of 15 minutes, most valuable first: the
#                                       environment and compile toolchain; `repro train` of
#                                       residual_gelu at the paper's shape; baseline and
#                                       residual_gelu timed side by side; a stop and resume; last,
#                                       if time is left, the auto micro-batch probe
#   benchmarks/gpu/validate.sh pairs    the before/after pairs that decide the defaults
#   benchmarks/gpu/validate.sh extras   slow: pytest -m gpu, every Table 1 row, max-autotune
#
# Options after the stage: --out DIR (default benchmarks/results/<gpu-folder>), --device cpu (the stage at the
# tiny preset's size, as CI runs it), --budget SECONDS, --skip STEP..., --micro-batch N.
# Needs no internet and no pip: the modules the training path imports that this Python lacks
# come from benchmarks/gpu/wheelhouse/py<version>/ (wheelhouse.sh; REPRO_WHEELHOUSE names another
# folder), unpacked onto PYTHONPATH.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo"
python=${PYTHON:-python3}
version=$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
# The unpacked wheels, for every process below (CI points REPRO_VALIDATE_SCRATCH elsewhere).
site=${REPRO_VALIDATE_SCRATCH:-$here/.cache}/site-packages-py$version
export PYTHONPATH="$repo/src:$site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# One compile cache for every stage and process: a graph compiled once is loaded after that.
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$here/.cache/inductor}

stage=${1:-}
if ! lacking=$("$python" "$here/packages.py" check "$stage"); then
  wheels=${REPRO_WHEELHOUSE:-$here/wheelhouse}/py$version
  echo "validate: this Python cannot import: $lacking" | tr '\n' ' ' >&2 && echo >&2
  if [ ! -d "$wheels" ]; then
    echo "validate: and there is no $wheels to bring them from: on a machine with internet" \
      "run benchmarks/gpu/wheelhouse.sh $version, and copy benchmarks/gpu/wheelhouse/ here" >&2
    exit 2
  fi
  echo "validate: unpacked from $wheels into $site:" \
    "$("$python" "$here/packages.py" unpack "$wheels" "$site")" >&2
  if ! lacking=$("$python" "$here/packages.py" check "$stage"); then
    echo "validate: still cannot import: $lacking" | tr '\n' ' ' >&2 && echo >&2
    exit 2
  fi
fi
exec "$python" "$here/stages.py" "$@"
