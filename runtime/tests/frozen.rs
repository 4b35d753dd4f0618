//! Freezing shape-deciding inputs: a model whose Reshape target and Slice starts are graph
//! inputs compiles when their values are given (library: `CompileOptions::with_value`; CLI:
//! `arenac run --input`), runs with the frozen inputs compiled in as constants, and without the
//! values fails with a `NotConstant` error naming the node, op and input.

mod common;

use std::path::Path;

use arenac::io::npy::{read_npy, write_npy};
use arenac::{CompileOptions, DType, Error, RunError, TensorRef, compile_file};
use arenac_compiler::OpError;
use arenac_compiler::import::builder::{Dim, ModelBuilder};
use arenac_compiler::ir::tensor::Tensor;
use common::arenac;
use prost::Message;

/// `y = Neg(Slice(Reshape(x, shape), starts, ends = [1 << 40], axes = [1]))` with `x` of shape
/// `[2, 3, 4]` and `shape`, `starts` graph inputs.
fn write_model(path: &Path) {
    let m = ModelBuilder::new("frozen", 17)
        .input("x", DType::F32, &[Dim::N(2), Dim::N(3), Dim::N(4)])
        .input("shape", DType::I64, &[Dim::N(2)])
        .input("starts", DType::I64, &[Dim::N(1)])
        .initializer("ends", &Tensor::i64(vec![1], &[1 << 40]))
        .initializer("axes", &Tensor::i64(vec![1], &[1]))
        .node("reshape", "Reshape", &["x", "shape"], &["r"], vec![])
        .node(
            "slice",
            "Slice",
            &["r", "starts", "ends", "axes"],
            &["s"],
            vec![],
        )
        .node("neg", "Neg", &["s"], &["y"], vec![])
        .output("y", DType::F32, &[])
        .build();
    std::fs::write(path, m.encode_to_vec()).expect("write the model");
}

/// A seeded generator of small test values.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
}

/// One case: x, the Reshape target, the Slice start, the expected output's shape and values.
type Case = (Vec<f32>, [i64; 2], i64, Vec<usize>, Vec<f32>);

/// Cases with their expected outputs, from the definitions of Reshape (row-major
/// reinterpretation) and Slice (columns `starts..` of every row).
fn cases() -> Vec<Case> {
    let mut rng = Rng(7);
    let mut out = Vec::new();
    for (rows, cols) in [(6usize, 4usize), (4, 6), (3, 8), (24, 1), (2, 12)] {
        let x: Vec<f32> = (0..24).map(|_| rng.next() as f32 / 1e9 - 2.0).collect();
        let start = (rng.next() as usize) % cols;
        // Reshape may use -1 for one dim.
        let shape = if rng.next().is_multiple_of(2) {
            [rows as i64, -1]
        } else {
            [rows as i64, cols as i64]
        };
        let mut y = Vec::new();
        for r in 0..rows {
            y.extend(x[r * cols + start..(r + 1) * cols].iter().map(|v| -v));
        }
        out.push((x, shape, start as i64, vec![rows, cols - start], y));
    }
    out
}

