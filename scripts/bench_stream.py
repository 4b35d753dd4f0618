"""Streaming throughput: `arenac run --batch` vs onnxruntime looping over the same batches.

Writes a 1 GiB input of the demo model (4,194,304 rows: the shipped samples tiled) and its
labels to /tmp (never commit them), runs arenac with `--batch auto --memory-limit 64MiB`,
then alternates arenac and onnxruntime (2 intra-op threads, batches sliced from a numpy
memmap, outputs into a memmapped .npy) at the batch arenac chose. Prints rows/s and peak RSS.

`--overlap` measures instead how much of the I/O the reader and writer threads hide: it
alternates (a) compute alone: `arenac run --repeat` on one batch of the same rows held in
memory, no output written (rows/s = batch / median time per run), and (b) the streaming run
with the input file evicted from the page cache before each run (posix_fadvise
POSIX_FADV_DONTNEED on that file only, after an fsync; `fincore` shows what stays cached)
and every output written. Prints each round and the medians.

    python scripts/bench_stream.py [--arenac target/release/arenac] [--rounds 2]
        [--overlap [--threads N]]
"""

import argparse
import os
import statistics
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


def arenac(exe, batch, threads=None):
    args = [exe, "run", MODEL, "--input", f"pixels={X}", "--batch", batch, "--output-dir", OUT]
    if threads:
        args += ["--threads", str(threads)]
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


def evict(path):
    """Drops `path`'s pages from the page cache (clean ones: the file was fsynced)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def cached(path):
    """The bytes of `path` in the page cache (`fincore`), or '?'."""
    try:
        out = subprocess.run(["fincore", "-b", "-n", "-o", "RES", path], check=True,
                             capture_output=True, text=True).stdout
        return int(out.split()[0])
    except (OSError, subprocess.CalledProcessError, ValueError, IndexError):
        return "?"


def overlap(exe, rounds, batch, threads):
    """Compute alone vs streaming from a cold input with outputs written, alternating."""
    one = "/tmp/stream_one_batch.npy"
    np.save(one, np.load(X, mmap_mode="r")[:batch])
    alone, streamed = [], []
    for r in range(rounds):
        args = [exe, "run", MODEL, "--input", f"pixels={one}", "--repeat", "20"]
        if threads:
            args += ["--threads", str(threads)]
        out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
        ms = float(re.search(r"time per run: ([\d.]+) ms", out).group(1))
        alone.append(batch / (ms / 1e3))
        evict(X)
        before = cached(X)
        out = arenac(exe, str(batch), threads)
        streamed.append(float(re.search(r"\((\d+) rows/s\)", out).group(1)))
        print(f"round {r + 1}: compute alone {alone[-1]:,.0f} rows/s ({ms} ms per batch of "
              f"{batch}); streamed, input cached {before} bytes before the run, outputs "
              f"written: {streamed[-1]:,.0f} rows/s", flush=True)
    a, s = statistics.median(alone), statistics.median(streamed)
    print(f"threads {threads or 'all'}: medians over {rounds} rounds: compute alone {a:,.0f} rows/s, streamed {s:,.0f} "
          f"rows/s ({100 * s / a:.0f}% of compute alone)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arenac", default="target/release/arenac")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--overlap", action="store_true")
    ap.add_argument("--threads", type=int, help="with --overlap: compute threads (default: all)")
    a = ap.parse_args()
    make_data()
    first = arenac(a.arenac, "auto")
    print(first)
    batch = re.search(r"batch:\s+(\d+) rows", first).group(1)
    if a.overlap:
        overlap(a.arenac, a.rounds, int(batch), a.threads)
        return
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
