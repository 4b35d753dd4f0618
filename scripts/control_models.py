"""Control-flow models with onnxruntime's outputs, for tests/ort_control.rs.

Usage: python scripts/control_models.py OUTDIR

Writes real-shaped models built with onnx.helper, seeded inputs (.npy) and onnxruntime's
outputs (one thread, graph optimizations off), and OUTDIR/cases.tsv with one line per case:
    model <TAB> case <TAB> frozen input names (comma-separated, may be empty)
          <TAB> input files (name=file, comma-separated) <TAB> output files (comma-separated)
Cases of one model with the same frozen inputs are meant to run on one compiled program.

Models:
- resample_if: an If on a sample-rate input choosing between two resamplers to 8 kHz (a
  31-tap low-pass FIR with stride 2 for 16 kHz audio, linear Resize for 8 kHz... of the same
  output length), both reading a peak level computed outside the If: a run-time branch.
- resample_rate: an If on the sample rate whose branches give different lengths (2x
  upsampling of 8 kHz audio, or none): the rate decides a shape, so it is frozen.
- loop_smooth: a Loop of 6 smoothing iterations (a 5-tap Conv and a blend) carrying the
  signal, with each iteration's energy as a scan output.
- lstm_ocr: a bidirectional LSTM over 40 steps (input 64, hidden 48) with bias and initial
  states, as in OCR recognizers; plus a reverse GRU with linear_before_reset.
- scan8: a Scan of opset 8 (batch dim first) over a batch of 2, one scan input backwards and
  one forwards, with a weight read from the outer graph.
- vad_if: silero-vad's pattern: an If on the sample rate whose 8 kHz branch cannot run with a
  16 kHz frame (a MatMul of mismatched widths); onnxruntime runs the 16 kHz case, which must
  run here too (the other branch is a run-time fault).
- table_decoder: a Paddle-style while-loop decoder (SLANet): a counter carried in float,
  x[:, i : min(i + 1, T)] and Range(i, min(i + 1, T)) writing each step's state into an
  accumulator with ScatterElements, until the counter reaches T.
"""

import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def ort_run(path, feeds):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def lowpass(taps, cutoff):
    n = np.arange(taps) - (taps - 1) / 2
    h = np.sinc(2 * cutoff * n) * np.hamming(taps)
    return (h / h.sum()).astype(np.float32)


