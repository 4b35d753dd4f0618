#!/usr/bin/env python3
"""Writes ONNX's backend node test cases into a cache folder for tests/conformance.rs.

The pinned onnx package generates its node cases (`collect_testcases()`, 1,884 with onnx 1.23.2)
instead of shipping them as files. Each case becomes `OUT/<case>/model.onnx` with
`input_K.pb` / `output_K.pb` (TensorProto) per data set `OUT/<case>/data_N/`, and one line of
`OUT/index.tsv`:

    name  op  rtol  atol  io  dtypes

- `op`: the ONNX op the case tests. A one-node model tests its node's op; a multi-node case
  (a function expanded into its body, `..._expanded`) is counted for the op of its
  non-expanded sibling, so an op passes only when its expansions pass too.
- `io`: `tensor` when every input and output is a plain tensor, else what it is (`sequence`,
  `optional`, ...): those cases cannot run through a tensor API.
- `dtypes`: the element types of the model's inputs and outputs, comma-separated.

Usage: gen_conformance.py OUT. Idempotent: does nothing when OUT/index.tsv exists and was
written by the same onnx version (OUT/onnx-version).
"""

import os
import sys
import warnings

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.test.case.node import collect_testcases


def value_kind(vi):
    t = vi.type
    kind = t.WhichOneof("value")
    return "tensor" if kind == "tensor_type" else kind.replace("_type", "")


def elem_name(vi):
    t = vi.type
    if t.WhichOneof("value") != "tensor_type":
        return None
    return onnx.TensorProto.DataType.Name(t.tensor_type.elem_type).lower()


def write_tensor(path, name, value):
    if isinstance(value, onnx.TensorProto):
        # Exotic element types (float8, int4, ...) come as TensorProtos already.
        proto = onnx.TensorProto()
        proto.CopyFrom(value)
        proto.name = name
        with open(path, "wb") as f:
            f.write(proto.SerializeToString())
        return
    if not isinstance(value, np.ndarray):
        value = np.asarray(value)
    proto = numpy_helper.from_array(value, name)
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen_conformance.py OUT")
    out = sys.argv[1]
    stamp = os.path.join(out, "onnx-version")
    index_path = os.path.join(out, "index.tsv")
    if os.path.exists(index_path) and os.path.exists(stamp):
        with open(stamp) as f:
            if f.read().strip() == onnx.__version__:
                return
    os.makedirs(out, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = [c for c in collect_testcases() if c.model is not None]
    single = {}
    for c in cases:
        nodes = c.model.graph.node
        if len(nodes) == 1:
            single[c.name] = nodes[0].op_type
    lines = []
    for c in sorted(cases, key=lambda c: c.name):
        g = c.model.graph
        op = single.get(c.name)
        if op is None:
            # `test_x_expanded`, `test_x_expanded_ver18`: the sibling `test_x`.
            base = c.name.split("_expanded")[0]
            op = single.get(base)
        if op is None:
            # A multi-node case with no sibling: its first non-Constant node.
            op = next((n.op_type for n in g.node if n.op_type != "Constant"), g.node[0].op_type)
        kinds = sorted({value_kind(v) for v in list(g.input) + list(g.output)} - {"tensor"})
        io = "tensor" if not kinds else "+".join(kinds)
        dtypes = sorted({e for e in map(elem_name, list(g.input) + list(g.output)) if e})
        case_dir = os.path.join(out, c.name)
        os.makedirs(case_dir, exist_ok=True)
        onnx.save(c.model, os.path.join(case_dir, "model.onnx"))
        if io == "tensor":
            try:
                for n, (inputs, outputs) in enumerate(c.data_sets):
                    d = os.path.join(case_dir, f"data_{n}")
                    os.makedirs(d, exist_ok=True)
                    for k, v in enumerate(inputs):
                        write_tensor(os.path.join(d, f"input_{k}.pb"), g.input[k].name, v)
                    for k, v in enumerate(outputs):
                        write_tensor(os.path.join(d, f"output_{k}.pb"), g.output[k].name, v)
            except (NotImplementedError, TypeError, ValueError):
                # Data that is not a numeric tensor (e.g. TensorProto objects in an array).
                io = "object"
        lines.append(
            "\t".join([c.name, op, repr(c.rtol), repr(c.atol), io, ",".join(dtypes) or "-"])
        )
    with open(index_path, "w") as f:
        f.write("name\top\trtol\tatol\tio\tdtypes\n")
        f.write("\n".join(lines) + "\n")
    with open(stamp, "w") as f:
        f.write(onnx.__version__ + "\n")
    print(f"gen_conformance.py: {len(lines)} node cases in {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
