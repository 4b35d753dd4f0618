#!/usr/bin/env bash
# The Ray Data example as a test, outside the default test run (installing Ray takes a while):
#   bash scripts/test_ray.sh
# Creates .cache/ray-venv (or $ARENAC_RAY_VENV) (ray[data], onnxruntime and numpy pinned, arenac from ./python),
# runs examples/ray_batch.py on a local cluster with 1 and then 2 workers, checks every row
# against onnxruntime and each worker's peak RSS against its memory limit, and prints the
# rows/s of both runs.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="${ARENAC_RAY_VENV:-$root/.cache/ray-venv}"
rows="${ARENAC_RAY_ROWS:-200000}"

if [[ ! -x "$venv/bin/python" ]]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check \
    "ray[data]==2.60.0" onnxruntime==1.32.0 numpy==2.4.6
"$venv/bin/pip" install --quiet --disable-pip-version-check ./python

for w in 1 2; do
    "$venv/bin/python" examples/ray_batch.py --workers "$w" --rows "$rows" --check \
        --json "$venv/ray-$w.json"
done
"$venv/bin/python" - "$venv/ray-1.json" "$venv/ray-2.json" <<'PY'
import json, sys
one, two = (json.load(open(p)) for p in sys.argv[1:])
print(f"test_ray: 1 worker {one['rows_per_s']} rows/s, 2 workers {two['rows_per_s']} rows/s "
      f"({two['rows_per_s'] / one['rows_per_s']:.2f}x); peak RSS per worker (MiB): "
      f"{one['peak_rss_mib']} / {two['peak_rss_mib']}, limit {two['memory_limit']}")
PY