def resample_if():
    n = 4000
    fir = lowpass(31, 0.25).reshape(1, 1, 31)
    then_g = helper.make_graph(
        [
            helper.make_node("Conv", ["audio", "fir"], ["lp"], strides=[2], pads=[15, 15]),
            helper.make_node("Div", ["lp", "peak"], ["a"]),
        ],
        "fir_decimate",
        [],
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 1, n // 2])],
    )
    else_g = helper.make_graph(
        [
            helper.make_node("Resize", ["audio", "", "half"], ["rs"], mode="linear"),
            helper.make_node("Div", ["rs", "peak"], ["b"]),
        ],
        "linear_resize",
        [],
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 1, n // 2])],
    )
    nodes = [
        helper.make_node("Abs", ["audio"], ["mag"]),
        helper.make_node("ReduceMax", ["mag"], ["peak"], keepdims=1),
        helper.make_node("Equal", ["sr", "rate16k"], ["is16k"]),
        helper.make_node("If", ["is16k"], ["out"], then_branch=then_g, else_branch=else_g),
    ]
    g = helper.make_graph(
        nodes,
        "resample_if",
        [
            helper.make_tensor_value_info("audio", TensorProto.FLOAT, [1, 1, n]),
            helper.make_tensor_value_info("sr", TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 1, n // 2])],
        [
            numpy_helper.from_array(fir, "fir"),
            numpy_helper.from_array(np.array([1, 1, 0.5], np.float32), "half"),
            numpy_helper.from_array(np.array(16000, np.int64), "rate16k"),
        ],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    rng = np.random.default_rng(1)
    t = np.arange(n) / 16000
    audio = (0.6 * np.sin(2 * np.pi * 440 * t) + 0.1 * rng.standard_normal(n)).astype(np.float32)
    cases = []
    for sr in (16000, 8000):
        cases.append(("sr%d" % sr, [], {"audio": audio.reshape(1, 1, n), "sr": np.array(sr, np.int64)}))
    return m, cases


def resample_rate():
    n = 2000
    up = helper.make_graph(
        [helper.make_node("Resize", ["audio", "", "twice"], ["u"], mode="linear")],
        "upsample",
        [],
        [helper.make_tensor_value_info("u", TensorProto.FLOAT, [1, 1, 2 * n])],
    )
    keep = helper.make_graph(
        [helper.make_node("Identity", ["audio"], ["k"])],
        "keep",
        [],
        [helper.make_tensor_value_info("k", TensorProto.FLOAT, [1, 1, n])],
    )
    nodes = [
        helper.make_node("Equal", ["sr", "rate8k"], ["is8k"]),
        helper.make_node("If", ["is8k"], ["out16k"], then_branch=up, else_branch=keep),
        helper.make_node("Tanh", ["out16k"], ["out"]),
    ]
    g = helper.make_graph(
        nodes,
        "resample_rate",
        [
            helper.make_tensor_value_info("audio", TensorProto.FLOAT, [1, 1, n]),
            helper.make_tensor_value_info("sr", TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 1, "L"])],
        [
            numpy_helper.from_array(np.array([1, 1, 2], np.float32), "twice"),
            numpy_helper.from_array(np.array(8000, np.int64), "rate8k"),
        ],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    audio = np.random.default_rng(2).uniform(-1, 1, (1, 1, n)).astype(np.float32)
    return m, [
        ("sr%d" % sr, ["sr"], {"audio": audio, "sr": np.array(sr, np.int64)})
        for sr in (8000, 16000)
    ]


def loop_smooth():
    n = 512
    kern = np.array([0.1, 0.2, 0.4, 0.2, 0.1], np.float32).reshape(1, 1, 5)
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["c_in"], ["c_out"]),
            helper.make_node("Conv", ["x_in", "kern"], ["sm"], pads=[2, 2]),
            helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["fi", "tenth"], ["w"]),
            helper.make_node("Sub", ["sm", "x_in"], ["d"]),
            helper.make_node("Mul", ["d", "w"], ["dw"]),
            helper.make_node("Add", ["x_in", "dw"], ["x_out"]),
            helper.make_node("Mul", ["x_out", "x_out"], ["sq"]),
            helper.make_node("ReduceSum", ["sq"], ["energy"], keepdims=0),
        ],
        "smooth_step",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [1, 1, n]),
        ],
        [
            helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x_out", TensorProto.FLOAT, [1, 1, n]),
            helper.make_tensor_value_info("energy", TensorProto.FLOAT, []),
        ],
    )
    g = helper.make_graph(
        [helper.make_node("Loop", ["trips", "", "x"], ["y", "energies"], body=body)],
        "loop_smooth",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, n])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, n]),
            helper.make_tensor_value_info("energies", TensorProto.FLOAT, [6]),
        ],
        [
            numpy_helper.from_array(np.array(6, np.int64), "trips"),
            numpy_helper.from_array(kern, "kern"),
            numpy_helper.from_array(np.array(0.1, np.float32), "tenth"),
        ],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    x = np.random.default_rng(3).uniform(-1, 1, (1, 1, n)).astype(np.float32)
    return m, [("x", [], {"x": x})]


def lstm_ocr():
    seq, inp, hid, d = 40, 64, 48, 2
    rng = np.random.default_rng(4)
    w = lambda *s: (rng.standard_normal(s) * 0.15).astype(np.float32)
    nodes = [
        helper.make_node(
            "LSTM", ["x", "W", "R", "B", "", "h0", "c0"], ["y", "yh", "yc"],
            hidden_size=hid, direction="bidirectional",
        ),
        helper.make_node("Transpose", ["y"], ["yt"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["yt", "shape"], ["feat"]),
        helper.make_node(
            "GRU", ["feat", "Wg", "Rg", "Bg"], ["gy", "gh"],
            hidden_size=hid, direction="reverse", linear_before_reset=1,
        ),
    ]
    g = helper.make_graph(
        nodes,
        "lstm_ocr",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, 1, inp]),
            helper.make_tensor_value_info("h0", TensorProto.FLOAT, [d, 1, hid]),
            helper.make_tensor_value_info("c0", TensorProto.FLOAT, [d, 1, hid]),
        ],
        [
            helper.make_tensor_value_info("yh", TensorProto.FLOAT, [d, 1, hid]),
            helper.make_tensor_value_info("yc", TensorProto.FLOAT, [d, 1, hid]),
            helper.make_tensor_value_info("gy", TensorProto.FLOAT, [seq, 1, 1, hid]),
            helper.make_tensor_value_info("gh", TensorProto.FLOAT, [1, 1, hid]),
        ],
        [
            numpy_helper.from_array(w(d, 4 * hid, inp), "W"),
            numpy_helper.from_array(w(d, 4 * hid, hid), "R"),
            numpy_helper.from_array(w(d, 8 * hid), "B"),
            numpy_helper.from_array(np.array([seq, 1, 2 * hid], np.int64), "shape"),
            numpy_helper.from_array(w(1, 3 * hid, 2 * hid), "Wg"),
            numpy_helper.from_array(w(1, 3 * hid, hid), "Rg"),
            numpy_helper.from_array(w(1, 6 * hid), "Bg"),
        ],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    feeds = {
        "x": rng.uniform(-1, 1, (seq, 1, inp)).astype(np.float32),
        "h0": rng.uniform(-0.5, 0.5, (d, 1, hid)).astype(np.float32),
        "c0": rng.uniform(-0.5, 0.5, (d, 1, hid)).astype(np.float32),
    }
    return m, [("x", [], feeds)]


