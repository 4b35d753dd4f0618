"""Writes detector-like ONNX models with random weights, for the planning benchmark of
patch-based execution (issue 16): several resolutions leave the backbone for the neck.

    python scripts/make_detectors.py OUT.onnx --kind yolo|dbnet [--size 640] [--base 16]

- `yolo`: a YOLOv5-style net. Backbone: a 6x6/s2 stem, then 4 levels of a 3x3/s2 Conv and a
  CSP block (two 1x1 branches, bottlenecks of 1x1 + 3x3 with a residual Add on one, Concat,
  1x1), SiLU (x * Sigmoid(x)) everywhere; SPPF (1x1, three chained 5x5/s1 MaxPools, Concat,
  1x1). PAN neck: 1x1, nearest 2x Resize, Concat with the backbone's 1/16 and 1/8 maps, CSP;
  then 3x3/s2 Convs back down with Concat. Three 1x1 heads (255 channels) at 1/8, 1/16, 1/32.
- `dbnet`: a DBNet-style text detector. A ResNet-18-like backbone (7x7/s2 stem, 3x3/s2
  MaxPool, 4 stages of two basic blocks, Conv + Relu, BN folded); an FPN (1x1 laterals,
  nearest 2x Resize + Add top-down), each level a 3x3 Conv resized to 1/4 and the four
  Concat'ed; the head: 3x3 Conv + Relu, two 2x2/s2 ConvTranspose, Sigmoid (a probability map
  at the input's size).

No torch: weights are numpy (He-scaled normal), the graph onnx.helper. Opset 17, batch 1.
"""

import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Net:
    """Nodes and initializers of a graph being built, with unique names."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}_{self.count}"

    def const(self, value: np.ndarray, prefix: str = "c") -> str:
        n = self.name(prefix)
        self.inits.append(numpy_helper.from_array(value, n))
        return n

    def node(self, op: str, inputs: list, prefix: str, **attrs) -> str:
        y = self.name(prefix)
        self.nodes.append(helper.make_node(op, inputs, [y], name=y, **attrs))
        return y

    def conv(self, x: str, cin: int, cout: int, k: int = 3, s: int = 1, act: str = "relu", p=None) -> str:
        scale = np.sqrt(2.0 / (cin * k * k))
        w = self.const((self.rng.standard_normal((cout, cin, k, k)) * scale).astype(np.float32), "w")
        b = self.const((self.rng.standard_normal(cout) * 0.05).astype(np.float32), "b")
        pad = k // 2 if p is None else p
        y = self.node("Conv", [x, w, b], "conv", kernel_shape=[k, k], strides=[s, s], pads=[pad] * 4)
        if act == "relu":
            return self.node("Relu", [y], "relu")
        if act == "silu":
            return self.node("Mul", [y, self.node("Sigmoid", [y], "sig")], "silu")
        return y

    def up(self, x: str, factor: int = 2) -> str:
        f = float(factor)
        scales = self.const(np.array([1, 1, f, f], np.float32), "scales")
        return self.node("Resize", [x, "", scales], "up", mode="nearest")

    def cat(self, xs: list) -> str:
        return self.node("Concat", xs, "cat", axis=1)

    def maxpool(self, x: str, k: int, s: int, p: int) -> str:
        return self.node("MaxPool", [x], "pool", kernel_shape=[k, k], strides=[s, s], pads=[p] * 4)


def csp(net: Net, x: str, cin: int, cout: int, n: int, shortcut: bool = True) -> str:
    """YOLOv5's C3: two 1x1 halves, `n` bottlenecks on one, Concat, 1x1."""
    h = cout // 2
    a = net.conv(x, cin, h, 1, act="silu")
    b = net.conv(x, cin, h, 1, act="silu")
    for _ in range(n):
        y = net.conv(net.conv(a, h, h, 1, act="silu"), h, h, 3, act="silu")
        a = net.node("Add", [a, y], "add") if shortcut else y
    return net.conv(net.cat([a, b]), 2 * h, cout, 1, act="silu")


