"""Writes a U-Net-like ONNX model (long skip connections) with random weights, for the
planning benchmark: `python scripts/make_unet.py OUT.onnx [--size 256] [--base 16]`.

Encoder: 4 levels of (Conv3x3 + Relu) x2 then MaxPool; bottleneck; decoder: Resize x2
(nearest), Concat with the skip, (Conv3x3 + Relu) x2; a 1x1 Conv head. Opset 17, batch N.
"""

import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--base", type=int, default=16)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    counter = [0]

    def name(prefix: str) -> str:
        counter[0] += 1
        return f"{prefix}_{counter[0]}"

    def conv(x: str, cin: int, cout: int, k: int = 3, relu: bool = True) -> str:
        w, b, y = name("w"), name("b"), name("conv")
        scale = np.sqrt(2.0 / (cin * k * k))
        inits.append(numpy_helper.from_array((rng.standard_normal((cout, cin, k, k)) * scale).astype(np.float32), w))
        inits.append(numpy_helper.from_array(np.zeros(cout, np.float32), b))
        nodes.append(helper.make_node("Conv", [x, w, b], [y], pads=[k // 2] * 4, name=y))
        if not relu:
            return y
        r = name("relu")
        nodes.append(helper.make_node("Relu", [y], [r], name=r))
        return r

    x, c = "image", 3
    skips = []
    width = args.base
    for _ in range(4):
        x = conv(conv(x, c, width), width, width)
        skips.append((x, width))
        p = name("pool")
        nodes.append(helper.make_node("MaxPool", [x], [p], kernel_shape=[2, 2], strides=[2, 2], name=p))
        x, c, width = p, width, width * 2
    x = conv(conv(x, c, width), width, width)
    c = width
    scales = name("scales")
    inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), scales))
    for skip, sw in reversed(skips):
        up = name("up")
        nodes.append(helper.make_node("Resize", [x, "", scales], [up], mode="nearest", name=up))
        cat = name("cat")
        nodes.append(helper.make_node("Concat", [up, skip], [cat], axis=1, name=cat))
        x = conv(conv(cat, c + sw, sw), sw, sw)
        c = sw
    y = conv(x, c, 2, k=1, relu=False)
    graph = helper.make_graph(
        nodes,
        "unet",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, args.size, args.size])],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, ["N", 2, args.size, args.size])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, args.out)
    print(f"wrote {args.out}: {len(nodes)} nodes")


if __name__ == "__main__":
    main()
