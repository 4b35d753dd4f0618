"""Turns ONNX's nine "light" models into models with random weights, plus references.

Usage: python scripts/randomize_light.py LIGHT_DIR OUT_DIR [--seed N] [--skip NAME,NAME]

The light models (onnx/backend/test/data/light, opset 9) compute their weights with
ConstantOfShape nodes filled with 0.02, so their outputs barely depend on the input. For each
light_NAME.onnx this writes, into OUT_DIR:

- NAME.onnx: the same graph with every ConstantOfShape folded into a seeded random
  initializer, scaled so activations stay O(1): He-normal conv/Gemm weights (std
  sqrt(2 / fan_in)), small biases, BatchNormalization scale ~ U(0.5, 1.5), bias/mean ~ N(0, 0.1),
  var ~ U(0.5, 1.5) (the same for the Unsqueeze → Mul/Add scale-shift pairs of DenseNet and
  Inception v2). When the graph ends in Softmax, the Softmax's input (the logits) is added as a
  second graph output: comparing logits checks far more than comparing 1000 probabilities of
  about 1e-3 each.
- NAME_input_0.npy: a seeded N(0, 1) input.
- NAME_output_K.npy: onnxruntime's outputs (one thread, graph optimizations off), in graph-output
  order.

Idempotent: a model whose files exist and whose stamp (this script's hash and the seed) matches
is skipped, so a second run takes well under a second.
"""

import argparse
import hashlib
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

NAMES = [
    "bvlc_alexnet",
    "densenet121",
    "inception_v1",
    "inception_v2",
    "resnet50",
    "shufflenet",
    "squeezenet",
    "vgg19",
    "zfnet512",
]


def consumers(graph):
    uses = {}
    for node in graph.node:
        for k, name in enumerate(node.input):
            uses.setdefault(name, []).append((node, k))
    return uses


def attr(node, name, default):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def random_weight(rng, shape, uses, uses_of):
    """A random tensor for a weight of `shape` read by `uses` ((node, input index) pairs);
    `uses_of` maps every value name to its readers."""
    shape = tuple(int(d) for d in shape)
    role = None
    for node, k in uses:
        op = node.op_type
        if op in ("Conv", "ConvTranspose") and k == 1:
            fan_in = int(np.prod(shape[1:]))
            role = ("normal", np.sqrt(2.0 / max(fan_in, 1)))
        elif op == "Gemm" and k == 1:
            fan_in = shape[1] if attr(node, "transB", 0) else shape[0]
            role = ("normal", np.sqrt(2.0 / max(fan_in, 1)))
        elif op in ("Conv", "Gemm") and k == 2:
            role = ("normal", 0.05)
        elif op == "BatchNormalization" and k in (1, 4):
            role = ("uniform", 0.5, 1.5)
        elif op == "BatchNormalization" and k in (2, 3):
            role = ("normal", 0.1)
        elif op == "Unsqueeze":
            # DenseNet / Inception v2: Unsqueeze(scale) → Mul, Unsqueeze(shift) → Add.
            ops = {n.op_type for n, _ in uses_of.get(node.output[0], [])}
            role = ("uniform", 0.5, 1.5) if "Mul" in ops else ("normal", 0.1)
        if role is not None:
            break
    if role is None:
        role = ("normal", 0.1)
    if role[0] == "normal":
        w = rng.standard_normal(shape, dtype=np.float32) * np.float32(role[1])
    else:
        w = rng.uniform(role[1], role[2], size=shape).astype(np.float32)
    return w



def randomize(model, rng):
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    uses_of = consumers(graph)
    keep, new_inits = [], []
    for node in graph.node:
        if node.op_type != "ConstantOfShape" or node.input[0] not in inits:
            keep.append(node)
            continue
        shape = numpy_helper.to_array(inits[node.input[0]])
        w = random_weight(rng, shape, uses_of.get(node.output[0], []), uses_of)
        new_inits.append(numpy_helper.from_array(w, node.output[0]))
    del graph.node[:]
    graph.node.extend(keep)
    # Drop the shape initializers nothing reads any more, and graph inputs that named them.
    used = {i for n in graph.node for i in n.input} | {o.name for o in graph.output}
    old = [i for i in graph.initializer if i.name in used]
    del graph.initializer[:]
    graph.initializer.extend(old + new_inits)
    init_names = {i.name for i in graph.initializer}
    inputs = [i for i in graph.input if i.name in used and i.name not in init_names]
    del graph.input[:]
    graph.input.extend(inputs)
    # Initializers that are not graph inputs are constants from IR version 4 on.
    model.ir_version = max(model.ir_version, 4)
    # Expose the logits when the graph ends in Softmax.
    last = {o for n in graph.node for o in n.output}
    for node in graph.node:
        if node.op_type == "Softmax" and node.output[0] in {o.name for o in graph.output}:
            logits = node.input[0]
            if logits in last:
                graph.output.append(onnx.helper.make_empty_tensor_value_info(logits))
    # Let onnx fill in the new output's type.
    model = onnx.shape_inference.infer_shapes(model)
    vi = {v.name: v for v in model.graph.value_info}
    for k, out in enumerate(model.graph.output):
        if not out.type.HasField("tensor_type") and out.name in vi:
            model.graph.output[k].CopyFrom(vi[out.name])
    return model


