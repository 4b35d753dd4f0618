#!/usr/bin/env bash
# The test command: `bash scripts/test.sh` (extra arguments go to `cargo test`).
#
# Sets up .venv (pinned onnx/onnxruntime/numpy/scikit-learn, idempotent), generates the
# fixture ONNX files when scripts/fixtures_to_onnx.py exists, generates the light models with
# random weights and onnxruntime's outputs for them (scripts/randomize_light.py into
# .cache/light-random, ~1.3 GB with VGG-19, about a minute the first time, cached after), points
# the tests at the Python tools and the models, and runs the whole workspace's tests with
# snapshot updates off; with no arguments, then builds and installs the Python package
# (python/) into the venv and runs its pytest suite.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

py="$(bash scripts/setup-venv.sh)"
export ARENAC_PYTHON="$py"

ARENAC_ONNX_LIGHT_DIR="$("$py" -c 'import os, onnx; print(os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light"))')"
if [[ ! -f "$ARENAC_ONNX_LIGHT_DIR/light_resnet50.onnx" ]]; then
    echo "test.sh: no light models in $ARENAC_ONNX_LIGHT_DIR" >&2
    exit 1
fi
export ARENAC_ONNX_LIGHT_DIR

if [[ -f scripts/fixtures_to_onnx.py ]]; then
    "$py" scripts/fixtures_to_onnx.py .cache/fixtures-onnx
    export ARENAC_FIXTURE_ONNX_DIR="$root/.cache/fixtures-onnx"
fi

"$py" scripts/randomize_light.py "$ARENAC_ONNX_LIGHT_DIR" .cache/light-random
export ARENAC_LIGHT_RANDOM_DIR="$root/.cache/light-random"

# ONNX's backend node test cases (about 55 MB, a few seconds the first time).
"$py" scripts/gen_conformance.py .cache/onnx-node
export ARENAC_ONNX_NODE_DIR="$root/.cache/onnx-node"

export INSTA_UPDATE=no
cargo test --workspace "$@"

# The Python package (python/) in the full run only (arguments pick cargo tests): built by
# maturin in release, as users get it (measured on a busy 2-core machine: 5.4 min of CPU for a
# cold build; the dev profile took 7.9 min of CPU and ran the tests 5x slower), installed into
# the venv, then its pytest suite (python/tests) against onnxruntime and the CLI built above.
if [[ $# -eq 0 ]]; then
    "$py" -m pip install --quiet --disable-pip-version-check ./python >&2
    ARENAC_BIN="$root/target/debug/arenac" "$py" -m pytest -q -p no:cacheprovider python/tests
fi
