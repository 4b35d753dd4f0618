#!/usr/bin/env bash
# Local use: imports every *.onnx in DIR with arenac, compares every value's type with
# onnx.shape_inference, compiles it with the JIT, runs it on deterministic inputs and compares
# the outputs with onnxruntime's (rtol 1e-3, atol 1e-4); prints one line per model (imports OK
# / first error, counts, max |diff|). ARENAC_MODEL_JIT=0 skips the JIT run; ARENAC_MODEL_EVAL=1
# also compares the reference evaluation.
#
# Usage: bash scripts/check-models.sh DIR ['N=8;x=1x128x256']
# The optional second argument binds shapes (`--shape`-style specs, `;`-separated) for every
# model in DIR. Runs the ignored `model_dir` test of tests/models.rs.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
    sed -n '2,10p' "$0" >&2
    exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$(cd "$1" && pwd)"
py="$(bash "$root/scripts/setup-venv.sh")"
cd "$root"
jit="${ARENAC_MODEL_JIT-1}"
[[ "$jit" == 0 ]] && jit=""
ARENAC_MODEL_DIR="$dir" ARENAC_MODEL_SHAPES="${2:-}" ARENAC_PYTHON="$py" ARENAC_MODEL_JIT="$jit" \
    cargo test -q -p arenac-tests --test models -- --ignored model_dir --nocapture
