#!/usr/bin/env bash
# On a machine with internet: the wheels of what the training path imports that a GPU node's own
# packages lack (requirements.txt beside this script: jsonschema and its dependencies, about
# 0.6 MB), for a Python version and Linux x86-64, into benchmarks/gpu/wheelhouse/py<VERSION>/.
# Copy that folder along to the node (it is git-ignored); validate.sh unpacks from it what the
# node lacks, without pip. docs/gpu.md says more.
#
#   benchmarks/gpu/wheelhouse.sh [PYTHON_VERSION]      (default 3.12, the GPU nodes')
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=${1:-3.12}
platforms=(manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64)
python3 -m pip download --quiet --only-binary=:all: --implementation cp \
    --python-version "$version" "${platforms[@]/#/--platform=}" \
    -r "$here/requirements.txt" -d "$here/wheelhouse/py$version"
ls "$here/wheelhouse/py$version"
