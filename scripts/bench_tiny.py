"""Tiny benchmark models for scripts/bench.py: a few Gemms on one row (M=1), about 0.01-0.05 ms
per run in onnxruntime, so the fixed cost per run and per kernel call shows.

`python scripts/bench_tiny.py OUTDIR` writes them; bench.py calls `write_tiny_models`. Weights
are seeded random (numpy default_rng(3)); inputs float32 [1, K] (random, seeded by the servers).

- tiny_gemm: one Gemm 1x256 @ 256x256 + bias;
- tiny_mlp3: Gemm 64->128, Relu, Gemm 128->128, Relu, Gemm 128->10 (an MLP head);
- tiny_mlp_wide: Gemm 512->512, Relu, Gemm 512->512, Relu, Gemm 512->512, Relu, Gemm 512->10.
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TINY = {
    "tiny_gemm": [256, 256],
    "tiny_mlp3": [64, 128, 128, 10],
    "tiny_mlp_wide": [512, 512, 512, 512, 10],
}


def mlp(name, widths, rng):
    nodes, inits = [], []
    x = "x"
    for i, (k, n) in enumerate(zip(widths, widths[1:])):
        w, b, y = f"w{i}", f"b{i}", f"g{i}"
        inits.append(numpy_helper.from_array(
            (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32), w))
        inits.append(numpy_helper.from_array((rng.standard_normal(n) * 0.1).astype(np.float32), b))
        nodes.append(helper.make_node("Gemm", [x, w, b], [y], name=f"gemm{i}", transB=1))
        x = y
        if i + 2 < len(widths):
            nodes.append(helper.make_node("Relu", [y], [f"r{i}"], name=f"relu{i}"))
            x = f"r{i}"
    nodes[-1].output[0] = "y"
    g = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, widths[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, widths[-1]])],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="bench_tiny")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def write_tiny_models(outdir):
    """Writes every tiny model into `outdir`; returns [(name, path)]."""
    os.makedirs(outdir, exist_ok=True)
    rng = np.random.default_rng(3)
    out = []
    for name, widths in TINY.items():
        path = os.path.join(outdir, f"{name}.onnx")
        onnx.save(mlp(name, widths, rng), path)
        out.append((name, path))
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip())
    for name, path in write_tiny_models(sys.argv[1]):
        print(f"{name}: {path}")
