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

/// `y = x + z` over `x: f32[n, 1]`, `z: f32[1, n]`: small inputs, an `n x n` output.
fn outer_sum_model(dir: &std::path::Path, n: usize) -> std::path::PathBuf {
    use arenac::DType;
    use arenac_compiler::import::builder::{Dim, ModelBuilder};
    use prost::Message;
    let m = ModelBuilder::new("outer", 13)
        .input("x", DType::F32, &[Dim::N(n), Dim::N(1)])
        .input("z", DType::F32, &[Dim::N(1), Dim::N(n)])
        .node("sum", "Add", &["x", "z"], &["y"], vec![])
        .output("y", DType::F32, &[])
        .build();
    let path = dir.join(format!("outer{n}.onnx"));
    std::fs::write(&path, m.encode_to_vec()).unwrap();
    path
}

#[test]
fn plan_over_the_memory_limit_is_a_compile_error() {
    let dir = tempfile::tempdir().unwrap();
    // 1000 x 1000 f32: about 3.8 MiB of arena.
    let model = outer_sum_model(dir.path(), 1000);
    let model = model.to_str().unwrap();
    let (code, _, err) = arenac(&["compile", model, "--memory-limit", "1MiB"]);
    assert_eq!(code, 1);
    assert_one_line_error(&err, "memory limit exceeded");
    assert!(err.contains("--memory-limit 1MiB"), "{err}");
    let (code, _, err) = arenac(&["compile", model, "--memory-limit", "64MiB"]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn plan_that_can_never_fit_physical_memory_is_a_compile_error() {
    if arenac_compiler::arena::budget::physical_ram().is_err() {
        return; // no /proc/meminfo: nothing is enforced, and nothing to test
    }
    let dir = tempfile::tempdir().unwrap();
    // 10^6 x 10^6 f32: a 10^12-element intermediate, 3.6 TiB; refused without allocating.
    let model = outer_sum_model(dir.path(), 1_000_000);
    let (code, _, err) = arenac(&["compile", model.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_one_line_error(&err, "memory limit exceeded");
    assert!(err.contains("physical RAM"), "{err}");
    let (code, _, err) = arenac(&["run", model.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_one_line_error(&err, "memory limit exceeded");
}
