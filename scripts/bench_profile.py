"""Where the single-thread time goes, per op type and kernel path: arenac's `run --profile` and
onnxruntime's own profiler on the same model, both pinned to one core (`taskset -c 0`), each
node's *minimum* over the runs: on a machine shared with builds, a node longer than a
scheduler tick is often preempted once (its median then carries a whole 4 ms tick), while its
minimum is its time on the CPU. Used by `scripts/bench.py --profile`; alone:

    python scripts/bench_profile.py ARENAC_BIN MODEL.onnx [--runs 30]

prints the markdown tables for one model.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict

ORT_FUSED = {"FusedConv": "Conv", "FusedGemm": "Gemm", "FusedMatMul": "MatMul"}


def pinned(argv):
    return ["taskset", "-c", "0", *argv]


def node_times(events, key):
    """{node name: (group key, minimum dur µs, flops)} from `_kernel_time` events."""
    durs, meta = defaultdict(list), {}
    for e in events:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
            continue
        a = e.get("args", {})
        durs[e["name"]].append(a.get("dur_ns", e["dur"] * 1000) / 1000)
        meta[e["name"]] = (key(a), a.get("flops", 0))
    return {n: (meta[n][0], min(d), meta[n][1]) for n, d in durs.items()}


def group(medians):
    """Rows (key, ms, share, calls, GFLOP/s) by time, most first."""
    total = sum(m[1] for m in medians.values()) or 1.0
    acc = defaultdict(lambda: [0.0, 0, 0])
    for key, us, flops in medians.values():
        acc[key][0] += us
        acc[key][1] += 1
        acc[key][2] += flops
    rows = [(k, us / 1e3, us / total, calls, flops / us / 1e3 if us else 0.0)
            for k, (us, calls, flops) in acc.items()]
    return sorted(rows, key=lambda r: -r[1]), total / 1e3


def arenac_profile(arenac_bin, model, runs):
    with tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "trace.json")
        subprocess.run(
            pinned([arenac_bin, "run", model, "--repeat", str(runs),
                    "--profile", trace]),
            check=True, capture_output=True, text=True)
        with open(trace) as f:
            events = json.load(f)
    runs_ms = [e["args"]["dur_ns"] / 1e6 for e in events if e.get("name") == "model_run"]
    return events, statistics.median(runs_ms)


def ort_profile_child(model, runs):
    """In a pinned child: onnxruntime (one thread) with its profiler; prints the trace path."""
    import numpy as np
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.enable_profiling = True
    opts.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "ort")
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(5)
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        if i.type == "tensor(float)":
            feeds[i.name] = rng.uniform(-1, 1, size=shape).astype(np.float32)
        else:
            feeds[i.name] = np.zeros(shape, dtype=np.int64)
    for _ in range(runs + 3):
        sess.run(None, feeds)
    print(sess.end_profiling())


def ort_profile(model, runs):
    path = subprocess.run(
        pinned([sys.executable, os.path.abspath(__file__), "--ort-child", model, str(runs)]),
        check=True, capture_output=True, text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"}).stdout.strip().splitlines()[-1]
    with open(path) as f:
        events = json.load(f)
    os.remove(path)
    # The first three runs are the warm-up: drop their events.
    starts = sorted(e["ts"] for e in events if e.get("name") == "model_run")
    cut = starts[3] if len(starts) > 3 else 0
    events = [e for e in events if e.get("ts", 0) >= cut]
    runs_ms = [e["dur"] / 1e3 for e in events if e.get("name") == "model_run"]
    return events, statistics.median(runs_ms)


def fmt_rows(rows, with_gflops):
    out = []
    for k, ms, share, calls, gf in rows:
        g = f" {gf:.1f} |" if with_gflops else ""
        out.append(f"| {k} | {ms:.3f} | {share * 100:.1f}% | {calls} |{g}")
    return out


def breakdown(arenac_bin, model, runs, top=12):
    """Markdown for one model: arenac by op type and by kernel path, onnxruntime by op type."""
    a_events, a_run = arenac_profile(arenac_bin, model, runs)
    o_events, o_run = ort_profile(model, runs)
    a_op, a_nodes = group(node_times(a_events, lambda a: a["op_name"]))
    a_kernel, _ = group(node_times(a_events, lambda a: a["kernel"]))
    o_op, o_nodes = group(node_times(
        o_events, lambda a: ORT_FUSED.get(a["op_name"], a["op_name"])))
    lines = [f"Sum of per-node minima: arenac {a_nodes:.2f} ms, onnxruntime {o_nodes:.2f} ms "
             f"(**{a_nodes / o_nodes:.2f}x**); median whole profiled run: arenac {a_run:.2f} ms, "
             f"onnxruntime {o_run:.2f} ms", ""]
    lines += ["| arenac op type | ms | share | nodes | GFLOP/s |", "|---|---:|---:|---:|---:|"]
    lines += fmt_rows(a_op[:top], True)
    lines += ["", "| arenac kernel path | ms | share | nodes | GFLOP/s |",
              "|---|---:|---:|---:|---:|"]
    lines += fmt_rows(a_kernel[:top], True)
    lines += ["", "| onnxruntime op type (FusedConv as Conv) | ms | share | nodes |",
              "|---|---:|---:|---:|"]
    lines += fmt_rows(o_op[:top], False)
    return "\n".join(lines), {"arenac_op": a_op, "arenac_kernel": a_kernel, "ort_op": o_op}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("arenac_bin")
    p.add_argument("model")
    p.add_argument("--runs", type=int, default=30)
    args = p.parse_args()
    text, _ = breakdown(args.arenac_bin, args.model, args.runs)
    print(text)


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[1] == "--ort-child":
        ort_profile_child(sys.argv[2], int(sys.argv[3]))
    else:
        main()
