//! `arenac run` with the storage types (float8, float4, int4, int2): inputs from TensorProto
//! `.pb` files written by onnx (4-bit packed), outputs written as `.pb` that onnx reads back,
//! and a clear error for a `.npy` input.

use arenac::DType;
use arenac_compiler::import::builder::{Attr, Dim, ModelBuilder};
use prost::Message;

mod common;
use common::arenac;

/// `x: int4[6]` → Cast to f32 → `f`; `x` → Transpose-free Identity → `y: int4`; `f` → Cast to
/// float8 E4M3FN with saturate=0 → `e`.
fn model(dir: &std::path::Path) -> std::path::PathBuf {
    let to = |d: DType| ("to", Attr::Int(i64::from(d.to_onnx())));
    let m = ModelBuilder::new("storage", 24)
        .input("x", DType::I4, &[Dim::N(6)])
        .node("c", "Cast", &["x"], &["f"], vec![to(DType::F32)])
        .node("i", "Identity", &["x"], &["y"], vec![])
        .node("m", "Mul", &["f", "k"], &["fk"], vec![])
        .initializer(
            "k",
            &arenac_compiler::ir::tensor::Tensor::f32(vec![], &[100.0]),
        )
        .node(
            "e",
            "Cast",
            &["fk"],
            &["e"],
            vec![to(DType::F8E4M3FN), ("saturate", Attr::Int(0))],
        )
        .output("f", DType::F32, &[])
        .output("y", DType::I4, &[])
        .output("e", DType::F8E4M3FN, &[])
        .build();
    let path = dir.join("storage.onnx");
    std::fs::write(&path, m.encode_to_vec()).unwrap();
    path
}

#[test]
fn storage_types_go_through_pb_files() {
    let Some(py) = std::env::var("ARENAC_PYTHON")
        .ok()
        .filter(|p| !p.is_empty())
    else {
        println!("ARENAC_PYTHON is unset: skipping (bash scripts/test.sh sets it)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let model = model(dir.path());
    let x = dir.path().join("x.pb");
    let write = r#"
import sys, numpy as np, ml_dtypes, onnx
from onnx import numpy_helper
a = np.array([-8, -1, 0, 1, 5, 7], dtype=ml_dtypes.int4)
onnx.save_tensor(numpy_helper.from_array(a, "x"), sys.argv[1])
"#;
    let st = std::process::Command::new(&py)
        .args(["-c", write, x.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(st.success());
    let out_dir = dir.path().join("out");
    let (code, out, err) = arenac(&[
        "run",
        model.to_str().unwrap(),
        "--input",
        &format!("x={}", x.display()),
        "--output-dir",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("output_1.pb (y i4[6]), output_2.pb (e f8e4m3fn[6])"),
        "{out}"
    );
    let read = r#"
import sys, numpy as np, onnx
from onnx import numpy_helper
d = sys.argv[1]
for i, ext in [(0, "npy"), (1, "pb"), (2, "pb")]:
    p = f"{d}/output_{i}.{ext}"
    a = np.load(p) if ext == "npy" else numpy_helper.to_array(onnx.load_tensor(p))
    print(a.dtype.name, " ".join(str(v) for v in a.astype(np.float32).ravel()))
"#;
    let got = std::process::Command::new(&py)
        .args(["-c", read, out_dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        got.status.success(),
        "{}",
        String::from_utf8_lossy(&got.stderr)
    );
    // float8 E4M3FN without saturation: 500 and 700 overflow to NaN, -800 to -NaN.
    let want = [
        "float32 -8.0 -1.0 0.0 1.0 5.0 7.0",
        "int4 -8.0 -1.0 0.0 1.0 5.0 7.0",
        "float8_e4m3fn nan -96.0 0.0 96.0 nan nan",
    ];
    let got = String::from_utf8_lossy(&got.stdout);
    assert_eq!(got.lines().collect::<Vec<_>>(), want, "{got}");
}

#[test]
fn an_npy_cannot_carry_a_storage_type() {
    let dir = tempfile::tempdir().unwrap();
    let model = model(dir.path());
    let x = dir.path().join("x.npy");
    let t = arenac::io::TensorBuf::new(DType::I8, vec![6], vec![0, 1, 2, 3, 4, 5]).unwrap();
    arenac::io::npy::write_npy(&x, t.view()).unwrap();
    let (code, _, err) = arenac(&[
        "run",
        model.to_str().unwrap(),
        "--input",
        &format!("x={}", x.display()),
    ]);
    assert_eq!(code, 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("i4") && err.contains(".pb"), "{err}");
}
