"""arenac vs onnxruntime side by side, at one thread or at every core: markdown tables.

Usage: python scripts/bench.py [--threads 1,2] [--runs 15] [--warmup 3] [--models NAME,...]
                               [--no-gemm] [--no-tiny] [--profile] [--profile-runs 30]
                               [--light DIR] [--exports DIR]

One command reruns everything (docs/BENCHMARKS.md): `python scripts/bench.py --threads 1,2
--profile`. For each thread count T and each model, two server processes are started:
arenac's (runtime/examples/bench_server.rs, built here with `cargo build --release`, asked for
T threads: a build without a thread option runs one thread and the table says so) and
onnxruntime's (this script with --ort-server; intra-op T threads, one inter-op thread,
sequential, default graph optimizations, spinning stopped when a run returns so its idle pool
does not take the CPU from arenac's next run). At T = 1 both are pinned to one core
(`taskset -c 0`); at T = 2 both may use every core. After the warm-up runs they are asked for
one timed run each, alternately, `--runs` times; the table shows the medians, their ratio,
arenac's compile time and onnxruntime's session creation time, arena + weights bytes, both
processes' peak RSS (VmHWM; a Python process with onnxruntime imported starts near 54 MiB);
at T = 1 also the median CPU time of the thread running the model (the time it was on a CPU:
unlike wall time, it leaves out preemption by other processes, the main noise on a shared
machine), at T > 1 the processes' CPU time / wall time over the timed runs.

Models: a few tiny ones (scripts/bench_tiny.py: Gemms on one row, ~0.01-0.2 ms, so the fixed
cost per run shows), the light models with random weights (`--light`, default
.cache/light-random, written by scripts/randomize_light.py) on their stored inputs, every
`--exports` *.onnx (default /work/exports, local only: scripts/export_torch.py and
scripts/make_unet.py) and models/digits on seeded random inputs. A model arenac cannot compile
is listed with its error. Then GEMM 1024^3 GFLOP/s, best of 11: arenac's dense core
(compiler/examples/gemm_bench.rs, one thread) vs numpy (OpenBLAS) vs an onnxruntime MatMul,
as a fraction of this CPU's measured FMA peak (compiler/examples/fma_peak.rs, AVX-512 and
AVX2). `--profile` adds, at one thread, the per-op-type and per-kernel-path breakdown of
arenac's time (`arenac run --profile`) next to onnxruntime's profiler on the CNN benchmarks
(scripts/bench_profile.py).
"""

import argparse
import glob
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
PROFILED = ["squeezenet1_1", "resnet18", "mobilenet_v2", "efficientnet_b0", "unet"]


def thread_env(n):
    return {"OMP_NUM_THREADS": str(n), "OPENBLAS_NUM_THREADS": str(n), "MKL_NUM_THREADS": str(n)}


def pin(threads):
    """The command prefix for `threads` threads: one core, or no restriction."""
    return ["taskset", "-c", "0"] if threads == 1 else []


# ------------------------------------------------------------------------------------------
# The onnxruntime server (a child process, so its peak RSS is its own).


def peak_rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def ort_server(threads, model, inputs):
    import numpy as np
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.add_session_config_entry("session.force_spinning_stop", "1")
    start = time.perf_counter()
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    load_ms = (time.perf_counter() - start) * 1e3
    rng = np.random.default_rng(5)
    feeds = {}
    for k, i in enumerate(sess.get_inputs()):
        if k < len(inputs):
            feeds[i.name] = np.load(inputs[k])
            continue
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        if i.type == "tensor(float)":
            feeds[i.name] = rng.uniform(-1, 1, size=shape).astype(np.float32)
        else:
            dtype = {"tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(bool)": bool}
            feeds[i.name] = np.zeros(shape, dtype=dtype.get(i.type, np.float32))
    print(json.dumps({"compile_ms": load_ms}), flush=True)
    for line in sys.stdin:
        line = line.strip()
        if line == "rss":
            print(json.dumps({"peak_rss_bytes": peak_rss()}), flush=True)
            continue
        times, thread_times = [], []
        cpu = time.process_time()
        for _ in range(int(line)):
            c = time.thread_time()
            t = time.perf_counter()
            sess.run(None, feeds)
            times.append((time.perf_counter() - t) * 1e3)
            thread_times.append((time.thread_time() - c) * 1e3)
        cpu_ms = (time.process_time() - cpu) * 1e3
        print(json.dumps({"times_ms": times, "thread_cpu_ms": thread_times, "cpu_ms": cpu_ms}),
              flush=True)