def scan8():
    b, t, c = 2, 5, 3
    body = helper.make_graph(
        [
            helper.make_node("Mul", ["x", "w"], ["xw"]),
            helper.make_node("Add", ["s", "xw"], ["s1"]),
            helper.make_node("Mul", ["s1", "y"], ["so"]),
            helper.make_node("Identity", ["so"], ["p"]),
        ],
        "step",
        [
            helper.make_tensor_value_info("s", TensorProto.FLOAT, [c]),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [c]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [c]),
        ],
        [
            helper.make_tensor_value_info("so", TensorProto.FLOAT, [c]),
            helper.make_tensor_value_info("p", TensorProto.FLOAT, [c]),
        ],
    )
    node = helper.make_node(
        "Scan", ["", "init", "X", "Y"], ["final", "P"],
        num_scan_inputs=2, directions=[1, 0], body=body,
    )
    g = helper.make_graph(
        [node],
        "scan8",
        [
            helper.make_tensor_value_info("init", TensorProto.FLOAT, [b, c]),
            helper.make_tensor_value_info("X", TensorProto.FLOAT, [b, t, c]),
            helper.make_tensor_value_info("Y", TensorProto.FLOAT, [b, t, c]),
        ],
        [
            helper.make_tensor_value_info("final", TensorProto.FLOAT, [b, c]),
            helper.make_tensor_value_info("P", TensorProto.FLOAT, [b, t, c]),
        ],
        [numpy_helper.from_array(np.array([0.5, -1.0, 2.0], np.float32), "w")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 8)])
    rng = np.random.default_rng(5)
    feeds = {
        "init": rng.uniform(-1, 1, (b, c)).astype(np.float32),
        "X": rng.uniform(-1, 1, (b, t, c)).astype(np.float32),
        "Y": rng.uniform(0.5, 1.0, (b, t, c)).astype(np.float32),
    }
    return m, [("x", [], feeds)]


def vad_if():
    n = 512
    w = np.random.default_rng(5).uniform(-0.2, 0.2, (128, 8)).astype(np.float32)
    then_g = helper.make_graph(
        [
            helper.make_node("Reshape", ["audio", "frames16k"], ["f16"]),
            helper.make_node("MatMul", ["f16", "w"], ["a"]),
        ],
        "frames_16k",
        [],
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, None)],
    )
    else_g = helper.make_graph(
        [
            # [2, n / 2], computed from the frame's shape: onnxruntime's inference does not
            # see it, as in silero-vad.
            helper.make_node("Shape", ["audio"], ["shp"], start=1),
            helper.make_node("Div", ["shp", "two"], ["half"]),
            helper.make_node("Concat", ["two", "half"], ["frames8k"], axis=0),
            helper.make_node("Reshape", ["audio", "frames8k"], ["f8"]),
            helper.make_node("MatMul", ["f8", "w"], ["b"]),
        ],
        "frames_8k",
        [],
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, None)],
    )
    nodes = [
        helper.make_node("Equal", ["sr", "rate16k"], ["is16k"]),
        helper.make_node("If", ["is16k"], ["feat"], then_branch=then_g, else_branch=else_g),
        helper.make_node("Sigmoid", ["feat"], ["prob"]),
    ]
    g = helper.make_graph(
        nodes,
        "vad_if",
        [
            helper.make_tensor_value_info("audio", TensorProto.FLOAT, [1, n]),
            helper.make_tensor_value_info("sr", TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [4, 8])],
        [
            numpy_helper.from_array(w, "w"),
            numpy_helper.from_array(np.array([4, 128], np.int64), "frames16k"),
            numpy_helper.from_array(np.array([2], np.int64), "two"),
            numpy_helper.from_array(np.array(16000, np.int64), "rate16k"),
        ],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])
    audio = np.random.default_rng(6).uniform(-1, 1, (1, n)).astype(np.float32)
    return m, [("sr16000", [], {"audio": audio, "sr": np.array(16000, np.int64)})]


