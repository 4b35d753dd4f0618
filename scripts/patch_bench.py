"""Patch-based execution, measured: arena and latency with `--patches` against `--no-patches`,
and outputs against onnxruntime, per model (issue 16's table in one command).

Usage:
  python scripts/patch_bench.py [--models resnet18,unet,...] [--dir /work/exports]
      [--threads 1] [--runs 9] [--rounds 3] [--patch-flops PCT] [--no-time] [--no-ort]

For each model `DIR/M.onnx`:
- arena: `arenac plan M --threads T --json` with `--no-patches` and with `--patches`
  (`arena_bytes`; the patched plan's `patches` entry gives the stage, grid and the
  recomputed FLOPs);
- outputs: one seeded input (uniform in [-1, 1), N = 1) run by arenac patched and unpatched
  and by onnxruntime (graph optimizations off); the error is max |a - b| over max |b| of each
  output, the largest over outputs;
- time: `arenac run M --repeat R` patched and unpatched alternating, `--rounds` times, the
  median time per run each; the table gives the minimum over rounds of each (1 thread: both
  pinned to core 0 with taskset). The machine must be otherwise idle for the ratio to mean
  anything.
Prints a Markdown table and the geometric means of the arena and time ratios.
"""

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARENAC = os.path.join(ROOT, "target", "release", "arenac")
MODELS = "mobilenet_v2,efficientnet_b0,resnet18,resnet50,vgg19,unet,yolo_320,yolo_640,dbnet_320,dbnet_640"


def plan(model, threads, extra):
    out = subprocess.run(
        [ARENAC, "plan", model, "--threads", str(threads), "--json", *extra],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out)


def run_time(model, threads, runs, extra):
    cmd = [ARENAC, "run", model, "--threads", str(threads), "--repeat", str(runs), *extra]
    if threads == 1 and shutil.which("taskset"):
        cmd = ["taskset", "-c", "0", *cmd]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    m = re.search(r"time per run: ([0-9.]+) (ms|s)\b", out)
    if not m:
        raise RuntimeError(f"no time in the output of {' '.join(cmd)}:\n{out}")
    # In ms: a run of a second or more prints seconds (a loaded machine, a large model).
    scale = 1000.0 if m.group(2) == "s" else 1.0
    return float(m.group(1)) * scale


def inputs_for(model, tmp):
    import onnxruntime as ort

    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    files = []
    for k, i in enumerate(sess.get_inputs()):
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in i.shape]
        x = rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
        path = os.path.join(tmp, f"in{k}.npy")
        np.save(path, x)
        files.append(path)
    return files


def ort_outputs(model, files):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    feeds = {i.name: np.load(f) for i, f in zip(sess.get_inputs(), files)}
    return sess.run(None, feeds)


def arenac_outputs(model, files, threads, extra, outdir):
    args = [ARENAC, "run", model, "--threads", str(threads), "--output-dir", outdir, *extra]
    for f in files:
        args += ["--input", f]
    subprocess.run(args, check=True, capture_output=True, text=True)
    outs = []
    k = 0
    while os.path.exists(os.path.join(outdir, f"output_{k}.npy")):
        outs.append(np.load(os.path.join(outdir, f"output_{k}.npy")))
        k += 1
    return outs


def rel_err(a_list, b_list):
    worst = 0.0
    for a, b in zip(a_list, b_list):
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        scale = max(float(np.max(np.abs(b))), 1e-30)
        worst = max(worst, float(np.max(np.abs(a - b))) / scale)
    return worst


