//! `arenac run`: argument and file errors are one line with exit code 1, never a panic; while
//! code generation is absent the codegen error is that one line.

use std::process::Command;

mod common;

fn arenac(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_arenac"))
        .args(args)
        .output()
        .expect("run arenac");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

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
fn runs_or_reports_the_codegen_error() {
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
    if common::is_codegen_missing(&err) {
        println!("skipped: codegen not available");
        assert_one_line_error(code, &err, "no kernel yet");
        assert!(err.contains("node '"), "{err}");
        return;
    }
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