# ------------------------------------------------------------------------------------------
# The driver.


class Server:
    def __init__(self, argv, threads):
        self.p = subprocess.Popen(
            pin(threads) + argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **thread_env(threads)},
        )
        self.ready = self.read()

    def read(self):
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.p.args[0]} exited ({self.p.wait()})")
        msg = json.loads(line)
        if "error" in msg:
            raise RuntimeError(msg["error"])
        return msg

    def ask(self, what):
        self.p.stdin.write(f"{what}\n")
        self.p.stdin.flush()
        return self.read()

    def close(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        self.p.wait()


def cargo_example(package, example):
    """Builds a release example and returns its executable's path."""
    out = subprocess.run(
        ["cargo", "build", "--release", "-q", "-p", package, "--example", example,
         "--message-format=json-render-diagnostics"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
            if msg["target"]["name"] == example:
                return msg["executable"]
    raise RuntimeError(f"cargo built no executable for example {example}")


def bench_model(server_bin, model, inputs, runs, warmup, threads):
    ours = Server([server_bin, "--threads", str(threads), model, *inputs], threads)
    theirs = Server([sys.executable, os.path.abspath(__file__), "--ort-server", str(threads),
                     model, *inputs], threads)
    try:
        ours.ask(warmup)
        theirs.ask(warmup)
        a, b, a_cpu, b_cpu, a_thread, b_thread = [], [], 0.0, 0.0, [], []
        for _ in range(runs):
            r = ours.ask(1)
            a += r["times_ms"]
            a_thread += r["thread_cpu_ms"]
            a_cpu += r["cpu_ms"]
            r = theirs.ask(1)
            b += r["times_ms"]
            b_thread += r["thread_cpu_ms"]
            b_cpu += r["cpu_ms"]
        return {
            "arenac_ms": statistics.median(a),
            "ort_ms": statistics.median(b),
            "arenac_thread_ms": statistics.median(a_thread),
            "ort_thread_ms": statistics.median(b_thread),
            "arenac_cpu": a_cpu / sum(a),
            "ort_cpu": b_cpu / sum(b),
            "compile_ms": ours.ready["compile_ms"],
            "ort_session_ms": theirs.ready["compile_ms"],
            "arenac_threads": ours.ready.get("threads", 1),
            "arena_bytes": ours.ready["arena_bytes"],
            "weights_bytes": ours.ready["weights_bytes"],
            "arenac_rss": ours.ask("rss")["peak_rss_bytes"],
            "ort_rss": theirs.ask("rss")["peak_rss_bytes"],
        }
    finally:
        ours.close()
        theirs.close()


def best_of(n, f, clock=time.perf_counter):
    f()
    best = float("inf")
    for _ in range(n):
        t = clock()
        f()
        best = min(best, clock() - t)
    return best


def gemm_numpy_ort(threads):
    """numpy and onnxruntime MatMul 1024^3 at `threads` threads, GFLOP/s (run in a child
    process so OpenBLAS sees OPENBLAS_NUM_THREADS before it starts). At one thread timed by
    the calling thread's CPU time, as arenac's dense core is."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    n = 1024
    flops = 2.0 * n**3
    rng = np.random.default_rng(1)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), dtype=np.float32)
    clock = time.thread_time if threads == 1 else time.perf_counter
    np_s = best_of(11, lambda: np.matmul(a, b, out=c), clock)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["c"])], "mm",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [n, n])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [n, n])],
        [onnx.numpy_helper.from_array(b, "b")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    ort_s = best_of(11, lambda: sess.run(None, {"a": a}), clock)
    print(json.dumps({"numpy": flops / np_s / 1e9, "ort": flops / ort_s / 1e9}))


def gemm_row(threads):
    """arenac's dense core (one thread), numpy and onnxruntime at `threads` threads, and the
    FMA peak at 1 and at `threads` threads."""
    exe = cargo_example("arenac-compiler", "gemm_bench")
    out = subprocess.run(pin(threads) + [exe, "11"], check=True, capture_output=True, text=True,
                         env={**os.environ, "GEMM_SHAPES": "1024,1024,1024"}).stdout
    kernel = out.splitlines()[0].split(":", 1)[1].strip()
    ours = float(out.splitlines()[-1].split()[-1])  # GFLOP/s by the thread's CPU time
    theirs = json.loads(subprocess.run(
        pin(threads) + [sys.executable, os.path.abspath(__file__), "--gemm-ref", str(threads)],
        check=True, capture_output=True, text=True, env={**os.environ, **thread_env(threads)}).stdout)
    peak_exe = cargo_example("arenac-compiler", "fma_peak")
    peaks = {}
    for t in sorted({1, threads}):
        out = subprocess.run(pin(t) + [peak_exe, str(t), "200"], check=True,
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            isa, _, gflops = line.split()
            peaks[(isa, t)] = float(gflops)
    return kernel, ours, theirs, peaks


def ms(x):
    return f"{x:.3f}" if x < 1 else f"{x:.2f}"


def mib(b):
    return f"{b / 2**20:.1f}"


def load_avg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def model_list(args, tiny_dir):
    models = []
    if not args.no_tiny:
        from bench_tiny import write_tiny_models

        models += [(name, path, []) for name, path in write_tiny_models(tiny_dir)]
    for path in sorted(glob.glob(os.path.join(args.light, "*.onnx"))):
        stem = os.path.basename(path)[:-5]
        inputs = sorted(glob.glob(os.path.join(args.light, f"{stem}_input_*.npy")))
        models.append((f"light {stem}", path, inputs))
    for path in sorted(glob.glob(os.path.join(args.exports, "*.onnx"))):
        models.append((os.path.basename(path)[:-5], path, []))
    models.append(("digits", os.path.join(ROOT, "models", "digits", "digits.onnx"), []))
    if args.models:
        wanted = set(args.models.split(","))
        models = [m for m in models if m[0].split()[-1] in wanted]
    return models


def geomean(xs):
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def bench_table(server_bin, models, args, threads):
    """Prints the table at `threads` threads; returns {model: result}."""
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), platform.processor())
    import onnxruntime

    where = "both pinned to core 0 (taskset -c 0)" if threads == 1 else "both on every core"
    print(f"### {threads} thread{'s' if threads > 1 else ''}: arenac vs onnxruntime "
          f"{onnxruntime.__version__} (intra-op {threads}), {where}\n")
    print(f"Machine: {cpu}, {os.cpu_count()} logical CPUs; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average {load_avg()} "
          f"at the start; median of {args.runs} alternating single runs after {args.warmup} "
          f"warm-up runs\n")
    if threads == 1:
        extra = " | arenac CPU ms | ORT CPU ms | CPU arenac / ORT"
    else:
        extra = " | arenac CPU/wall | ORT CPU/wall"
    print("| model | arenac ms | ORT ms | arenac / ORT | arenac compile ms | ORT session ms "
          f"| arena + weights MiB | arenac peak RSS MiB | ORT peak RSS MiB{extra} |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|" + "---:|" * extra.count("|"))
    results, used = {}, set()
    for name, path, inputs in models:
        try:
            r = bench_model(server_bin, path, inputs, args.runs, args.warmup, threads)
        except Exception as e:  # a model arenac cannot compile yet: listed, not fatal
            print(f"| {name} | — | — | — | {str(e).splitlines()[0][:90].replace('|', '/')} "
                  f"| | | | |", flush=True)
            continue
        results[name] = r
        used.add(r["arenac_threads"])
        if threads == 1:
            cpu_vals = (f" | {ms(r['arenac_thread_ms'])} | {ms(r['ort_thread_ms'])} | "
                        f"{r['arenac_thread_ms'] / r['ort_thread_ms']:.2f}")
        else:
            cpu_vals = f" | {r['arenac_cpu']:.2f} | {r['ort_cpu']:.2f}"
        print(f"| {name} | {ms(r['arenac_ms'])} | {ms(r['ort_ms'])} | "
              f"{r['arenac_ms'] / r['ort_ms']:.2f} | {r['compile_ms']:.0f} | "
              f"{r['ort_session_ms']:.0f} | {mib(r['arena_bytes'] + r['weights_bytes'])} | "
              f"{mib(r['arenac_rss'])} | {mib(r['ort_rss'])}{cpu_vals} |", flush=True)
    for key, what in [("ms", "wall time"), ("thread_ms", "CPU time of the running thread")]:
        if threads > 1 and key != "ms":
            continue
        ratio = {n: r[f"arenac_{key}"] / r[f"ort_{key}"] for n, r in results.items()}
        if ratio:
            worst = max(ratio, key=ratio.get)
            print(f"\nGeometric mean arenac / ORT ({what}): {geomean(ratio.values()):.2f} over "
                  f"{len(ratio)} models; worst {worst} {ratio[worst]:.2f}.")
    print(f"\nLoad average at the end: {load_avg()}.")
    if used and max(used) < threads:
        print(f"\n**arenac ran {max(used)} thread(s), not {threads}: this build has no thread "
              f"option yet** (bench_server's `apply_threads`); onnxruntime used {threads}.")
    print()
    return results


def gemm_table(threads):
    kernel, ours, theirs, peaks = gemm_row(threads)
    print(f"| GEMM 1024³, best of 11 (one thread: by the thread's CPU time) | GFLOP/s "
          f"| of one core's AVX-512 FMA peak | of one core's AVX2 FMA peak |")
    print("|---|---:|---:|---:|")
    p512, p2 = peaks.get(("avx512f", 1)), peaks.get(("avx2", 1))
    for name, g in [(f"arenac dense core ({kernel}), one thread", ours),
                    (f"numpy matmul (OpenBLAS), {threads} thread(s)", theirs["numpy"]),
                    (f"onnxruntime MatMul, intra-op {threads}", theirs["ort"])]:
        f512 = f"{g / p512:.0%}" if p512 else "—"
        f2 = f"{g / p2:.0%}" if p2 else "—"
        print(f"| {name} | {g:.1f} | {f512} | {f2} |")
    for (isa, t), g in sorted(peaks.items()):
        print(f"| FMA peak, {isa}, {t} thread(s) (compiler/examples/fma_peak.rs) | {g:.1f} | | |")
    print()


def profile_section(args, results):
    from bench_profile import breakdown

    arenac_bin = cargo_bin("arenac", "arenac")
    print("### Where arenac's single-thread time goes (per op type and kernel path)\n")
    print(f"`arenac run --profile` and onnxruntime's profiler, one thread, both pinned to "
          f"core 0, each node's minimum over {args.profile_runs} runs (on a shared machine a "
          f"node longer than a scheduler tick is often preempted once: its minimum is its time "
          f"on the CPU). Load average {load_avg()}.\n")
    for name in PROFILED:
        path = os.path.join(args.exports, f"{name}.onnx")
        if not os.path.exists(path):
            print(f"#### {name}: not found in {args.exports}\n")
            continue
        r = results.get(name)
        ratio = f"arenac / ORT {r['arenac_ms'] / r['ort_ms']:.2f} in the 1-thread table" if r else ""
        print(f"#### {name} ({ratio})\n")
        text, _ = breakdown(arenac_bin, path, args.profile_runs)
        print(text + "\n", flush=True)


def cargo_bin(package, name):
    """Builds a release binary and returns its path."""
    subprocess.run(["cargo", "build", "--release", "-q", "-p", package, "--bin", name],
                   cwd=ROOT, check=True)
    return os.path.join(ROOT, "target", "release", name)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", default="1", help="thread counts, comma-separated (1,2)")
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--models", default="", help="comma-separated model names (file stems)")
    p.add_argument("--light", default=os.path.join(ROOT, ".cache", "light-random"))
    p.add_argument("--exports", default="/work/exports")
    p.add_argument("--no-gemm", action="store_true")
    p.add_argument("--no-tiny", action="store_true")
    p.add_argument("--profile", action="store_true",
                   help="add the per-op-type breakdown at one thread (exported CNNs)")
    p.add_argument("--profile-runs", type=int, default=30)
    args = p.parse_args()
    if args.runs < 10:
        print("bench.py: --runs below 10 gives a noisy median", file=sys.stderr)
    thread_counts = [int(t) for t in args.threads.split(",")]
    server_bin = cargo_example("arenac", "bench_server")
    with tempfile.TemporaryDirectory() as tiny_dir:
        models = model_list(args, tiny_dir)
        results = {}
        for threads in thread_counts:
            results[threads] = bench_table(server_bin, models, args, threads)
            if not args.no_gemm:
                gemm_table(threads)
    if args.profile:
        profile_section(args, results.get(1, {}))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[1] == "--ort-server":
        ort_server(int(sys.argv[2]), sys.argv[3], sys.argv[4:])
    elif len(sys.argv) > 2 and sys.argv[1] == "--gemm-ref":
        gemm_numpy_ort(int(sys.argv[2]))
    else:
        sys.exit(main())
