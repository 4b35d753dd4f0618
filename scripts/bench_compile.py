"""Time to first result: arenac's compile time vs onnxruntime's session creation.

Usage: python scripts/bench_compile.py [--reps 7] [--threads T] [--pin] [--models NAME,...]
                                       [--exports DIR] [--light DIR] [--json FILE]

For each model, `--reps` times, alternately: a fresh arenac process compiles it once
(runtime/examples/compile_bench.rs, built here with `cargo build --release`: `compile_file`,
import to JIT, for T threads) and a fresh Python process with onnxruntime already imported
creates an `InferenceSession` (intra-op T threads, default graph optimizations, as
scripts/bench.py does). Both are what a user pays once per process; neither includes loading
the engine itself (the arenac binary's start, `import onnxruntime`). Alternating fresh
processes means both see the same machine load (docs/BENCHMARKS.md: the machine is shared).
Prints a markdown table of medians: arenac's total (wall and CPU time of the process, which
leaves out time spent waiting for a core) and its phases (import, plan, code
generation, of which Cranelift), onnxruntime's session creation, the ratio, and arenac's
peak RSS after compiling. Then both time their first and second run on zero inputs (a
fresh session's first run pays one-time costs: pages first touched, for arenac the code
pages `compile_file` gave back, for onnxruntime its arena growing), and the table gives
the **time to first result** of each (compile or session creation, arenac's session, and
the first run) and its ratio. `--pin` runs both under `taskset -c 0` (one core).
`--baseline EXE` adds a third process to each round, another compile_bench binary (e.g.
built from an earlier commit), and a column with its median: before/after in one run.
"""

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def ort_session(model, threads):
    """Run in a child: imports onnxruntime, then times one session creation."""
    import time

    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.add_session_config_entry("session.force_spinning_stop", "1")
    import numpy as np

    start = time.perf_counter()
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    total_ms = (time.perf_counter() - start) * 1e3
    types = {"tensor(float)": np.float32, "tensor(int64)": np.int64, "tensor(int32)": np.int32,
             "tensor(float16)": np.float16, "tensor(bool)": np.bool_, "tensor(double)": np.float64}
    feed = {i.name: np.zeros([d if isinstance(d, int) else 1 for d in i.shape],
                             types.get(i.type, np.float32)) for i in sess.get_inputs()}
    runs = []
    for _ in range(2):
        t = time.perf_counter()
        sess.run(None, feed)
        runs.append((time.perf_counter() - t) * 1e3)
    print(json.dumps({"total_ms": total_ms, "first_run_ms": runs[0], "second_run_ms": runs[1]}),
          flush=True)


def models(args):
    out = []
    for path in sorted(glob.glob(os.path.join(args.exports, "*.onnx"))):
        out.append((os.path.splitext(os.path.basename(path))[0], path))
    for path in sorted(glob.glob(os.path.join(args.light, "*.onnx"))):
        out.append(("light " + os.path.splitext(os.path.basename(path))[0], path))
    if args.models:
        wanted = args.models.split(",")
        out = [m for m in out if any(w == m[0] or w == m[0].split()[-1] for w in wanted)]
    return out


def run_json(argv, pin):
    prefix = ["taskset", "-c", "0"] if pin else []
    out = subprocess.run(prefix + argv, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--pin", action="store_true")
    ap.add_argument("--models", default="")
    ap.add_argument("--exports", default="/work/exports")
    ap.add_argument("--light", default=os.path.join(ROOT, ".cache", "light-random"))
    ap.add_argument("--json", default="")
    ap.add_argument("--exe", default="", help="a compile_bench binary to use instead of building one")
    ap.add_argument("--baseline", default="", help="a compile_bench binary to compare against")
    ap.add_argument("--ort-session", nargs=2, metavar=("MODEL", "THREADS"))
    args = ap.parse_args()
    if args.ort_session:
        ort_session(args.ort_session[0], int(args.ort_session[1]))
        return
    from bench import cargo_example

    exe = args.exe or cargo_example("arenac", "compile_bench")
    base_col = " baseline ms | baseline CPU ms |" if args.baseline else ""
    print(f"| model |{base_col} arenac compile ms | arenac CPU ms | import | plan | code gen | of which Cranelift "
          f"| kernels | ORT session ms | arenac / ORT | arenac first / second run ms "
          f"| ORT first / second run ms | first result arenac / ORT | arenac peak RSS MiB |"
          + (" baseline peak RSS MiB |" if args.baseline else ""))
    print("|---|" + ("---:|---:|" if args.baseline else "") + "---:|" * (13 + bool(args.baseline)))
    results = {}
    for name, path in models(args):
        ours, theirs, base = [], [], []
        try:
            for _ in range(args.reps):
                if args.baseline:
                    base.append(run_json([args.baseline, "--threads", str(args.threads), path],
                                         args.pin))
                ours.append(run_json([exe, "--threads", str(args.threads), path], args.pin))
                theirs.append(run_json([sys.executable, os.path.abspath(__file__),
                                        "--ort-session", path, str(args.threads)], args.pin))
        except subprocess.CalledProcessError as e:
            print(f"| {name} | failed: {(e.stderr or '').strip()[:120]} |||||||||")
            continue
        med = {k: statistics.median(r[k] for r in ours) for k in ours[0]}
        ort_ms = statistics.median(r["total_ms"] for r in theirs)
        ort_med = {k: statistics.median(r[k] for r in theirs) for k in theirs[0]}
        first = statistics.median(r["total_ms"] + r["session_ms"] + r["first_run_ms"] for r in ours)
        ort_first = statistics.median(r["total_ms"] + r["first_run_ms"] for r in theirs)
        results[name] = {"arenac": ours, "ort": theirs,
                         "baseline": [r["total_ms"] for r in base]}
        base_ms = (f" {statistics.median(r['total_ms'] for r in base):.1f} "
                   f"| {statistics.median(r['cpu_ms'] for r in base):.1f} |" if base else "")
        print(f"| {name} |{base_ms} {med['total_ms']:.1f} | {med['cpu_ms']:.1f} | {med['import_ms']:.1f} | {med['plan_ms']:.1f} "
              f"| {med['codegen_ms']:.1f} | {med['jit_ms']:.1f} | {med['kernels']:.0f} "
              f"| {ort_ms:.1f} | {med['total_ms'] / ort_ms:.2f} "
              f"| {med['first_run_ms']:.2f} / {med['second_run_ms']:.2f} "
              f"| {ort_med['first_run_ms']:.2f} / {ort_med['second_run_ms']:.2f} "
              f"| {first:.1f} / {ort_first:.1f} = {first / ort_first:.2f} "
              f"| {med['peak_rss_bytes'] / 2**20:.1f} |"
              + (f" {statistics.median(r['peak_rss_bytes'] for r in base) / 2**20:.1f} |"
                 if base else ""), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
