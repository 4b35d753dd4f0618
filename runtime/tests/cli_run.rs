//! `arenac run`: argument and file errors are one line with exit code 1, never a panic; runs
//! of the demo model and of a two-input, two-output model produce the expected files.

mod common;

use common::arenac;

fn assert_one_line_error(code: i32, stderr: &str, needle: &str) {
    assert_eq!(code, 1, "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    assert!(lines[0].contains(needle), "{needle:?} not in {stderr}");
}

fn digits() -> String {
    common::repo("models/digits/digits.onnx")
        .display()
        .to_string()
}

#[test]
fn missing_input_file() {
    let (code, _, err) = arenac(&["run", &digits(), "--input", "pixels=/nonexistent/x.npy"]);
    assert_one_line_error(code, &err, "cannot read /nonexistent/x.npy");
    let (code, _, err) = arenac(&["run", &digits(), "--input", "/nonexistent/y.pb"]);
    assert_one_line_error(code, &err, "cannot read /nonexistent/y.pb");
    let (code, _, err) = arenac(&["run", &digits(), "--input", "pixels="]);
    assert_one_line_error(code, &err, "no file");
}

#[test]
fn missing_model_and_labels() {
    let (code, _, err) = arenac(&["run", "/nonexistent/m.onnx"]);
    assert_one_line_error(code, &err, "cannot read /nonexistent/m.onnx");
    let (code, _, err) = arenac(&["run", &digits(), "--labels", "/nonexistent/l.npy"]);
    assert_one_line_error(code, &err, "cannot read /nonexistent/l.npy");
    let samples = common::repo("models/digits/samples.npy");
    let (code, _, err) = arenac(&["run", &digits(), "--labels", samples.to_str().unwrap()]);
    assert_one_line_error(code, &err, "labels must be integers");
}

#[test]
fn bad_input_files() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.npy");
    std::fs::write(&bad, b"\x93NUMPY\x01\x00\x04\x00{}  ").unwrap();
    let (code, _, err) = arenac(&["run", &digits(), "--input", bad.to_str().unwrap()]);
    assert_one_line_error(code, &err, "bad.npy: bad .npy header");
    let junk = dir.path().join("junk.pb");
    std::fs::write(&junk, b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff").unwrap();
    let (code, _, err) = arenac(&["run", &digits(), "--input", junk.to_str().unwrap()]);
    assert_one_line_error(code, &err, "junk.pb: not a valid ONNX TensorProto");
}

#[test]
fn too_many_or_repeated_inputs() {
    let samples = common::repo("models/digits/samples.npy");
    let s = samples.to_str().unwrap();
    let (code, _, err) = arenac(&["run", &digits(), "--input", s, "--input", s]);
    assert_one_line_error(
        code,
        &err,
        "the model has only 1 input(s) (pixels), this is input #2",
    );
    let named = format!("pixels={s}");
    let (code, _, err) = arenac(&["run", &digits(), "--input", &named, "--input", s]);
    assert_one_line_error(code, &err, "input 'pixels' is given twice");
}

#[test]
fn repeat_must_be_positive() {
    let (code, _, err) = arenac(&["run", &digits(), "--repeat", "0"]);
    assert_ne!(code, 0);
    assert!(err.contains("--repeat"), "{err}");
}

#[test]
fn runs_the_demo_model() {
    let samples = common::repo("models/digits/samples.npy");
    let labels = common::repo("models/digits/labels.npy");
    let (code, out, err) = arenac(&[
        "run",
        &digits(),
        "--input",
        samples.to_str().unwrap(),
        "--labels",
        labels.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("accuracy: 98/100 (98.0%)"), "{out}");
}

#[test]
fn compile_and_plan_still_work_without_kernels() {
    let (code, out, err) = arenac(&["compile", &digits(), "--shape", "N=4"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("pixels f32[4,64]"), "{out}");
    let (code, _, err) = arenac(&["plan", &digits(), "--shape", "N=4"]);
    assert_eq!(code, 0, "{err}");
}

/// Two inputs (one by position from a `.pb`, one by name from a `.npy`), two outputs written
/// in graph-output order; the inputs' shapes bind the symbolic dim.
#[test]
fn named_and_positional_inputs_and_two_outputs() {
    use arenac::DType;
    use arenac::io::{TensorBuf, npy, pb};
    use arenac_compiler::import::builder::{Dim, ModelBuilder};
    use prost::Message;

    let m = ModelBuilder::new("two", 17)
        .input("x", DType::F32, &[Dim::Sym("N"), Dim::N(3)])
        .input("y", DType::F32, &[Dim::Sym("N"), Dim::N(3)])
        .node("add", "Add", &["x", "y"], &["sum"], vec![])
        .node("mul", "Mul", &["x", "y"], &["prod"], vec![])
        .output("prod", DType::F32, &[Dim::Sym("N"), Dim::N(3)])
        .output("sum", DType::F32, &[Dim::Sym("N"), Dim::N(3)])
        .build();
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("two.onnx");
    std::fs::write(&model, m.encode_to_vec()).unwrap();
    let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let x = TensorBuf::new(DType::F32, vec![2, 3], f32s(&[1., 2., 3., 4., 5., 6.])).unwrap();
    let y = TensorBuf::new(DType::F32, vec![2, 3], f32s(&[0.5; 6])).unwrap();
    let xpb = dir.path().join("input_0.pb");
    std::fs::write(&xpb, pb::encode_pb("x", &x)).unwrap();
    let ynpy = dir.path().join("y.npy");
    npy::write_npy(&ynpy, y.view()).unwrap();
    let out_dir = dir.path().join("out");
    let y_arg = format!("y={}", ynpy.display());
    let (code, out, err) = arenac(&[
        "run",
        model.to_str().unwrap(),
        "--input",
        &y_arg,
        "--input",
        xpb.to_str().unwrap(),
        "--output-dir",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("output 0: prod f32[2,3]"), "{out}");
    assert!(out.contains("output 1: sum f32[2,3]"), "{out}");
    let prod = npy::read_npy(&out_dir.join("output_0.npy")).unwrap();
    let sum = npy::read_npy(&out_dir.join("output_1.npy")).unwrap();
    assert_eq!(prod.view().to_f32_vec(), [0.5, 1., 1.5, 2., 2.5, 3.]);
    assert_eq!(sum.view().to_f32_vec(), [1.5, 2.5, 3.5, 4.5, 5.5, 6.5]);

    // An input of the wrong dtype is named, expected vs given, on one line.
    let yi = TensorBuf::new(DType::I64, vec![2, 3], vec![0; 48]).unwrap();
    let yi_path = dir.path().join("yi.npy");
    npy::write_npy(&yi_path, yi.view()).unwrap();
    let yi_arg = format!("y={}", yi_path.display());
    let x_arg = format!("x={}", xpb.display());
    let (code, _, err) = arenac(&[
        "run",
        model.to_str().unwrap(),
        "--input",
        &x_arg,
        "--input",
        &yi_arg,
    ]);
    assert_one_line_error(code, &err, "input 'y': expected dtype f32, given i64");
}