def table_decoder():
    t, d = 40, 16
    rng = np.random.default_rng(7)
    f32 = TensorProto.FLOAT
    i64 = TensorProto.INT64
    c = lambda name, v, dt=np.int64: numpy_helper.from_array(np.array(v, dt), name)
    body = helper.make_graph(
        [
            helper.make_node("Cast", ["i"], ["fi"], to=f32),
            helper.make_node("Add", ["fi", "one"], ["fi1"]),
            helper.make_node("Cast", ["fi1"], ["i1"], to=i64),
            helper.make_node("Min", ["steps", "i1"], ["end"]),
            helper.make_node("Slice", ["feats", "i", "end", "ax1"], ["col"]),
            helper.make_node("Squeeze", ["col", "ax1"], ["x"]),
            helper.make_node("MatMul", ["x", "wx"], ["xw"]),
            helper.make_node("MatMul", ["h", "wh"], ["hw"]),
            helper.make_node("Add", ["xw", "hw"], ["pre"]),
            helper.make_node("Tanh", ["pre"], ["h1"]),
            helper.make_node("Squeeze", ["i"], ["si"]),
            helper.make_node("Squeeze", ["end"], ["se"]),
            helper.make_node("Range", ["si", "se", "unit"], ["r"]),
            helper.make_node("Reshape", ["r", "shape3"], ["r3"]),
            helper.make_node("Tile", ["r3", "reps"], ["idx"]),
            helper.make_node("Unsqueeze", ["h1", "ax1"], ["upd"]),
            helper.make_node("ScatterElements", ["acc", "idx", "upd"], ["acc1"], axis=1),
            helper.make_node("Less", ["i1", "steps"], ["more"]),
            helper.make_node("Squeeze", ["more"], ["go1"]),
        ],
        "step",
        [
            helper.make_tensor_value_info("it", i64, []),
            helper.make_tensor_value_info("go", TensorProto.BOOL, []),
            helper.make_tensor_value_info("i", i64, [1]),
            helper.make_tensor_value_info("h", f32, [1, d]),
            helper.make_tensor_value_info("acc", f32, [1, t, d]),
        ],
        [
            helper.make_tensor_value_info("go1", TensorProto.BOOL, []),
            helper.make_tensor_value_info("i1", i64, [1]),
            helper.make_tensor_value_info("h1", f32, [1, d]),
            helper.make_tensor_value_info("acc1", f32, [1, t, d]),
        ],
        [
            c("one", 1.0, np.float32),
            c("steps", [t]),
            c("ax1", [1]),
            c("unit", 1),
            c("shape3", [1, 1, 1]),
            c("reps", [1, 1, d]),
        ],
    )
    g = helper.make_graph(
        [helper.make_node("Loop", ["max", "yes", "i0", "h0", "acc0"], ["i_end", "h_end", "states"], body=body)],
        "table_decoder",
        [helper.make_tensor_value_info("feats", f32, [1, t, d])],
        [
            helper.make_tensor_value_info("h_end", f32, [1, d]),
            helper.make_tensor_value_info("states", f32, [1, t, d]),
        ],
        [
            c("max", 1024),
            c("yes", True, np.bool_),
            c("i0", [0]),
            c("h0", np.zeros((1, d)), np.float32),
            c("acc0", np.zeros((1, t, d)), np.float32),
            c("wx", rng.uniform(-0.3, 0.3, (d, d)), np.float32),
            c("wh", rng.uniform(-0.3, 0.3, (d, d)), np.float32),
        ],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    feats = rng.uniform(-1, 1, (1, t, d)).astype(np.float32)
    return m, [("features", [], {"feats": feats})]


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    lines = []
    for build in (resample_if, resample_rate, loop_smooth, lstm_ocr, scan8, vad_if, table_decoder):
        model, cases = build()
        onnx.checker.check_model(model)
        name = build.__name__
        path = os.path.join(out, name + ".onnx")
        onnx.save(model, path)
        for case, frozen, feeds in cases:
            ins = []
            for k, v in feeds.items():
                f = "%s_%s_in_%s.npy" % (name, case, k)
                np.save(os.path.join(out, f), v)
                ins.append("%s=%s" % (k, f))
            outs = []
            for k, v in enumerate(ort_run(path, feeds)):
                f = "%s_%s_out%d.npy" % (name, case, k)
                np.save(os.path.join(out, f), np.ascontiguousarray(v))
                outs.append(f)
            lines.append("\t".join([name + ".onnx", case, ",".join(frozen), ",".join(ins), ",".join(outs)]))
    with open(os.path.join(out, "cases.tsv"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
