"""Runs a model with onnxruntime on inputs stored as .npy files; writes the outputs as .npy.

Usage: python scripts/ort_run.py MODEL.onnx OUTDIR IN0.npy [IN1.npy ...]

Inputs are given in the order of the graph's inputs (initializers excluded); the outputs are
written as OUTDIR/out0.npy, out1.npy, ... in the order of the graph's outputs. Used by the
model-directory check of tests/models.rs (ARENAC_MODEL_EVAL=1) to compare arenac's reference
evaluation with onnxruntime.
"""

import os
import sys

import numpy as np
import onnxruntime as ort


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    model, outdir, inputs = sys.argv[1], sys.argv[2], sys.argv[3:]
    opts = ort.SessionOptions()
    # Compare against the graph as written, not onnxruntime's fused rewrite of it.
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    if len(names) != len(inputs):
        print(f"model has {len(names)} inputs, {len(inputs)} given", file=sys.stderr)
        return 1
    feeds = {n: np.load(p) for n, p in zip(names, inputs)}
    outs = sess.run(None, feeds)
    os.makedirs(outdir, exist_ok=True)
    for k, o in enumerate(outs):
        np.save(os.path.join(outdir, f"out{k}.npy"), np.ascontiguousarray(o))
    return 0


if __name__ == "__main__":
    sys.exit(main())
