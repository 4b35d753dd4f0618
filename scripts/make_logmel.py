"""Writes two audio front-end models, seeded inputs and onnxruntime's outputs.

Usage: python scripts/make_logmel.py OUTDIR

- stft.onnx: the STFT of 1 s of 16 kHz audio, [1, 16000] -> [1, 97, 257, 2] (512-point frames
  every 160 samples, a periodic Hann window of 400 samples zero-padded to 512, one-sided);
- logmel.onnx: the log-mel spectrogram of the same audio, as speech front ends compute it:
  STFT -> |X|^2 (Pow 2, ReduceSum over re/im) -> MatMul with an 80-band MelWeightMatrix
  (20 Hz .. 8 kHz) -> Log(x + 1e-6), [1, 16000] -> [1, 97, 80]. The window and the mel matrix
  are computed in the graph from constants (HannWindow, Pad, MelWeightMatrix), as exporters
  write them.

For each model NAME: NAME.onnx, NAME_input_0.npy (seeded audio in [-1, 1]) and
NAME_output_0.npy (onnxruntime, one thread, graph optimizations off). Used by
tests/ort_models.rs and for timing with scripts/bench.py --exports OUTDIR.
"""

import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper


def const_i64(name, v):
    return helper.make_tensor(name, TensorProto.INT64, [], [v])


def front_end(log_mel):
    nodes = [
        helper.make_node("Reshape", ["audio", "sig_shape"], ["signal"]),
        helper.make_node("HannWindow", ["win_len"], ["hann"], periodic=1),
        helper.make_node("Pad", ["hann", "win_pads"], ["window"]),
        helper.make_node("STFT", ["signal", "step", "window", "n_fft"], ["spec"], onesided=1),
    ]
    inits = [
        helper.make_tensor("sig_shape", TensorProto.INT64, [3], [1, 16000, 1]),
        const_i64("win_len", 400),
        helper.make_tensor("win_pads", TensorProto.INT64, [2], [56, 56]),
        const_i64("step", 160),
        const_i64("n_fft", 512),
    ]
    out = helper.make_tensor_value_info("spec", TensorProto.FLOAT, [1, 97, 257, 2])
    if log_mel:
        nodes += [
            helper.make_node("Pow", ["spec", "two"], ["sq"]),
            helper.make_node("ReduceSum", ["sq", "last"], ["power"], keepdims=0),
            helper.make_node(
                "MelWeightMatrix", ["mels", "n_fft", "rate", "lo", "hi"], ["mel"]
            ),
            helper.make_node("MatMul", ["power", "mel"], ["mel_power"]),
            helper.make_node("Add", ["mel_power", "eps"], ["floored"]),
            helper.make_node("Log", ["floored"], ["logmel"]),
        ]
        inits += [
            helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]),
            helper.make_tensor("last", TensorProto.INT64, [1], [-1]),
            const_i64("mels", 80),
            const_i64("rate", 16000),
            helper.make_tensor("lo", TensorProto.FLOAT, [], [20.0]),
            helper.make_tensor("hi", TensorProto.FLOAT, [], [8000.0]),
            helper.make_tensor("eps", TensorProto.FLOAT, [], [1e-6]),
        ]
        out = helper.make_tensor_value_info("logmel", TensorProto.FLOAT, [1, 97, 80])
    graph = helper.make_graph(
        nodes,
        "logmel" if log_mel else "stft",
        [helper.make_tensor_value_info("audio", TensorProto.FLOAT, [1, 16000])],
        [out],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    audio = np.random.default_rng(16000).uniform(-1, 1, (1, 16000)).astype(np.float32)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    for name, log_mel in [("stft", False), ("logmel", True)]:
        path = os.path.join(outdir, f"{name}.onnx")
        onnx.save(front_end(log_mel), path)
        sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        (out,) = sess.run(None, {"audio": audio})
        np.save(os.path.join(outdir, f"{name}_input_0.npy"), audio)
        np.save(os.path.join(outdir, f"{name}_output_0.npy"), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