#[test]
fn library_freezes_shape_inputs_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("frozen.onnx");
    write_model(&model);
    for (x, shape, start, y_shape, y) in cases() {
        let starts = [start];
        let opts = CompileOptions::default()
            .with_value("x", TensorRef::from_slice(&[2, 3, 4], &x).unwrap())
            .with_value("shape", TensorRef::from_slice(&[2], &shape).unwrap())
            .with_value("starts", TensorRef::from_slice(&[1], &starts).unwrap());
        let compiled = compile_file(&model, &opts).expect("compiles with the values");
        let frozen: Vec<String> = compiled
            .frozen()
            .iter()
            .map(|f| format!("{} {} {}", f.name, f.ty, f.reason()))
            .collect();
        assert_eq!(frozen.len(), 2, "{frozen:?}");
        assert!(frozen[0].starts_with("shape "), "{frozen:?}");
        assert!(frozen[1].starts_with("starts "), "{frozen:?}");
        // Each says which node needed it, and why.
        assert!(
            frozen[0].ends_with(
                "node 'reshape' (Reshape) needs input 1 ('shape') at compile time: it decides \
                 a shape (or the kernel's structure)"
            ),
            "{frozen:?}"
        );
        assert!(
            frozen[1].contains("node 'slice' (Slice) needs input 1 ('starts')"),
            "{frozen:?}"
        );
        let mut session = compiled.session().expect("session");
        // x is given but decides no shape: it stays the one input.
        let names: Vec<&str> = session.inputs().iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["x"]);
        // A frozen input is no input of the session any more.
        let err = session
            .run(&[
                ("x", TensorRef::from_slice(&[2, 3, 4], &x).unwrap()),
                ("shape", TensorRef::from_slice(&[2], &shape).unwrap()),
            ])
            .expect_err("frozen inputs are not session inputs");
        assert!(matches!(err, RunError::UnknownInput { .. }), "{err}");
        let outputs = session
            .run(&[("x", TensorRef::from_slice(&[2, 3, 4], &x).unwrap())])
            .expect("runs");
        let out = outputs.get(0).expect("one output");
        assert_eq!(
            out.shape(),
            y_shape.as_slice(),
            "shape {shape:?} starts {start}"
        );
        assert_eq!(out.to_f32_vec(), y, "shape {shape:?} starts {start}");
    }
}

#[test]
fn without_values_the_error_names_node_op_and_input() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("frozen.onnx");
    write_model(&model);
    let err = compile_file(&model, &CompileOptions::default()).expect_err("no values");
    match &err {
        Error::Node {
            node,
            op,
            source: OpError::NotConstant { name, .. },
        } => assert_eq!(
            (node.as_str(), op.as_str(), name.as_str()),
            ("reshape", "Reshape", "shape")
        ),
        other => panic!("expected NotConstant, got {other}"),
    }
    // Only the Reshape target given: now the Slice starts are the missing constant.
    let shape = [6i64, 4];
    let opts =
        CompileOptions::default().with_value("shape", TensorRef::from_slice(&[2], &shape).unwrap());
    let err = compile_file(&model, &opts).expect_err("starts missing");
    let text = err.to_string();
    assert!(
        text.contains("slice") && text.contains("Slice") && text.contains("'starts'"),
        "{text}"
    );
    // A value of the wrong type for a frozen input is an error naming it.
    let shape3 = [6i64, 4, 1];
    let opts = CompileOptions::default()
        .with_shape("shape", vec![2])
        .with_value("shape", TensorRef::from_slice(&[3], &shape3).unwrap());
    let err = compile_file(&model, &opts)
        .expect_err("wrong shape")
        .to_string();
    assert!(err.contains("shape") && err.contains("frozen"), "{err}");
}