def yolo(net: Net, base: int) -> tuple:
    c = [base * m for m in (1, 2, 4, 8, 16)]
    x = net.conv("image", 3, c[0], 6, 2, act="silu", p=2)
    x = csp(net, net.conv(x, c[0], c[1], 3, 2, act="silu"), c[1], c[1], 1)
    p3 = csp(net, net.conv(x, c[1], c[2], 3, 2, act="silu"), c[2], c[2], 2)
    p4 = csp(net, net.conv(p3, c[2], c[3], 3, 2, act="silu"), c[3], c[3], 3)
    x = csp(net, net.conv(p4, c[3], c[4], 3, 2, act="silu"), c[4], c[4], 1)
    # SPPF.
    s = net.conv(x, c[4], c[4] // 2, 1, act="silu")
    m1 = net.maxpool(s, 5, 1, 2)
    m2 = net.maxpool(m1, 5, 1, 2)
    m3 = net.maxpool(m2, 5, 1, 2)
    p5 = net.conv(net.cat([s, m1, m2, m3]), 2 * c[4], c[4], 1, act="silu")
    # PAN: top-down, then bottom-up.
    h5 = net.conv(p5, c[4], c[3], 1, act="silu")
    t4 = csp(net, net.cat([net.up(h5), p4]), 2 * c[3], c[3], 1, shortcut=False)
    h4 = net.conv(t4, c[3], c[2], 1, act="silu")
    o3 = csp(net, net.cat([net.up(h4), p3]), 2 * c[2], c[2], 1, shortcut=False)
    d4 = net.conv(o3, c[2], c[2], 3, 2, act="silu")
    o4 = csp(net, net.cat([d4, h4]), 2 * c[2], c[3], 1, shortcut=False)
    d5 = net.conv(o4, c[3], c[3], 3, 2, act="silu")
    o5 = csp(net, net.cat([d5, h5]), 2 * c[3], c[4], 1, shortcut=False)
    heads = [net.conv(o, ch, 255, 1, act="none") for o, ch in ((o3, c[2]), (o4, c[3]), (o5, c[4]))]
    return heads, [(255, 8), (255, 16), (255, 32)]


def basic(net: Net, x: str, cin: int, cout: int, s: int) -> str:
    """A ResNet basic block (BN folded into the convs)."""
    y = net.conv(net.conv(x, cin, cout, 3, s), cout, cout, 3, act="none")
    skip = x if s == 1 and cin == cout else net.conv(x, cin, cout, 1, s, act="none")
    return net.node("Relu", [net.node("Add", [y, skip], "add")], "relu")


def dbnet(net: Net, base: int) -> tuple:
    c = [base * m for m in (4, 8, 16, 32)]
    x = net.maxpool(net.conv("image", 3, c[0], 7, 2), 3, 2, 1)
    feats, cin = [], c[0]
    for i, ch in enumerate(c):
        x = basic(net, x, cin, ch, 1 if i == 0 else 2)
        x = basic(net, x, ch, ch, 1)
        feats.append(x)
        cin = ch
    inner = 4 * base * 4
    lat = [net.conv(f, ch, inner, 1, act="none") for f, ch in zip(feats, c)]
    outs = [lat[3]]
    for lv in (2, 1, 0):
        outs.insert(0, net.node("Add", [net.up(outs[0]), lat[lv]], "fpn"))
    q = inner // 4
    ps = [net.conv(o, inner, q, 3, act="none") for o in outs]
    ps = [p if i == 0 else net.up(p, 2**i) for i, p in enumerate(ps)]
    fuse = net.cat(ps)
    h = net.conv(fuse, inner, q, 3)
    w1 = net.const((net.rng.standard_normal((q, q, 2, 2)) * np.sqrt(2.0 / (4 * q))).astype(np.float32), "w")
    h = net.node("Relu", [net.node("ConvTranspose", [h, w1], "deconv", kernel_shape=[2, 2], strides=[2, 2])], "relu")
    w2 = net.const((net.rng.standard_normal((q, 1, 2, 2)) * np.sqrt(2.0 / (4 * q))).astype(np.float32), "w")
    h = net.node("ConvTranspose", [h, w2], "deconv", kernel_shape=[2, 2], strides=[2, 2])
    return [net.node("Sigmoid", [h], "prob")], [(1, 1)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--kind", choices=["yolo", "dbnet"], required=True)
    ap.add_argument("--size", type=int, default=640)
    ap.add_argument("--base", type=int, default=16)
    args = ap.parse_args()
    if args.size % 32:
        raise SystemExit("--size must be a multiple of 32")
    net = Net(0)
    outs, shapes = (yolo if args.kind == "yolo" else dbnet)(net, args.base)
    graph = helper.make_graph(
        net.nodes,
        args.kind,
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, args.size, args.size])],
        [
            helper.make_tensor_value_info(o, TensorProto.FLOAT, [1, ch, args.size // f, args.size // f])
            for o, (ch, f) in zip(outs, shapes)
        ],
        net.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, args.out)
    print(f"wrote {args.out}: {len(net.nodes)} nodes, {sum(i.ByteSize() for i in net.inits) / 2**20:.1f} MiB of weights")


if __name__ == "__main__":
    main()