def ort_session(model_or_path):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    src = model_or_path if isinstance(model_or_path, str) else model_or_path.SerializeToString()
    return ort.InferenceSession(src, opts, providers=["CPUExecutionProvider"])


def probe(model, feeds, names):
    """Runs `model` with the values `names` exposed as extra outputs; returns {name: array}."""
    probe_model = onnx.ModelProto()
    probe_model.CopyFrom(model)
    vi = {v.name: v for v in onnx.shape_inference.infer_shapes(model).graph.value_info}
    have = {o.name for o in probe_model.graph.output}
    for n in names:
        if n not in have:
            probe_model.graph.output.append(vi[n])
    outs = ort_session(probe_model).run(names, feeds)
    return dict(zip(names, outs))


def set_init(model, name, array):
    for k, init in enumerate(model.graph.initializer):
        if init.name == name:
            model.graph.initializer[k].CopyFrom(numpy_helper.from_array(array, name))
            return
    model.graph.initializer.append(numpy_helper.from_array(array, name))


def set_batchnorms(model, rng):
    """Gives every BatchNormalization sane random parameters (including those the light model
    stores as initializers, some with means of 5 and variances of 0.3): scale ~ U(0.5, 1.5),
    shift and mean ~ N(0, 0.1), variance ~ U(0.8, 1.2). A BatchNormalization whose output feeds
    a residual Sum/Add gets scale ~ U(0.1, 0.3), so that a residual stream grows by a few
    percent per block instead of doubling (ResNet-50's logits reach 1e5 otherwise)."""
    readers = consumers(model.graph)
    shapes = {}
    for init in model.graph.initializer:
        shapes[init.name] = tuple(init.dims)
    for bn in [n for n in model.graph.node if n.op_type == "BatchNormalization"]:
        (c,) = shapes[bn.input[1]]
        residual = any(n.op_type in ("Sum", "Add") for n, _ in readers.get(bn.output[0], []))
        lo, hi = (0.1, 0.3) if residual else (0.5, 1.5)
        set_init(model, bn.input[1], rng.uniform(lo, hi, size=c).astype(np.float32))
        set_init(model, bn.input[2], (rng.standard_normal(c) * 0.1).astype(np.float32))
        set_init(model, bn.input[3], (rng.standard_normal(c) * 0.1).astype(np.float32))
        set_init(model, bn.input[4], rng.uniform(0.8, 1.2, size=c).astype(np.float32))


LINEAR = {"Relu", "GlobalAveragePool", "AveragePool", "MaxPool", "Reshape", "Flatten", "Dropout"}


def scale_logits(model, feeds, target=3.0):
    """Scales the last Conv/Gemm before each Softmax (through positively homogeneous ops) so
    the logits have standard deviation `target`: peaked but not saturated probabilities."""
    producer = {o: n for n in model.graph.node for o in n.output}
    for sm in [n for n in model.graph.node if n.op_type == "Softmax"]:
        node = producer.get(sm.input[0])
        while node is not None and node.op_type in LINEAR:
            node = producer.get(node.input[0])
        if node is None or node.op_type not in ("Conv", "Gemm"):
            continue
        std = float(probe(model, feeds, [sm.input[0]])[sm.input[0]].std())
        if std == 0:
            continue
        inits = {i.name: i for i in model.graph.initializer}
        for name in node.input[1:]:
            # Inception v1 reshapes its classifier weights first.
            while name not in inits and name in producer and producer[name].op_type == "Reshape":
                name = producer[name].input[0]
            if name in inits:
                set_init(model, name, numpy_helper.to_array(inits[name]) * np.float32(target / std))


def run_ort(path, feeds):
    return ort_session(path).run(None, feeds)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("light_dir")
    p.add_argument("out_dir")
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--skip", default="", help="comma-separated names to leave out")
    args = p.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    with open(__file__, "rb") as f:
        stamp = f"{hashlib.sha256(f.read()).hexdigest()} seed={args.seed}\n"
    skip = {s for s in args.skip.split(",") if s}
    for k, name in enumerate(NAMES):
        if name in skip:
            continue
        out_model = os.path.join(args.out_dir, f"{name}.onnx")
        stamp_path = os.path.join(args.out_dir, f"{name}.stamp")
        if os.path.exists(stamp_path) and open(stamp_path).read() == stamp:
            continue
        src = os.path.join(args.light_dir, f"light_{name}.onnx")
        rng = np.random.default_rng([args.seed, k])
        model = randomize(onnx.load(src), rng)
        init_names = {i.name for i in model.graph.initializer}
        [data] = [i for i in model.graph.input if i.name not in init_names]
        dims = [d.dim_value for d in data.type.tensor_type.shape.dim]
        x = rng.standard_normal(dims, dtype=np.float32)
        set_batchnorms(model, rng)
        scale_logits(model, {data.name: x})
        onnx.save(model, out_model)
        outs = run_ort(out_model, {data.name: x})
        np.save(os.path.join(args.out_dir, f"{name}_input_0.npy"), x)
        for j, o in enumerate(outs):
            np.save(os.path.join(args.out_dir, f"{name}_output_{j}.npy"), np.ascontiguousarray(o))
        with open(stamp_path, "w") as f:
            f.write(stamp)
        stats = ", ".join(f"out{j} {list(o.shape)} std {o.std():.3g}" for j, o in enumerate(outs))
        print(f"randomize_light: {name}: {stats}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
