"""Streaming throughput: `arenac run --batch` vs onnxruntime looping over the same batches.

Writes a 1 GiB input of the demo model (4,194,304 rows: the shipped samples tiled) and its
labels to /tmp (never commit them), runs arenac with `--batch auto --memory-limit 64MiB`,
then alternates arenac and onnxruntime (2 intra-op threads, batches sliced from a numpy
memmap, outputs into a memmapped .npy) at the batch arenac chose. Prints rows/s and peak RSS.

    python scripts/bench_stream.py [--arenac target/release/arenac] [--rounds 2]
"""

import argparse
import re
import resource
import subprocess
import time

import numpy as np
import onnxruntime as ort

MODEL = "models/digits/digits.onnx"
ROWS = 1 << 22
X, LABELS, OUT = "/tmp/stream_big.npy", "/tmp/stream_big_labels.npy", "/tmp/stream_out"


def make_data():
    s, l = np.load("models/digits/samples.npy"), np.load("models/digits/labels.npy")
    a = np.lib.format.open_memmap(X, mode="w+", dtype=np.float32, shape=(ROWS, 64))
    for i in range(0, ROWS, 1 << 16):
        a[i : i + (1 << 16)] = s[np.arange(i, i + (1 << 16)) % 100]
    a.flush()
    np.save(LABELS, l[np.arange(ROWS) % 100].astype(np.int64))


def arenac(exe, batch):
    args = [exe, "run", MODEL, "--input", f"pixels={X}", "--batch", batch, "--output-dir", OUT]
    if batch == "auto":
        args += ["--memory-limit", "64MiB", "--labels", LABELS]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return out


def ort_loop(batch):
    x = np.load(X, mmap_mode="r")
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    s = ort.InferenceSession(MODEL, so, providers=["CPUExecutionProvider"])
    out = np.lib.format.open_memmap("/tmp/stream_ort_out.npy", mode="w+", dtype=np.float32,
                                    shape=(ROWS, 10))
    t = time.perf_counter()
    for i in range(0, ROWS, batch):
        out[i : i + batch] = s.run(None, {"pixels": np.ascontiguousarray(x[i : i + batch])})[0]
    out.flush()
    return ROWS / (time.perf_counter() - t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arenac", default="target/release/arenac")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    make_data()
    first = arenac(a.arenac, "auto")
    print(first)
    batch = re.search(r"batch:\s+(\d+) rows", first).group(1)
    for _ in range(a.rounds):
        out = arenac(a.arenac, batch)
        rate = re.search(r"\((\d+) rows/s\)", out).group(1)
        peak = re.search(r"peak RSS: .*\((.*)\) \(VmHWM\)", out).group(1)
        print(f"arenac      batch {batch}: {rate} rows/s, peak RSS {peak}")
        r = ort_loop(int(batch))
        print(f"onnxruntime batch {batch}: {r:.0f} rows/s")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"onnxruntime process peak RSS: {peak:.0f} MiB (the memmapped input stays resident)")


if __name__ == "__main__":
    main()
