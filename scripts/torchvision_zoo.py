"""Exports a wide set of torchvision models (and small RNN / transformer modules) to ONNX with
both PyTorch exporters, and runs them with arenac against onnxruntime (local use, never run by
the test suite).

    python scripts/torchvision_zoo.py export DIR [NAME...]   # needs torch + torchvision (+ onnxscript
                                                             # for the dynamo exporter): a separate venv
    python scripts/torchvision_zoo.py run DIR [--arenac BIN] [--only SUBSTR]   # needs onnx, onnxruntime

`export` writes DIR/NAME.dynamo.onnx (torch.onnx.export(dynamo=True)) and DIR/NAME.legacy.onnx
(TorchScript exporter, opset 17), random weights (BatchNorm statistics warmed by a few train-mode
batches), and the seeded input DIR/NAME.<exporter>.onnx.in.npy; an export that fails is reported
and skipped. `run` feeds each model its input, runs onnxruntime (1 thread, graph optimizations
off) and `arenac run --output-dir`, and prints per model: ok (worst |diff| / max |reference|
over all outputs below 1e-3), DIFF, MISMATCH (shapes), or the tool's error. Models whose outputs
depend on data-dependent shapes (NonZero, NonMaxSuppression: the detection models) compile with
their input frozen (arenac warns), so their "time per run" is of a constant program.
"""

import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def export(out, names):
    import torch
    import torchvision
    from torch import nn

    torch.manual_seed(0)
    M = torchvision.models

    def cls(fn, size=224):
        return lambda: (fn(weights=None), torch.randn(1, 3, size, size))

    class LSTMNet(nn.Module):
        def __init__(s):
            super().__init__()
            s.l = nn.LSTM(40, 64, 2, batch_first=True)
            s.f = nn.Linear(64, 10)

        def forward(s, x):
            y, _ = s.l(x)
            return s.f(y)

    class GRUNet(nn.Module):
        def __init__(s):
            super().__init__()
            s.l = nn.GRU(40, 64, 1, batch_first=True, bidirectional=True)
            s.f = nn.Linear(128, 10)

        def forward(s, x):
            y, _ = s.l(x)
            return s.f(y)

    zoo = {
     "convnext_tiny": cls(M.convnext_tiny),
     "regnet_y_400mf": cls(M.regnet_y_400mf),
     "mnasnet0_5": cls(M.mnasnet0_5),
     "densenet121": cls(M.densenet121),
     "googlenet": lambda: (M.googlenet(weights=None, aux_logits=False, init_weights=True), torch.randn(1,3,224,224)),
     "inception_v3": lambda: (M.inception_v3(weights=None, aux_logits=False, init_weights=True), torch.randn(1,3,299,299)),
     "mobilenet_v3_large": cls(M.mobilenet_v3_large),
     "mobilenet_v3_small": cls(M.mobilenet_v3_small),
     "efficientnet_v2_s": cls(M.efficientnet_v2_s, 288),
     "resnext50_32x4d": cls(M.resnext50_32x4d),
     "vit_b_16": cls(M.vit_b_16),
     "swin_t": cls(M.swin_t),
     "maxvit_t": cls(M.maxvit_t),
     "shufflenet_v2_x0_5": cls(M.shufflenet_v2_x0_5),
     "deeplabv3_mobilenet_v3_large": lambda: (M.segmentation.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, aux_loss=False), torch.randn(1,3,256,256)),
     "lraspp_mobilenet_v3_large": lambda: (M.segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None), torch.randn(1,3,256,256)),
     "fcn_resnet50": lambda: (M.segmentation.fcn_resnet50(weights=None, weights_backbone=None, aux_loss=False), torch.randn(1,3,224,224)),
     "r3d_18": lambda: (M.video.r3d_18(weights=None), torch.randn(1,3,8,112,112)),
     "r2plus1d_18": lambda: (M.video.r2plus1d_18(weights=None), torch.randn(1,3,8,112,112)),
     "ssdlite320": lambda: (M.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None), torch.rand(1,3,320,320)),
     "fasterrcnn_mnv3_320": lambda: (M.detection.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None), torch.rand(1,3,320,320)),
      "lstm": lambda: (LSTMNet(), torch.randn(1, 50, 40)),
     "gru_bi": lambda: (GRUNet(), torch.randn(1, 50, 40)),
     "tfenc": lambda: (nn.TransformerEncoder(nn.TransformerEncoderLayer(128, 4, 256, batch_first=True), 2), torch.randn(1, 64, 128)),
    }
    os.makedirs(out, exist_ok=True)
    plain = (LSTMNet, GRUNet, nn.TransformerEncoder)
    for n in names or list(zoo):
        for mode in ["dynamo", "legacy"]:
            path = os.path.join(out, f"{n}.{mode}.onnx")
            if os.path.exists(path):
                continue
            try:
                m, x = zoo[n]()
                detection = n.startswith(("ssd", "faster"))
                if not detection and not isinstance(m, plain):
                    m.train()
                    with torch.no_grad():
                        for _ in range(3):
                            m(torch.randn_like(x))
                m.eval()
                if mode == "dynamo":
                    torch.onnx.export(m, (x,), path, dynamo=True, input_names=["x"])
                else:
                    torch.onnx.export(m, (x,), path, dynamo=False, opset_version=17, input_names=["x"])
                np.save(path + ".in.npy", x.numpy())
                print("ok", n, mode, flush=True)
            except Exception as e:  # report and go on: one model's export failing is data
                print("FAIL-export", n, mode, type(e).__name__, str(e)[:200], flush=True)


