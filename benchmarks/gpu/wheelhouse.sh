#!/usr/bin/env bash
# On a machine with internet: the wheels the GPU path needs beyond a GPU node's own packages
# (requirements.txt beside this script, with their dependencies), for a Python version and Linux
# x86-64, into benchmarks/gpu/wheelhouse/py<VERSION>/. Copy that folder along to the node (it is
# git-ignored); validate.sh installs from it with pip --no-index. docs/gpu.md says more.
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
