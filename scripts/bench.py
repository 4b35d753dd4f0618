"""arenac vs onnxruntime, single thread, side by side: prints a markdown table.

Usage: python scripts/bench.py [--runs 15] [--warmup 3] [--models NAME,...] [--no-gemm]
                               [--light DIR] [--exports DIR]

For each model, two server processes are started: arenac's (runtime/examples/bench_server.rs,
built here with `cargo build --release`) and onnxruntime's (this script with --ort-server; one
intra-op and one inter-op thread, default graph optimizations). After the warm-up runs they are
asked for one timed run each, alternately, `--runs` times; the table shows the medians, their
ratio, arenac's compile time, arena + weights bytes, and both processes' peak RSS (VmHWM; a
Python process with onnxruntime imported starts near 54 MiB).

Models: the light models with random weights (`--light`, default .cache/light-random, written by
scripts/randomize_light.py) on their stored inputs, every `--exports` *.onnx (default
/work/exports, local only) and models/digits on seeded random inputs. A model arenac cannot
compile is listed with its error. Then GEMM 1024^3 GFLOP/s, best of 11: arenac's dense core
(compiler/examples/gemm_bench.rs) vs numpy (OpenBLAS, one thread) vs an onnxruntime MatMul.
"""

import argparse
import glob
import json
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


# ------------------------------------------------------------------------------------------
# The onnxruntime server (a child process, so its peak RSS is its own).


def peak_rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def ort_server(model, inputs):
    import numpy as np
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
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
        times = []
        for _ in range(int(line)):
            t = time.perf_counter()
            sess.run(None, feeds)
            times.append((time.perf_counter() - t) * 1e3)
        print(json.dumps({"times_ms": times}), flush=True)


# ------------------------------------------------------------------------------------------
# The driver.


class Server:
    def __init__(self, argv, env=None):
        self.p = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **ONE_THREAD, **(env or {})},
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


def bench_model(server_bin, model, inputs, runs, warmup):
    ours = Server([server_bin, model, *inputs])
    theirs = Server([sys.executable, os.path.abspath(__file__), "--ort-server", model, *inputs])
    try:
        ours.ask(warmup)
        theirs.ask(warmup)
        a, b = [], []
        for _ in range(runs):
            a += ours.ask(1)["times_ms"]
            b += theirs.ask(1)["times_ms"]
        return {
            "arenac_ms": statistics.median(a),
            "ort_ms": statistics.median(b),
            "compile_ms": ours.ready["compile_ms"],
            "arena_bytes": ours.ready["arena_bytes"],
            "weights_bytes": ours.ready["weights_bytes"],
            "arenac_rss": ours.ask("rss")["peak_rss_bytes"],
            "ort_rss": theirs.ask("rss")["peak_rss_bytes"],
        }
    finally:
        ours.close()
        theirs.close()


def best_of(n, f):
    f()
    best = float("inf")
    for _ in range(n):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best


def gemm_numpy_ort():
    """numpy and onnxruntime MatMul 1024^3, one thread, GFLOP/s (run in a child process so
    OpenBLAS sees OPENBLAS_NUM_THREADS=1 before it starts)."""
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
    np_s = best_of(11, lambda: np.matmul(a, b, out=c))
    g = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["c"])], "mm",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [n, n])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [n, n])],
        [onnx.numpy_helper.from_array(b, "b")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    ort_s = best_of(11, lambda: sess.run(None, {"a": a}))
    print(json.dumps({"numpy": flops / np_s / 1e9, "ort": flops / ort_s / 1e9}))


def gemm_row():
    exe = cargo_example("arenac-compiler", "gemm_bench")
    out = subprocess.run([exe, "11"], check=True, capture_output=True, text=True,
                         env={**os.environ, "GEMM_SHAPES": "1024,1024,1024"}).stdout
    kernel = out.splitlines()[0].split(":", 1)[1].strip()
    ours = float(out.splitlines()[-1].split()[5])
    theirs = json.loads(subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--gemm-ref"], check=True,
        capture_output=True, text=True, env={**os.environ, **ONE_THREAD}).stdout)
    return kernel, ours, theirs


def ms(x):
    return f"{x:.3f}" if x < 1 else f"{x:.2f}"


def mib(b):
    return f"{b / 2**20:.1f}"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--models", default="", help="comma-separated model names (file stems)")
    p.add_argument("--light", default=os.path.join(ROOT, ".cache", "light-random"))
    p.add_argument("--exports", default="/work/exports")
    p.add_argument("--no-gemm", action="store_true")
    args = p.parse_args()
    if args.runs < 10:
        print("bench.py: --runs below 10 gives a noisy median", file=sys.stderr)

    models = []
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

    server_bin = cargo_example("arenac", "bench_server")
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), platform.processor())
    print(f"Machine: {cpu}, {os.cpu_count()} logical CPUs; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
          f"median of {args.runs} alternating single runs after {args.warmup} warm-up runs\n")
    print("| model | arenac ms | ORT ms | arenac / ORT | arenac compile ms "
          "| arena + weights MiB | arenac peak RSS MiB | ORT peak RSS MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, path, inputs in models:
        try:
            r = bench_model(server_bin, path, inputs, args.runs, args.warmup)
        except Exception as e:  # a model arenac cannot compile yet: listed, not fatal
            print(f"| {name} | — | — | — | {str(e).splitlines()[0][:90].replace('|', '/')} | | | |", flush=True)
            continue
        print(f"| {name} | {ms(r['arenac_ms'])} | {ms(r['ort_ms'])} | "
              f"{r['arenac_ms'] / r['ort_ms']:.2f} | {r['compile_ms']:.0f} | "
              f"{mib(r['arena_bytes'] + r['weights_bytes'])} | {mib(r['arenac_rss'])} | "
              f"{mib(r['ort_rss'])} |", flush=True)
    if not args.no_gemm:
        kernel, ours, theirs = gemm_row()
        print("\n| GEMM 1024³, one thread, best of 11 | GFLOP/s |")
        print("|---|---:|")
        print(f"| arenac dense core ({kernel}) | {ours:.1f} |")
        print(f"| numpy matmul (OpenBLAS) | {theirs['numpy']:.1f} |")
        print(f"| onnxruntime MatMul | {theirs['ort']:.1f} |")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--ort-server":
        ort_server(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) > 1 and sys.argv[1] == "--gemm-ref":
        gemm_numpy_ort()
    else:
        sys.exit(main())
