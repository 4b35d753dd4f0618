"""Throughput of one arenac.InferenceSession from 1 and 2 Python threads: the session pool
(each thread its own arena) against max_sessions=1 (runs take turns), with onnxruntime's
InferenceSession run the same way for comparison.

    python scripts/bench_py_threads.py MODEL.onnx [--runs 40] [--rounds 3]

Each session runs on 1 intra-op thread, so 2 Python threads can use 2 cores. Configurations
alternate within each round (the machine may be shared); the best round of each is printed.
"""

import argparse
import threading
import time

import numpy as np


def throughput(run, feed, threads, runs):
    def work():
        for _ in range(runs):
            run(feed)

    ts = [threading.Thread(target=work) for _ in range(threads)]
    start = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return threads * runs / (time.perf_counter() - start)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    import arenac
    import onnxruntime as ort

    pool = arenac.InferenceSession(args.model, threads=1)
    turns = arenac.InferenceSession(args.model, threads=1, max_sessions=1)
    o = ort.SessionOptions()
    o.intra_op_num_threads = 1
    ref = ort.InferenceSession(args.model, o, providers=["CPUExecutionProvider"])
    inp = ref.get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in inp.shape]
    feed = {inp.name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
    configs = {
        "arenac pool, 1 thread": (pool, 1),
        "arenac pool, 2 threads": (pool, 2),
        "arenac max_sessions=1, 2 threads": (turns, 2),
        "onnxruntime, 1 thread": (ref, 1),
        "onnxruntime, 2 threads": (ref, 2),
    }
    for s, _ in configs.values():
        s.run(None, feed)
    best = {k: 0.0 for k in configs}
    for _ in range(args.rounds):
        for k, (s, n) in configs.items():
            best[k] = max(best[k], throughput(lambda f, s=s: s.run(None, f), feed, n, args.runs))
    for k, v in best.items():
        print(f"{k:36s} {v:9.1f} runs/s")
    print(f"arenac pool 2 threads / 1 thread: {best['arenac pool, 2 threads'] / best['arenac pool, 1 thread']:.2f}x")
    print(f"arenac max_sessions=1 2 threads / 1 thread: {best['arenac max_sessions=1, 2 threads'] / best['arenac pool, 1 thread']:.2f}x")
    print(f"arenac arenas used by the pool: {pool.arenas}")


if __name__ == "__main__":
    main()
