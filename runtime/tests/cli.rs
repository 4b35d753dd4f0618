//! The `arenac` binary: exit codes and one-line errors for bad files, never a panic.

mod common;

use common::arenac;

fn assert_one_line_error(stderr: &str, needle: &str) {
    assert!(!stderr.contains("panicked"), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    assert!(lines[0].contains(needle), "{stderr}");
}

#[test]
fn broken_files_exit_nonzero_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("broken.onnx");
    std::fs::write(
        &garbage,
        b"\x08\x07\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01junk",
    )
    .unwrap();
    let (code, _, err) = arenac(&["compile", garbage.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_one_line_error(&err, "not a valid ONNX model");

    let empty = dir.path().join("empty.onnx");
    std::fs::write(&empty, b"").unwrap();
    let (code, _, err) = arenac(&["compile", empty.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_one_line_error(&err, "empty");

    let (code, _, err) = arenac(&["compile", dir.path().join("nope.onnx").to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_one_line_error(&err, "cannot read");
}

#[test]
fn bad_shape_spec() {
    let (code, _, err) = arenac(&["compile", "x.onnx", "--shape", "x=1xq"]);
    assert_eq!(code, 1);
    assert_one_line_error(&err, "--shape x=1xq");
}

#[test]
fn ops_lists_the_op_set() {
    let (code, out, _) = arenac(&["ops"]);
    assert_eq!(code, 0);
    assert!(out.contains("Constant"), "{out}");
}
