"""Accuracy, memory and speed of `--weights f32|f16|bf16|int8` and of
`--activations f32|f16|bf16` per model: writes docs/PRECISION.md.

Usage: .venv/bin/python scripts/precision.py [--arenac target/release/arenac]
           [--models DIR] [--repeat N] [--out docs/PRECISION.md] [--activations] [NAME...]

With --activations, the activations table (arena in each mode from `arenac plan --json`,
errors against the f32 run and onnxruntime, latency ratio) replaces the section between the
`<!-- activations -->` markers of --out, over the ten benchmark models and the demo; without,
the weights table is rewritten (everything from "Notes" on, the activations section included,
is kept).

For each model (the shipped demo, and the PyTorch exports in --models, default /work/exports:
`scripts/export_torch.py DIR resnet18 resnet50 vgg19 mobilenet_v2 transformer_encoder`), one
seeded input is run by onnxruntime and by `arenac run --threads 1` in every weights mode, each
in a process of its own. Per mode: max abs and max relative error (max |d| / max |reference|)
of the first output against the f32 run and against onnxruntime, top-1 agreement with f32 over
the output's rows (and accuracy against the labels where the model ships them), peak RSS of the
process (VmHWM, from GNU time), the weights region as the summary reports it, and the latency
(median of --repeat runs) as a ratio to f32's.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = ["f32", "f16", "bf16", "int8"]
# Weights modes run again with 16-bit activations (`--activations bf16`): the smallest
# footprint, the one a memory cap asks for.
COMBINED = ["bf16", "int8"]


def inputs_for(name, path):
    """(input name, array, labels or None) for one model."""
    rng = np.random.default_rng(0)
    if name == "digits":
        d = os.path.join(ROOT, "models", "digits")
        return "pixels", np.load(os.path.join(d, "samples.npy")), np.load(os.path.join(d, "labels.npy"))
    if name == "transformer_encoder":
        return "x", rng.standard_normal((1, 128, 256)).astype(np.float32), None
    if name == "gpt_decoder":
        return "tokens", rng.integers(0, 1000, (1, 64)).astype(np.int64), None
    if name == "unet":
        return "image", rng.standard_normal((1, 3, 256, 256)).astype(np.float32), None
    return "input", rng.standard_normal((1, 3, 224, 224)).astype(np.float32), None


def peak_rss(cmd):
    """Runs cmd; returns (stdout, peak RSS in bytes: VmHWM as GNU time reports it, so the
    process is measured from its exec, not with this Python's pages)."""
    p = subprocess.run(["/usr/bin/time", "-f", "MAXRSS_KIB %M", *cmd], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{p.stderr}")
    m = re.search(r"MAXRSS_KIB (\d+)", p.stderr)
    return p.stdout, int(m.group(1)) * 1024 if m else float("nan")


def parse_time(out):
    m = re.search(r"time per run: ([\d.]+) (ms|µs|us|s)\b", out)
    if not m:
        return float("nan")
    v = float(m.group(1))
    return v * {"ms": 1e-3, "µs": 1e-6, "us": 1e-6, "s": 1.0}[m.group(2)]


def weights_bytes(arenac, path, mode, shape_args):
    """(stored weights bytes, f32 weights bytes) from `arenac plan --json`."""
    import json

    out = subprocess.run(
        [arenac, "plan", "--json", "--threads", "1", "--weights", mode, path, *shape_args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    r = json.loads(out)
    w = r.get("weights_storage")
    return (w["stored_bytes"] if w else r["weights_bytes"]), r["weights_bytes"]


def ort_output(path, iname, x):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return s.run(None, {iname: x})[0]


def errors(y, ref):
    d = np.abs(y.astype(np.float64) - ref.astype(np.float64))
    scale = max(float(np.abs(ref).max()), 1e-30)
    return float(d.max()), float(d.max()) / scale


def top1(y):
    return np.argmax(y.reshape(-1, y.shape[-1]), axis=-1)


ACT_MODELS = ["digits", "resnet18", "squeezenet1_1", "efficientnet_b0", "mobilenet_v2",
              "shufflenet_v2_x1_0", "transformer_encoder", "gpt_decoder", "unet", "resnet50",
              "vgg19"]


def plan_json(arenac, path, extra):
    import json

    out = subprocess.run([arenac, "plan", "--json", "--threads", "1", path, *extra],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def activations_table(a):
    """The `--activations` section of --out (see the module doc)."""
    names = a.names or ACT_MODELS
    rows = []
    tmp = tempfile.mkdtemp(prefix="arenac-act-")
    for name in names:
        path = (
            os.path.join(ROOT, "models", "digits", "digits.onnx")
            if name == "digits"
            else os.path.join(a.models, f"{name}.onnx")
        )
        if not os.path.exists(path):
            print(f"{name}: {path} missing, skipped", file=sys.stderr)
            continue
        iname, x, labels = inputs_for(name, path)
        xfile = os.path.join(tmp, f"{name}_in.npy")
        np.save(xfile, x)
        ref = ort_output(path, iname, x)
        shape_args = ["--shape", f"N={x.shape[0]}"] if iname in ("input", "pixels", "image") else []
        base = None
        # Alternating runs (f32, f16, bf16, f32, ...) so a busy machine weighs on every mode.
        times = {m: [] for m in ["f32", "f16", "bf16"]}
        outs = {}
        for rep in range(2):
            for mode in ["f32", "f16", "bf16"]:
                od = os.path.join(tmp, f"{name}_{mode}")
                os.makedirs(od, exist_ok=True)
                cmd = [a.arenac, "run", path, "--threads", "1", "--activations", mode, "--input",
                       f"{iname}={xfile}", "--output-dir", od, "--repeat", str(a.repeat),
                       *shape_args]
                p = subprocess.run(cmd, capture_output=True, text=True)
                if p.returncode != 0:
                    raise RuntimeError(f"{' '.join(cmd)} failed:\n{p.stderr}")
                times[mode].append(parse_time(p.stdout))
                outs[mode] = np.load(os.path.join(od, "output_0.npy"))
        for mode in ["f32", "f16", "bf16"]:
            r = plan_json(a.arenac, path, ["--activations", mode, *shape_args])
            arena = r["arena_bytes"]
            st = r.get("activations_storage") or {}
            y = outs[mode]
            t = min(times[mode])
            if base is None:
                base = (y, t, arena)
            ea, er = errors(y, base[0])
            oa, orr = errors(y, ref)
            agree = float(np.mean(top1(y) == top1(base[0])))
            acc = float(np.mean(top1(y) == labels.reshape(-1))) if labels is not None else None
            kept = len(st.get("kept_f32", []))
            rows.append((name, mode, arena, arena / base[2], ea, er, orr, agree, acc, t / base[1], kept))
            print(f"{name} {mode}: arena {mib(arena)} MiB ({arena / base[2]:.3f}x), rel {er:.2e} "
                  f"vs f32, {orr:.2e} vs ort; time {t / base[1]:.2f}x; kept {kept}", flush=True)
    lines = [
        "<!-- activations -->",
        "## Activations in f16 / bf16",
        "",
        "Made by `scripts/precision.py --activations` (after `cargo build --release -p arenac`), "
        f"on {time.strftime('%Y-%m-%d')}. `arenac run --threads 1 --activations MODE`, one seeded "
        "input per model; *arena* from `arenac plan --json --threads 1`; *time* = the better of "
        "two medians of --repeat runs, modes alternated, as a ratio to f32's; *kept* = nodes left "
        "in f32 (no 16-bit path; `arenac plan` lists them).",
        "",
        "| model | activations | arena MiB | arena / f32 | max abs vs f32 | rel vs f32 | rel vs onnxruntime | top-1 | time / f32 | kept |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (name, mode, arena, ar, ea, er, orr, agree, acc, tr, kept) in rows:
        top = f"{agree * 100:.0f}%" + (f" ({acc * 100:.0f}%)" if acc is not None else "")
        lines.append(f"| {name} | {mode} | {mib(arena)} | {ar:.3f} | {ea:.2e} | {er:.2e} | "
                     f"{orr:.2e} | {top} | {tr:.2f} | {kept} |")
    lines.append("<!-- /activations -->")
    section = "\n".join(lines)
    old = open(a.out).read() if os.path.exists(a.out) else ""
    i, j = old.find("<!-- activations -->"), old.find("<!-- /activations -->")
    if i >= 0 and j >= 0:
        new = old[:i] + section + old[j + len("<!-- /activations -->"):]
    else:
        new = old.rstrip("\n") + "\n\n" + section + "\n"
    with open(a.out, "w") as f:
        f.write(new)
    print(f"wrote {a.out}")


def mib(b):
    return f"{b / 2**20:.2f}" if b < 2**20 else f"{b / 2**20:.1f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arenac", default=os.path.join(ROOT, "target", "release", "arenac"))
    ap.add_argument("--models", default="/work/exports")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "PRECISION.md"))
    ap.add_argument("--activations", action="store_true")
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    if a.activations:
        return activations_table(a)
    names = a.names or ["digits", "resnet18", "resnet50", "mobilenet_v2", "vgg19", "transformer_encoder"]
    rows = []
    tmp = tempfile.mkdtemp(prefix="arenac-precision-")
    for name in names:
        path = (
            os.path.join(ROOT, "models", "digits", "digits.onnx")
            if name == "digits"
            else os.path.join(a.models, f"{name}.onnx")
        )
        if not os.path.exists(path):
            print(f"{name}: {path} missing (scripts/export_torch.py), skipped", file=sys.stderr)
            continue
        iname, x, labels = inputs_for(name, path)
        xfile = os.path.join(tmp, f"{name}_in.npy")
        np.save(xfile, x)
        ref = ort_output(path, iname, x)
        shape_args = ["--shape", f"N={x.shape[0]}"] if iname in ("input", "pixels") else []
        base = None
        runs = [(m, None) for m in MODES] + [(m, "bf16") for m in COMBINED]
        for mode, act in runs:
            label = mode if act is None else f"{mode} + {act} activations"
            od = os.path.join(tmp, f"{name}_{mode}_{act}")
            os.makedirs(od, exist_ok=True)
            act_args = [] if act is None else ["--activations", act]
            cmd = [a.arenac, "run", path, "--threads", "1", "--weights", mode, *act_args, "--input",
                   f"{iname}={xfile}", "--output-dir", od, "--repeat", str(a.repeat), *shape_args]
            out, rss = peak_rss(cmd)
            y = np.load(os.path.join(od, "output_0.npy"))
            t = parse_time(out)
            stored, f32w = weights_bytes(a.arenac, path, mode, shape_args)
            if base is None:
                base = (y, t, rss)
            ea, er = errors(y, base[0])
            oa, orr = errors(y, ref)
            agree = float(np.mean(top1(y) == top1(base[0])))
            acc = float(np.mean(top1(y) == labels.reshape(-1))) if labels is not None else None
            rows.append((name, label, ea, er, oa, orr, agree, acc, rss, rss / base[2], stored, t / base[1]))
            print(f"{name} {label}: rel {er:.2e} vs f32, {orr:.2e} vs ort; RSS {mib(rss)} MiB "
                  f"({rss / base[2]:.2f}x); weights {mib(stored)} MiB; time {t * 1e3:.2f} ms "
                  f"({t / base[1]:.2f}x)", flush=True)
    lines = [
        "# Weights in f16 / bf16 / int8: accuracy, memory, speed",
        "",
        "Made by `scripts/precision.py` (rerun: `.venv/bin/python scripts/precision.py`, after "
        "`cargo build --release -p arenac`), on "
        f"{time.strftime('%Y-%m-%d')}. `arenac run --threads 1 --weights MODE` (the last two rows "
        "per model also with `--activations bf16`), one seeded input "
        "per model (the 100 digits samples for the demo), each run in a process of its own.",
        "",
        "- *rel* = max |y - reference| / max |reference| over the first output; against the f32 "
        "run of arenac and against onnxruntime (1 thread);",
        "- *top-1* = share of rows whose arg-max agrees with the f32 run (accuracy against the "
        "labels in parentheses where the model ships them);",
        "- *RSS* = peak resident set of the whole `arenac run` process (compile + runs), and its "
        "ratio to f32's; *weights* = the weights region as `arenac plan` reports it;",
        "- *time* = median time per run as a ratio to f32's (same thread count, same session "
        "of the machine; other builds may have been running: ratios within ±10% are noise).",
        "",
        "| model | weights | max abs vs f32 | rel vs f32 | rel vs onnxruntime | top-1 | peak RSS MiB | RSS / f32 | weights MiB | time / f32 |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (name, mode, ea, er, oa, orr, agree, acc, rss, rr, stored, tr) in rows:
        top = f"{agree * 100:.0f}%" + (f" ({acc * 100:.0f}%)" if acc is not None else "")
        lines.append(
            f"| {name} | {mode} | {ea:.2e} | {er:.2e} | {orr:.2e} | {top} | {mib(rss)} | "
            f"{rr:.2f} | {mib(stored)} | {tr:.2f} |"
        )
    # Hand-written notes after the table (measurements of other runs) are kept.
    kept = ""
    if os.path.exists(a.out):
        old = open(a.out).read()
        at = old.find("\nNotes")
        kept = old[at:] if at >= 0 else ""
    with open(a.out, "w") as f:
        f.write("\n".join(lines) + "\n" + kept)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