#[test]
fn cli_run_freezes_given_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("frozen.onnx");
    write_model(&model);
    let model = model.to_str().unwrap().to_string();
    for (k, (x, shape, start, y_shape, y)) in cases().into_iter().enumerate() {
        let file = |name: &str| dir.path().join(format!("{name}{k}.npy"));
        let starts = [start];
        write_npy(&file("x"), TensorRef::from_slice(&[2, 3, 4], &x).unwrap()).unwrap();
        write_npy(&file("shape"), TensorRef::from_slice(&[2], &shape).unwrap()).unwrap();
        write_npy(
            &file("starts"),
            TensorRef::from_slice(&[1], &starts).unwrap(),
        )
        .unwrap();
        let out_dir = dir.path().join(format!("out{k}"));
        let arg = |name: &str| format!("{name}={}", file(name).display());
        let (code, stdout, stderr) = arenac(&[
            "run",
            &model,
            "--input",
            &arg("x"),
            "--input",
            &arg("shape"),
            "--input",
            &arg("starts"),
            "--output-dir",
            out_dir.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{stderr}");
        // Loud: a warning per frozen input, naming the node that needed it.
        let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("is frozen")).collect();
        assert_eq!(warnings.len(), 2, "{stderr}");
        assert!(
            warnings[0].starts_with("warning: input 'shape' is frozen")
                && warnings[0].contains("only right for that value")
                && warnings[0].contains("node 'reshape' (Reshape)"),
            "{stderr}"
        );
        let frozen: Vec<&str> = stdout
            .lines()
            .filter(|l| l.starts_with("frozen:"))
            .collect();
        assert_eq!(frozen.len(), 2, "{stdout}");
        assert!(
            frozen[0].contains("shape") && frozen[1].contains("starts"),
            "{stdout}"
        );
        assert!(
            frozen[1].contains("specific to this value") && frozen[1].contains("'slice' (Slice)"),
            "{stdout}"
        );
        assert!(stdout.contains("input:   x "), "{stdout}");
        let got = read_npy(&out_dir.join("output_0.npy")).unwrap();
        assert_eq!(got.dtype(), DType::F32);
        assert_eq!(got.shape(), y_shape.as_slice());
        assert_eq!(got.view().to_f32_vec(), y);
    }
}

#[test]
fn cli_without_values_suggests_input() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("frozen.onnx");
    write_model(&model);
    let (code, _, stderr) = arenac(&["run", model.to_str().unwrap()]);
    assert_eq!(code, 1, "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    for needle in ["reshape", "Reshape", "'shape'", "--input shape=FILE"] {
        assert!(stderr.contains(needle), "{needle:?} not in {stderr}");
    }
}

/// A Reshape target computed from a graph input (`Add(dims, [0, 0])` here, as exported
/// functions compute sizes) freezes that input when its value is given; the data input `x`,
/// which only flows into the Reshape's data operand, stays a run-time input.
#[test]
fn inputs_upstream_of_a_shape_operand_are_frozen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("computed_shape.onnx");
    let m = ModelBuilder::new("computed", 17)
        .input("x", DType::F32, &[Dim::N(2), Dim::N(6)])
        .input("dims", DType::I64, &[Dim::N(2)])
        .initializer("zero", &Tensor::i64(vec![2], &[0, 0]))
        .node("add", "Add", &["dims", "zero"], &["target"], vec![])
        .node("reshape", "Reshape", &["x", "target"], &["y"], vec![])
        .output("y", DType::F32, &[])
        .build();
    std::fs::write(&path, m.encode_to_vec()).unwrap();
    let x: Vec<f32> = (0..12).map(|i| i as f32 * 0.5 - 1.0).collect();
    for dims in [[3i64, 4], [4, 3], [12, 1], [1, 12]] {
        let opts = CompileOptions::default()
            .with_value("x", TensorRef::from_slice(&[2, 6], &x).unwrap())
            .with_value("dims", TensorRef::from_slice(&[2], &dims).unwrap());
        let model = compile_file(&path, &opts).expect("compiles with dims frozen");
        let frozen: Vec<&str> = model.frozen().iter().map(|f| f.name.as_str()).collect();
        assert_eq!(frozen, ["dims"]);
        assert!(
            model.frozen()[0]
                .reason()
                .contains("needs input 1 ('target', computed from 'dims')"),
            "{}",
            model.frozen()[0].reason()
        );
        let mut session = model.session().unwrap();
        let out = session
            .run(&[("x", TensorRef::from_slice(&[2, 6], &x).unwrap())])
            .unwrap();
        let y = out.get(0).unwrap();
        let want: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
        assert_eq!(y.shape(), want.as_slice());
        assert_eq!(y.to_f32_vec(), x);
    }
    // Without the value the error still names the Reshape and its computed operand.
    let opts =
        CompileOptions::default().with_value("x", TensorRef::from_slice(&[2, 6], &x).unwrap());
    let err = compile_file(&path, &opts)
        .expect_err("dims missing")
        .to_string();
    assert!(err.contains("reshape") && err.contains("'target'"), "{err}");
}
