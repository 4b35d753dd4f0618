"""Trains the demo model and writes it as ONNX.

A small MLP (64 -> 64 -> 32 -> 10) trained with scikit-learn on its bundled 8x8 digits dataset
(`load_digits`, no download), with fixed seeds. Writes, next to this script:

- digits.onnx   the model: input "pixels" float[N,64] (pixel values / 16, so in [0, 1]),
                output "probs" float[N,10] (softmax class probabilities), opset 17,
                default-domain ops only (Gemm, MatMul, Add, Relu, Softmax), weights as
                initializers, model name "digits_mlp";
- samples.npy   float32 [100,64]: the first 100 samples of the held-out split, scaled;
- labels.npy    int64 [100]: their labels;
- expected_probs.npy  float32 [100,10]: onnxruntime's output on samples.npy.

Prints the held-out accuracy of the scikit-learn model and of onnxruntime running digits.onnx;
they must agree (the script fails otherwise).

Usage: python models/digits/make_model.py   (with .venv from scripts/setup-venv.sh)
"""

import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

SEED = 0
HERE = os.path.dirname(os.path.abspath(__file__))


def build_onnx(mlp: MLPClassifier) -> onnx.ModelProto:
    (w1, w2, w3) = [w.astype(np.float32) for w in mlp.coefs_]
    (b1, b2, b3) = [b.astype(np.float32) for b in mlp.intercepts_]
    inits = [
        numpy_helper.from_array(w1, "fc1.weight"),  # [64,64], used as Gemm B
        numpy_helper.from_array(b1, "fc1.bias"),
        numpy_helper.from_array(w2, "fc2.weight"),  # [64,32], used by MatMul
        numpy_helper.from_array(b2, "fc2.bias"),
        # [10,32]: stored transposed, used as Gemm B with transB=1 (like PyTorch's Linear)
        numpy_helper.from_array(np.ascontiguousarray(w3.T), "fc3.weight"),
        numpy_helper.from_array(b3, "fc3.bias"),
    ]
    nodes = [
        helper.make_node("Gemm", ["pixels", "fc1.weight", "fc1.bias"], ["fc1"], name="fc1"),
        helper.make_node("Relu", ["fc1"], ["relu1"], name="relu1"),
        helper.make_node("MatMul", ["relu1", "fc2.weight"], ["fc2.mm"], name="fc2.matmul"),
        helper.make_node("Add", ["fc2.mm", "fc2.bias"], ["fc2"], name="fc2.add"),
        helper.make_node("Relu", ["fc2"], ["relu2"], name="relu2"),
        helper.make_node(
            "Gemm", ["relu2", "fc3.weight", "fc3.bias"], ["logits"], name="fc3", transB=1
        ),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "digits_mlp",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 10])],
        initializer=inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17)],
        producer_name="arenac models/digits/make_model.py",
        # An IR version every onnxruntime of the last years loads.
        ir_version=8,
    )
    model.graph.doc_string = "8x8 digit classifier; pixels = raw digits pixel values / 16"
    onnx.checker.check_model(model, full_check=True)
    return model


def main() -> int:
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.25, random_state=SEED, stratify=y
    )

    mlp = MLPClassifier(hidden_layer_sizes=(64, 32), max_iter=500, random_state=SEED)
    mlp.fit(x_train, y_train)
    sk_pred = mlp.predict(x_test)
    sk_acc = float(np.mean(sk_pred == y_test))

    model = build_onnx(mlp)
    path = os.path.join(HERE, "digits.onnx")
    onnx.save(model, path)

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    (probs,) = sess.run(["probs"], {"pixels": x_test})
    ort_pred = probs.argmax(axis=1)
    ort_acc = float(np.mean(ort_pred == y_test))
    max_diff = float(np.abs(probs - mlp.predict_proba(x_test)).max())

    np.save(os.path.join(HERE, "samples.npy"), np.ascontiguousarray(x_test[:100]))
    np.save(os.path.join(HERE, "labels.npy"), y_test[:100])
    np.save(os.path.join(HERE, "expected_probs.npy"), np.ascontiguousarray(probs[:100]))

    n = len(y_test)
    print(f"train samples: {len(y_train)}, held-out samples: {n}")
    print(f"scikit-learn held-out accuracy: {sk_acc:.4f} ({int(round(sk_acc * n))}/{n})")
    print(f"onnxruntime  held-out accuracy: {ort_acc:.4f} ({int(round(ort_acc * n))}/{n})")
    print(f"max |probs(onnxruntime) - predict_proba(scikit-learn)|: {max_diff:.2e}")
    first = float(np.mean(ort_pred[:100] == y_test[:100]))
    print(f"onnxruntime accuracy on samples.npy (first 100): {first:.2f}")
    if not np.array_equal(sk_pred, ort_pred) or max_diff > 1e-4:
        print("error: scikit-learn and onnxruntime disagree", file=sys.stderr)
        return 1
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
