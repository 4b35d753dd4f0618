"""Batch inference with Ray Data and arenac: one InferenceSession per Ray worker.

    python examples/ray_batch.py [--workers 2] [--rows 20000] [--memory-limit 512MiB]

Starts a local Ray cluster (``ray.init(num_cpus=workers)``), or joins a running one with
``--address auto`` / ``--address ray://head:10001``. ``map_batches`` runs the callable class
``ArenacPredictor`` as a pool of actors (``compute=ActorPoolStrategy(size=workers)``): each
actor compiles the model once, with its own ``memory_limit`` (arenac's cap on arena +
weights, enforced when compiling; Ray's ``memory=`` only reserves room for placement). Each
actor runs on 1 thread (Ray sets ``OMP_NUM_THREADS`` to the CPUs it assigns, and arenac
follows it).

Prints rows/s and each worker's peak RSS; ``--check`` compares every row with onnxruntime
(``scripts/test_ray.sh`` runs it that way).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import time

import numpy as np
import ray

ROOT = pathlib.Path(__file__).resolve().parents[1]
MODEL = ROOT / "models" / "digits" / "digits.onnx"


class ArenacPredictor:
    """One arenac session per Ray actor; ``__call__`` runs one batch of rows."""

    def __init__(self, model_path: str, memory_limit: str):
        import arenac

        self.sess = arenac.InferenceSession(model_path, memory_limit=memory_limit, threads=1)
        self.input = self.sess.get_inputs()[0].name
        self.memory_limit = memory_limit

    def __call__(self, batch: dict) -> dict:
        x = np.ascontiguousarray(batch["data"], dtype=np.float32)
        (probs,) = self.sess.run(None, {self.input: x})
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        n = len(x)
        return {
            "probs": probs,
            "pid": np.full(n, os.getpid()),
            "peak_rss": np.full(n, rss),
            "arena_bytes": np.full(n, self.sess.arena_bytes),
        }


def parse_bytes(text: str) -> int:
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    for u, m in units.items():
        if text.endswith(u):
            return int(float(text[: -len(u)]) * m)
    return int(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--batch-size", type=int, default=500)
    ap.add_argument("--memory-limit", default="512MiB", help="arenac's cap per worker")
    ap.add_argument("--address", default=None, help="a running cluster (default: start a local one)")
    ap.add_argument("--model", default=str(MODEL))
    ap.add_argument("--check", action="store_true", help="compare every row with onnxruntime")
    ap.add_argument("--json", default=None, help="write the figures to this file")
    args = ap.parse_args()

    if args.address:
        ray.init(address=args.address)
    else:
        ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
    samples = np.load(ROOT / "models" / "digits" / "samples.npy")
    reps = -(-args.rows // len(samples))
    data = np.tile(samples, (reps, 1))[: args.rows].astype(np.float32)
    # Several blocks, so that every worker gets some; rows come back in order.
    ray.data.DataContext.get_current().execution_options.preserve_order = True
    ds = ray.data.from_numpy(list(np.array_split(data, args.workers * 8)))

    start = time.perf_counter()
    out = ds.map_batches(
        ArenacPredictor,
        fn_constructor_args=(args.model, args.memory_limit),
        batch_size=args.batch_size,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=args.workers),
        num_cpus=1,
        memory=parse_bytes(args.memory_limit),
    ).take_all()
    elapsed = time.perf_counter() - start

    probs = np.stack([r["probs"] for r in out])
    pids = sorted({int(r["pid"]) for r in out})
    peak = {}
    for r in out:
        peak[int(r["pid"])] = max(peak.get(int(r["pid"]), 0), int(r["peak_rss"]))
    limit = parse_bytes(args.memory_limit)
    figures = {
        "workers": args.workers,
        "rows": len(out),
        "seconds": round(elapsed, 3),
        "rows_per_s": round(len(out) / elapsed, 1),
        "worker_pids": pids,
        "peak_rss_mib": {str(p): round(v / 2**20, 1) for p, v in peak.items()},
        "arena_bytes": int(out[0]["arena_bytes"]),
        "memory_limit": args.memory_limit,
    }
    print(json.dumps(figures, indent=1))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(figures))
    if any(v > limit for v in peak.values()):
        raise SystemExit(f"a worker's peak RSS passed its memory limit {args.memory_limit}: {peak}")

    if args.check:
        import onnxruntime as ort

        ref = ort.InferenceSession(args.model, providers=["CPUExecutionProvider"])
        # preserve_order keeps the rows in the input's order.
        (expected,) = ref.run(None, {ref.get_inputs()[0].name: data})
        np.testing.assert_allclose(probs, expected, rtol=1e-4, atol=1e-5)
        print(f"check: {len(out)} rows equal onnxruntime's (rtol 1e-4)")


if __name__ == "__main__":
    main()
