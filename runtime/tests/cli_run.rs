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

/// Outputs of every dtype numpy has beyond the common ones (f16, i8, i16, u16, u32, u64) are
/// written as `.npy`, bf16 as a TensorProto `.pb` (said in the summary); numpy and onnx read
/// them back with the right dtype, shape and values.
#[test]
fn outputs_of_every_dtype_are_written() {
    use arenac::DType;
    use arenac::io::{TensorBuf, npy};
    use arenac_compiler::import::builder::{Attr, Dim, ModelBuilder};
    use prost::Message;

    let cast = |to: DType| vec![("to", Attr::Int(i64::from(to.to_onnx())))];
    let outs = [
        ("x", DType::F16),
        ("n", DType::I8),
        ("n", DType::I16),
        ("x", DType::U16),
        ("x", DType::U32),
        ("x", DType::U64),
        ("x", DType::BF16),
    ];
    let mut b = ModelBuilder::new("dtypes", 17)
        .input("x", DType::F32, &[Dim::N(2), Dim::N(3)])
        .node("neg", "Neg", &["x"], &["n"], vec![]);
    for (i, (src, to)) in outs.iter().enumerate() {
        let name = format!("y{i}_{to}");
        b = b
            .node(&name, "Cast", &[src], &[&name], cast(*to))
            .output(&name, *to, &[]);
    }
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("dtypes.onnx");
    std::fs::write(&model, b.build().encode_to_vec()).unwrap();
    let xs = [0.0f32, 1.0, 2.0, 3.0, 50.0, 100.0];
    let x = TensorBuf::new(
        DType::F32,
        vec![2, 3],
        xs.iter().flat_map(|v| v.to_le_bytes()).collect(),
    )
    .unwrap();
    let x_path = dir.path().join("x.npy");
    npy::write_npy(&x_path, x.view()).unwrap();
    let out_dir = dir.path().join("out");
    let (code, out, err) = arenac(&[
        "run",
        model.to_str().unwrap(),
        "--input",
        &format!("x={}", x_path.display()),
        "--output-dir",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!(
            "wrote 7 output(s) to {}; as ONNX TensorProto .pb, numpy having no dtype for them: \
             output_6.pb (y6_bf16 bf16[2,3])",
            out_dir.display()
        )),
        "{out}"
    );
    for i in 0..6 {
        assert!(out_dir.join(format!("output_{i}.npy")).exists(), "{i}");
    }

    let Some(py) = std::env::var("ARENAC_PYTHON")
        .ok()
        .filter(|p| !p.is_empty())
    else {
        println!("ARENAC_PYTHON is unset: skipping the numpy read-back");
        return;
    };
    let script = r#"
import sys, numpy as np, onnx
from onnx import numpy_helper
d = sys.argv[1]
for i in range(7):
    if i < 6:
        a = np.load(f"{d}/output_{i}.npy")
    else:
        a = numpy_helper.to_array(onnx.load_tensor(f"{d}/output_{i}.pb"))
    vals = " ".join(str(int(v)) for v in a.astype(np.float64).ravel())
    print(i, a.dtype.name, "x".join(map(str, a.shape)), vals)
"#;
    let got = std::process::Command::new(&py)
        .args(["-c", script, out_dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        got.status.success(),
        "{}",
        String::from_utf8_lossy(&got.stderr)
    );
    let pos = "0 1 2 3 50 100";
    let neg = "0 -1 -2 -3 -50 -100";
    let want = [
        format!("0 float16 2x3 {pos}"),
        format!("1 int8 2x3 {neg}"),
        format!("2 int16 2x3 {neg}"),
        format!("3 uint16 2x3 {pos}"),
        format!("4 uint32 2x3 {pos}"),
        format!("5 uint64 2x3 {pos}"),
        format!("6 bfloat16 2x3 {pos}"),
    ];
    let got = String::from_utf8_lossy(&got.stdout);
    assert_eq!(got.lines().collect::<Vec<_>>(), want, "{got}");
}

/// A bf16 input is read from a TensorProto `.pb` (numpy has no bfloat16).
#[test]
fn bf16_input_from_pb() {
    use arenac::DType;
    use arenac::io::{TensorBuf, npy, pb};
    use arenac_compiler::import::builder::{Attr, Dim, ModelBuilder};
    use prost::Message;

    let m = ModelBuilder::new("bf16in", 17)
        .input("x", DType::BF16, &[Dim::N(4)])
        .node(
            "c",
            "Cast",
            &["x"],
            &["y"],
            vec![("to", Attr::Int(i64::from(DType::F32.to_onnx())))],
        )
        .output("y", DType::F32, &[])
        .build();
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("bf16in.onnx");
    std::fs::write(&model, m.encode_to_vec()).unwrap();
    let vals = [1.5f32, -2.0, 0.25, 96.0];
    let x = TensorBuf::new(
        DType::BF16,
        vec![4],
        vals.iter()
            .flat_map(|v| half::bf16::from_f32(*v).to_le_bytes())
            .collect(),
    )
    .unwrap();
    let x_path = dir.path().join("x.pb");
    std::fs::write(&x_path, pb::encode_pb("x", &x)).unwrap();
    let out_dir = dir.path().join("out");
    let (code, out, err) = arenac(&[
        "run",
        model.to_str().unwrap(),
        "--input",
        x_path.to_str().unwrap(),
        "--output-dir",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("input:   x bf16[4]"), "{out}");
    let y = npy::read_npy(&out_dir.join("output_0.npy")).unwrap();
    assert_eq!(y.view().to_f32_vec(), vals);
}

/// Input names holding `/`, `:` and `=` (as exported models have them) are names, not paths;
/// a file path holding `=` is still a file; a name the model lacks is a one-line error.
#[test]
fn input_names_with_slash_colon_and_equals() {
    use arenac::DType;
    use arenac::io::{TensorBuf, npy};
    use arenac_compiler::import::builder::{Dim, ModelBuilder};
    use prost::Message;

    let m = ModelBuilder::new("names", 17)
        .input("gpu_0/data_0", DType::F32, &[Dim::N(2)])
        .input("input:0", DType::F32, &[Dim::N(2)])
        .input("a=b", DType::F32, &[Dim::N(2)])
        .node("s1", "Add", &["gpu_0/data_0", "input:0"], &["s"], vec![])
        .node("s2", "Mul", &["s", "a=b"], &["y"], vec![])
        .output("y", DType::F32, &[])
        .build();
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("names.onnx");
    std::fs::write(&model, m.encode_to_vec()).unwrap();
    let model = model.to_str().unwrap();
    let file = |name: &str, v: [f32; 2]| {
        let t = TensorBuf::new(
            DType::F32,
            vec![2],
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        )
        .unwrap();
        let path = dir.path().join(name);
        npy::write_npy(&path, t.view()).unwrap();
        path.display().to_string()
    };
    let (x, y, z) = (
        file("x.npy", [1.0, 2.0]),
        file("y.npy", [10.0, 20.0]),
        file("scale=3.npy", [3.0, -1.0]),
    );
    let out_dir = dir.path().join("out");
    let (code, out, err) = arenac(&[
        "run",
        model,
        "--input",
        &format!("input:0={y}"),
        "--input",
        &format!("a=b={z}"),
        "--input",
        &format!("gpu_0/data_0={x}"),
        "--output-dir",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("input:   gpu_0/data_0 f32[2] ({x})")),
        "{out}"
    );
    assert!(
        out.contains(&format!("input:   input:0 f32[2] ({y})")),
        "{out}"
    );
    assert!(out.contains(&format!("input:   a=b f32[2] ({z})")), "{out}");
    let got = npy::read_npy(&out_dir.join("output_0.npy")).unwrap();
    assert_eq!(got.view().to_f32_vec(), [33.0, -22.0]);

    // Files in order, the last one's path holding '='.
    let (code, out, err) = arenac(&["run", model, "--input", &x, "--input", &y, "--input", &z]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("input:   a=b f32[2] ({z})")), "{out}");

    // A name the model lacks, which is no file either.
    let (code, _, err) = arenac(&["run", model, "--input", &format!("gpu_1/data_0={x}")]);
    assert_one_line_error(
        code,
        &err,
        &format!(
            "--input gpu_1/data_0={x}: no graph input is named 'gpu_1/data_0' and no file \
             gpu_1/data_0={x} exists (inputs: gpu_0/data_0, input:0, a=b)"
        ),
    );
}

/// Real exported models (ONNX's light models with random weights, `ARENAC_LIGHT_RANDOM_DIR`):
/// ShuffleNet's input is `gpu_0/data_0`; SqueezeNet's, renamed `input:0` here. Given by name,
/// each output written by `--output-dir` matches onnxruntime's.
#[test]
fn real_models_with_slash_and_colon_input_names() {
    use arenac::io::npy::read_npy;
    use prost::Message;

    let Some(dir) = std::env::var("ARENAC_LIGHT_RANDOM_DIR")
        .ok()
        .filter(|s| !s.is_empty())
        .map(std::path::PathBuf::from)
    else {
        println!("ARENAC_LIGHT_RANDOM_DIR is unset: skipping (bash scripts/test.sh sets it)");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    // SqueezeNet with its input `data_0` renamed `input:0` (declaration and every use).
    let mut squeeze =
        arenac_compiler::import::load_model_file(&dir.join("squeezenet.onnx")).unwrap();
    let graph = squeeze.graph.as_mut().unwrap();
    for vi in graph.input.iter_mut().filter(|vi| vi.name() == "data_0") {
        vi.name = Some("input:0".into());
    }
    for name in graph.node.iter_mut().flat_map(|n| n.input.iter_mut()) {
        if name == "data_0" {
            *name = "input:0".into();
        }
    }
    let renamed = tmp.path().join("squeezenet_colon.onnx");
    std::fs::write(&renamed, squeeze.encode_to_vec()).unwrap();

    for (model, stem, input) in [
        (dir.join("shufflenet.onnx"), "shufflenet", "gpu_0/data_0"),
        (renamed, "squeezenet", "input:0"),
    ] {
        let x = dir.join(format!("{stem}_input_0.npy"));
        let out_dir = tmp.path().join(stem);
        let (code, out, err) = arenac(&[
            "run",
            model.to_str().unwrap(),
            "--input",
            &format!("{input}={}", x.display()),
            "--output-dir",
            out_dir.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{stem}: {err}");
        assert!(
            out.contains(&format!(
                "input:   {input} f32[1,3,224,224] ({})",
                x.display()
            )),
            "{out}"
        );
        let ours = read_npy(&out_dir.join("output_0.npy")).unwrap();
        let theirs = read_npy(&dir.join(format!("{stem}_output_0.npy"))).unwrap();
        assert_eq!(ours.shape(), theirs.shape(), "{stem}");
        let (a, b) = (ours.view().to_f32_vec(), theirs.view().to_f32_vec());
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            let d = (x - y).abs();
            assert!(
                d <= 1e-4 + 1e-3 * y.abs(),
                "{stem}[{i}]: {x} vs onnxruntime {y}"
            );
        }
    }
}
