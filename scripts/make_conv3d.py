"""Writes a small video-style 3-d convolution model, a seeded input and onnxruntime's outputs.

Usage: python scripts/make_conv3d.py OUTDIR

video3d.onnx, input "clip" float[1, 3, 6, 20, 22] (channels, frames, height, width), random
weights (seeded), as 3-d CNNs (R3D, C3D, 3-d U-Nets) are exported:
- Conv 3 -> 8, 3x3x3, pads 1, bias, Relu;
- Conv 8 -> 8, 3x3x3, strides (1, 2, 2), auto_pad SAME_UPPER (asymmetric pads), no bias, Relu;
- Conv 8 -> 8 in 4 groups, 1x3x3, strides (2, 1, 1), pads (0, 1, 1), bias (no activation);
- Conv 8 -> 16, 3x1x1, dilation (2, 1, 1), pads (2, 0, 0), bias, Sigmoid;
- MaxPool 2x2x2 / 2, GlobalAveragePool, Flatten, Gemm -> 5 logits.
Outputs: the logits and the last Conv's activation (the whole tensor is compared).

Writes video3d.onnx, video3d_input_0.npy and video3d_output_K.npy (onnxruntime, one thread,
graph optimizations off). Used by tests/ort_models.rs.
"""

import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def model(rng):
    inits, nodes = [], []

    def w(name, shape):
        inits.append(numpy_helper.from_array(rng.normal(0, 0.3, shape).astype(np.float32), name))
        return name

    def conv(x, y, cin, cout, k, bias=True, group=1, **attrs):
        ins = [x, w(y + "_w", [cout, cin // group, *k])]
        if bias:
            ins.append(w(y + "_b", [cout]))
        nodes.append(helper.make_node("Conv", ins, [y], kernel_shape=k, group=group, **attrs))

    conv("clip", "c1", 3, 8, [3, 3, 3], pads=[1] * 6)
    nodes.append(helper.make_node("Relu", ["c1"], ["r1"]))
    conv("r1", "c2", 8, 8, [3, 3, 3], bias=False, strides=[1, 2, 2], auto_pad="SAME_UPPER")
    nodes.append(helper.make_node("Relu", ["c2"], ["r2"]))
    conv("r2", "c3", 8, 8, [1, 3, 3], group=4, strides=[2, 1, 1], pads=[0, 1, 1, 0, 1, 1])
    conv("c3", "c4", 8, 16, [3, 1, 1], dilations=[2, 1, 1], pads=[2, 0, 0, 2, 0, 0])
    nodes.append(helper.make_node("Sigmoid", ["c4"], ["features"]))
    nodes.append(helper.make_node("MaxPool", ["features"], ["p"], kernel_shape=[2, 2, 2], strides=[2, 2, 2]))
    nodes.append(helper.make_node("GlobalAveragePool", ["p"], ["g"]))
    nodes.append(helper.make_node("Flatten", ["g"], ["f"]))
    nodes.append(helper.make_node("Gemm", ["f", w("fc_w", [5, 16]), w("fc_b", [5])], ["logits"], transB=1))
    graph = helper.make_graph(
        nodes,
        "video3d",
        [helper.make_tensor_value_info("clip", TensorProto.FLOAT, [1, 3, 6, 20, 22])],
        [
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 5]),
            helper.make_tensor_value_info("features", TensorProto.FLOAT, [1, 16, 3, 10, 11]),
        ],
        inits,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    return m


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    rng = np.random.default_rng(3)
    path = os.path.join(outdir, "video3d.onnx")
    onnx.save(model(rng), path)
    clip = rng.uniform(-1, 1, (1, 3, 6, 20, 22)).astype(np.float32)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    np.save(os.path.join(outdir, "video3d_input_0.npy"), clip)
    for k, out in enumerate(sess.run(None, {"clip": clip})):
        np.save(os.path.join(outdir, f"video3d_output_{k}.npy"), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
