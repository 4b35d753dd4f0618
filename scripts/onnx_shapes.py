"""Writes what ONNX's own shape inference knows about a model's values, as JSON.

Usage: python scripts/onnx_shapes.py MODEL.onnx OUT.json

OUT.json maps every value name that onnx.shape_inference knows -- graph inputs (initializers
excluded), value_info after infer_shapes(strict_mode=True, data_prop=True), graph outputs -- to
[elem_type, dims]: elem_type is the TensorProto data type code (1 = float, 7 = int64, ...),
dims a list whose entries are ints (known dims), strings (symbolic dims) or null (unknown);
dims is null when even the rank is unknown. Non-tensor values are left out.

arenac's tests (tests/models.rs) run this and compare every name present in both with arenac's
imported graph.
"""

import json
import sys

import onnx
from onnx import shape_inference


def tensor_entry(vi: onnx.ValueInfoProto):
    if not vi.type.HasField("tensor_type"):
        return None
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return [tt.elem_type, None]
    dims = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            dims.append(d.dim_value)
        elif d.HasField("dim_param"):
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return [tt.elem_type, dims]


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    model = onnx.load(sys.argv[1])
    inferred = shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    g = inferred.graph
    inits = {t.name for t in g.initializer}
    out = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        if vi.name in inits and vi.name not in {o.name for o in g.output}:
            continue
        entry = tensor_entry(vi)
        if entry is not None:
            out[vi.name] = entry
    lines = [f"{json.dumps(k)}:{json.dumps(v)}" for k, v in sorted(out.items())]
    with open(sys.argv[2], "w") as f:
        f.write("{\n" + ",\n".join(lines) + "\n}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