def mib(b):
    return f"{b / 2**20:.2f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--models", default=MODELS)
    ap.add_argument("--dir", default="/work/exports")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--patch-flops", type=int, default=None)
    ap.add_argument("--no-time", action="store_true")
    ap.add_argument("--no-ort", action="store_true")
    a = ap.parse_args()
    if not os.path.exists(ARENAC):
        print(f"build first: cargo build --release -p arenac ({ARENAC} missing)", file=sys.stderr)
        return 2
    patched = ["--patches"]
    if a.patch_flops is not None:
        patched += ["--patch-flops", str(a.patch_flops)]
    unpatched = ["--no-patches"]
    rows = []
    arena_ratios, time_ratios = [], []
    for name in a.models.split(","):
        model = os.path.join(a.dir, f"{name}.onnx")
        if not os.path.exists(model):
            print(f"skipping {name}: {model} not found", file=sys.stderr)
            continue
        pu = plan(model, a.threads, unpatched)
        pp = plan(model, a.threads, patched)
        au, ap_ = pu["arena_bytes"], pp["arena_bytes"]
        ratio = ap_ / au
        arena_ratios.append(ratio)
        st = pp.get("patches")
        if st:
            parts, extra = [], 0
            for one in [st, *(st.get("later") or [])]:
                passes = one.get("passes") or 1
                at = f"from step {one['start']}: " if one.get("start") else ""
                parts.append(
                    f"{at}{one['stage_nodes']} nodes, {one['grid']}x{one.get('columns') or one['grid']}"
                    + (" cached" if one.get("cached") else "")
                    + (f", {passes} passes" if passes > 1 else "")
                )
                extra += one["extra_flops"]
            stage = "; ".join(parts)
            recompute = f"{100.0 * extra / max(st['total_flops'], 1):.1f}%"
        else:
            stage, recompute = "not patched", "-"
        err_u = err_p = apart = "-"
        if not a.no_ort:
            with tempfile.TemporaryDirectory() as tmp:
                files = inputs_for(model, tmp)
                ref = ort_outputs(model, files)
                ou = arenac_outputs(model, files, a.threads, unpatched, os.path.join(tmp, "u"))
                op = arenac_outputs(model, files, a.threads, patched, os.path.join(tmp, "p"))
                err_u = f"{rel_err(ou, ref):.1e}"
                err_p = f"{rel_err(op, ref):.1e}"
                apart = f"{rel_err(op, ou):.1e}"
        tu = tp = None
        if not a.no_time:
            tus, tps = [], []
            for _ in range(a.rounds):
                tus.append(run_time(model, a.threads, a.runs, unpatched))
                tps.append(run_time(model, a.threads, a.runs, patched))
            tu, tp = min(tus), min(tps)
            if st:
                time_ratios.append(tp / tu)
        rows.append(
            (
                name,
                f"{mib(au)} → {mib(ap_)}",
                f"{ratio:.3f}",
                stage,
                recompute,
                "-" if tu is None else f"{tu:.2f} → {tp:.2f}",
                "-" if tu is None else f"{tp / tu:.2f}",
                f"{err_u} / {err_p} / {apart}",
            )
        )
        print(f"{name}: arena {ratio:.3f}" + ("" if tu is None else f", time {tp / tu:.2f}"), file=sys.stderr)
    load = os.getloadavg()
    print(
        f"`scripts/patch_bench.py --threads {a.threads} --runs {a.runs} --rounds {a.rounds}"
        + (f" --patch-flops {a.patch_flops}" if a.patch_flops is not None else "")
        + f"`; load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}\n"
    )
    print(
        "| model | arena MiB unpatched → patched | ratio | stage | recomputed | ms per run unpatched → patched | ratio | error vs ORT unpatched / patched / apart |"
    )
    print("|---|---|---:|---|---:|---|---:|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")

    def geo(v):
        return math.exp(sum(math.log(x) for x in v) / len(v)) if v else float("nan")

    print(f"\nGeometric mean arena ratio: {geo(arena_ratios):.3f} over {len(arena_ratios)} models.")
    if time_ratios:
        print(
            f"Geometric mean time ratio over the {len(time_ratios)} patched models: {geo(time_ratios):.3f}; "
            f"worst {max(time_ratios):.2f}."
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
