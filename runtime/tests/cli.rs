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

/// A Paddle-style input `[-1, 3, "?", "?"]`: each open dim is its own symbol, named `x[i]` in
/// the warning, and `--shape x[i]=S` binds one of them.
#[test]
fn anonymous_dims_are_bound_one_by_one() {
    use prost::Message;
    let m = arenac_compiler::import::text::parse_model_text(
        r#"<ir_version: 8, opset_import: ["" : 13]>
        paddle (float[-1, 3, "?", "?"] x) => (float[-1, 3, "?", "?"] y) { y = Relu(x) }"#,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("paddle.onnx");
    std::fs::write(&model, m.encode_to_vec()).unwrap();
    let model = model.to_str().unwrap();

    let (code, out, err) = arenac(&["compile", model]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("x f32[1,3,1,1]"), "{out}");
    assert_eq!(
        err.trim(),
        "warning: unbound symbolic dims default to 1: x[0], x[2], x[3]; bind them with \
         --shape: an unnamed dim (-1, '?' or none) as x[0]=8, a whole input as x=Dx3xDxD"
    );

    let (code, out, err) = arenac(&[
        "compile", model, "--shape", "x[0]=2", "--shape", "x[2]=224", "--shape", "x[3]=160",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("x f32[2,3,224,160]"), "{out}");
    assert!(err.is_empty(), "{err}");

    let (code, _, err) = arenac(&["compile", model, "--shape", "x[4]=2"]);
    assert_eq!(code, 1);
    assert_one_line_error(
        &err,
        "--shape x[4]=2: input 'x' has 4 dims ([?,3,?,?]): no dim 4",
    );
}
