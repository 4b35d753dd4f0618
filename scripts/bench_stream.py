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
and every output written. Each round also times **I/O alone**: the cold file read through
(`dd bs=16M`, the same eviction first), so a reader can see which side bounds the stream. On
the demo model the I/O is the bound (its compute runs faster than this disk reads), so the
streaming run cannot reach compute alone there; `--hidden H` runs the same rows through a
heavier model instead (64 -> H -> H -> 10 Gemms with Relus and a Softmax, seeded random
weights, built here with onnx.helper), where I/O is a part of the time but not all of it:
that shows how much of the I/O the overlap hides. Prints each round and the medians.

    python scripts/bench_stream.py [--arenac target/release/arenac] [--rounds 2]
        [--overlap [--threads N] [--hidden H]]
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


def make_mlp(hidden):
    """A 64 -> hidden -> hidden -> 10 MLP on the demo model's input, seeded random weights."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    dims = [64, hidden, hidden, 10]
    inits, nodes, prev = [], [], "pixels"
    for i, (k, n) in enumerate(zip(dims, dims[1:])):
        w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"),
                  numpy_helper.from_array(np.zeros(n, np.float32), f"b{i}")]
        nodes.append(helper.make_node("Gemm", [prev, f"w{i}", f"b{i}"], [f"g{i}"]))
        prev = f"g{i}"
        if n != 10:
            nodes.append(helper.make_node("Relu", [prev], [f"r{i}"]))
            prev = f"r{i}"
    nodes.append(helper.make_node("Softmax", [prev], ["probs"], axis=1))
    g = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 10])],
        inits)
    path = f"/tmp/stream_mlp_{hidden}.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def io_alone(path):
    """Seconds to read `path` cold (evicted first) with dd in 16 MiB blocks."""
    evict(path)
    t = time.perf_counter()
    subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=16M"], check=True,
                   capture_output=True)
    return time.perf_counter() - t


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
    alone, streamed, io = [], [], []
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
        io.append(ROWS / io_alone(X))
        print(f"round {r + 1}: compute alone {alone[-1]:,.0f} rows/s ({ms} ms per batch of "
              f"{batch}); streamed, input cached {before} bytes before the run, outputs "
              f"written: {streamed[-1]:,.0f} rows/s; I/O alone (cold dd read of the input) "
              f"{io[-1]:,.0f} rows/s", flush=True)
    a, s, i = statistics.median(alone), statistics.median(streamed), statistics.median(io)
    serial = 1 / (1 / a + 1 / i)
    print(f"model {MODEL}, threads {threads or 'all'}: medians over {rounds} rounds: compute "
          f"alone {a:,.0f} rows/s, I/O alone {i:,.0f} rows/s (the input read cold), streamed "
          f"{s:,.0f} rows/s = {100 * s / a:.0f}% of compute alone, {100 * s / min(a, i):.0f}% "
          f"of the slower side (no overlap at all would give {serial:,.0f} rows/s, "
          f"{100 * serial / a:.0f}%)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arenac", default="target/release/arenac")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--overlap", action="store_true")
    ap.add_argument("--threads", type=int, help="with --overlap: compute threads (default: all)")
    ap.add_argument("--hidden", type=int,
                    help="with --overlap: run a 64 -> H -> H -> 10 MLP instead of the demo model")
    a = ap.parse_args()
    if a.hidden:
        global MODEL
        MODEL = make_mlp(a.hidden)
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