def run(d, binary, only):
    import onnxruntime as ort

    bad = 0
    for path in sorted(glob.glob(os.path.join(d, "*.onnx"))):
        if only not in os.path.basename(path): continue
        name = os.path.basename(path)
        x = np.load(path + ".in.npy")
        so = ort.SessionOptions(); so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.intra_op_num_threads = 1
        try:
            s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            iname = s.get_inputs()[0].name
            exp = s.run(None, {iname: x})
        except Exception as e:
            print(f"{name:45} ORT-FAIL (not counted) {str(e)[:150]}")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            f = os.path.join(tmp, "x.npy"); np.save(f, x)
            t = time.time()
            p = subprocess.run([binary, "run", path, "--repeat", "3", "--input", f"{iname}={f}", "--output-dir", os.path.join(tmp, "o")], capture_output=True, text=True)
            wall = time.time() - t
            if p.returncode != 0:
                bad += 1; print(f"{name:45} ARENAC-FAIL rc={p.returncode} {(p.stderr or p.stdout).strip()[:400]}"); continue
            worst = 0.0; msg = ""
            for k, e in enumerate(exp):
                g = np.load(os.path.join(tmp, "o", f"output_{k}.npy"))
                if g.shape != e.shape: msg = f"shape {g.shape} vs {e.shape}"; break
                if e.size == 0: continue
                r = float(np.max(np.abs(g.astype(np.float64) - e)) / max(np.max(np.abs(e)), 1e-30))
                worst = max(worst, r)
            tm = [l for l in p.stdout.splitlines() if l.startswith("time per run")]
            verdict = "MISMATCH " + msg if msg else ("ok" if worst < 1e-3 else "DIFF")
            bad += verdict != "ok"
            print(f"{name:45} {verdict} rel {worst:.2e} wall {wall:.1f}s {tm[0] if tm else ''}", flush=True)
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["export", "run"])
    ap.add_argument("dir")
    ap.add_argument("names", nargs="*")
    ap.add_argument("--arenac", default=os.path.join(HERE, "..", "target", "release", "arenac"))
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    if a.command == "export":
        export(a.dir, a.names)
        return 0
    return 1 if run(a.dir, a.arenac, a.only) else 0


if __name__ == "__main__":
    sys.exit(main())
