//! Model tests (owner: tooling).
//!
//! - The demo model `models/digits/digits.onnx`: imports with and without a bound batch dim,
//!   agrees with ONNX shape inference, and the reference evaluation reproduces onnxruntime's
//!   probabilities on `samples.npy`.
//! - ONNX's nine "light" backend-test models (`ARENAC_ONNX_LIGHT_DIR`, the installed onnx
//!   package's `onnx/backend/test/data/light`): each imports, verifies, has the expected
//!   output dims, and every value's type agrees with `onnx.shape_inference` (run through
//!   `scripts/onnx_shapes.py` with `ARENAC_PYTHON`).
//! - `model_dir` (ignored; local use): the same checks on every `*.onnx` in `ARENAC_MODEL_DIR`,
//!   e.g. the PyTorch exports of `scripts/export_torch.py`. Optional `ARENAC_MODEL_SHAPES`
//!   binds shapes for every model, `;`-separated `NAME=1x3x224x224` specs. With
//!   `ARENAC_MODEL_JIT=1` each model is also compiled with the JIT, run, and compared with
//!   onnxruntime on the same inputs (`ARENAC_MODEL_EVAL=1`: the reference evaluation too).
//!
//! `bash scripts/test.sh` sets all the variables; when one is unset its test prints why it
//! skips and passes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use arenac_compiler::import::inputs::parse_shape_spec;
use arenac_compiler::import::{ImportOptions, Imported, import_file};
use arenac_compiler::ir::eval::eval_graph;
use arenac_compiler::ir::graph::Graph;
use arenac_compiler::ir::tensor::Tensor;
use arenac_compiler::ir::types::DType;
use arenac_compiler::ir::verify::verify;

mod support;

use support::npy::{npy_tensor, read_npy, write_npy};
use support::onnx_shapes::{Dim, ShapeReport, compare_shapes, onnx_shapes, parse_onnx_shapes};
use support::repo_root;

fn digits_dir() -> PathBuf {
    repo_root().join("models").join("digits")
}

/// A non-empty environment variable.
fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|s| !s.is_empty())
}

// ---------------------------------------------------------------------------------------------
// Checking one model file.

/// What checking one model found.
struct ModelCheck {
    imported: Imported,
    shapes: Option<ShapeReport>,
}

/// Imports, verifies, and (with a python) compares with ONNX shape inference. Errors are one
/// line: the first problem.
fn check_model(
    path: &Path,
    opts: &ImportOptions,
    python: Option<&str>,
) -> Result<ModelCheck, String> {
    let imported = import_file(path, opts).map_err(|e| format!("import: {e}"))?;
    verify(&imported.graph).map_err(|e| format!("verify: {e}"))?;
    let shapes = match python {
        Some(py) => Some(onnx_shapes(py, path)?),
        None => None,
    }
    .map(|onnx| compare_shapes(&imported.graph, &onnx));
    Ok(ModelCheck { imported, shapes })
}

fn output_shapes(g: &Graph) -> Vec<Vec<usize>> {
    g.outputs
        .iter()
        .map(|&id| g.value(id).ty.shape.clone())
        .collect()
}

fn python() -> Option<String> {
    let py = env_var("ARENAC_PYTHON");
    if py.is_none() {
        println!("ARENAC_PYTHON is unset: skipping comparisons with onnx shape inference");
    }
    py
}

// ---------------------------------------------------------------------------------------------
// The demo model.

#[test]
fn digits_imports_with_default_batch() {
    let path = digits_dir().join("digits.onnx");
    let imported = import_file(&path, &ImportOptions::default()).expect("digits.onnx imports");
    verify(&imported.graph).expect("verifies");
    let g = &imported.graph;
    assert_eq!(g.name, "digits_mlp");
    assert_eq!(output_shapes(g), vec![vec![1, 10]]);
    assert_eq!(g.value(g.inputs[0]).ty.shape, vec![1, 64]);
    assert!(
        imported.warnings.iter().any(|w| w.contains("'N'")),
        "expected a warning naming N: {:?}",
        imported.warnings
    );
}

#[test]
fn digits_imports_with_bound_batch() {
    let path = digits_dir().join("digits.onnx");
    let opts = ImportOptions {
        shapes: vec![("N".into(), vec![100])],
        ..Default::default()
    };
    let check = check_model(&path, &opts, python().as_deref()).expect("digits.onnx");
    let g = &check.imported.graph;
    assert!(
        check.imported.warnings.is_empty(),
        "{:?}",
        check.imported.warnings
    );
    assert_eq!(output_shapes(g), vec![vec![100, 10]]);
    assert_eq!(g.value(g.inputs[0]).ty.dtype, DType::F32);
    if let Some(r) = check.shapes {
        println!("digits.onnx: {}", r.summary());
        assert!(r.mismatches.is_empty(), "{:#?}", r.mismatches);
        assert!(r.missing.is_empty(), "{:?}", r.missing);
        assert_eq!(r.compared, 8, "every value of the model");
        assert_eq!(r.symbols.get("N"), Some(&100));
    }
}

/// Deterministic test inputs for the graph's inputs: floats in [-1, 1), ints in [0, 10)
/// (valid indices for embeddings), bools alternating.
fn test_inputs(g: &Graph) -> Vec<Tensor> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as f64 / (1u64 << 31) as f64
    };
    g.inputs
        .iter()
        .map(|&id| {
            let ty = &g.value(id).ty;
            let n = ty.numel().unwrap_or(0);
            if ty.dtype.is_float() {
                let v: Vec<f64> = (0..n).map(|_| next() * 2.0 - 1.0).collect();
                Tensor::from_f64(ty.dtype, ty.shape.clone(), &v)
            } else if ty.dtype == DType::Bool {
                let v: Vec<i64> = (0..n).map(|i| (i % 2) as i64).collect();
                Tensor::from_i64(ty.dtype, ty.shape.clone(), &v)
            } else {
                let v: Vec<i64> = (0..n).map(|_| (next() * 10.0) as i64).collect();
                Tensor::from_i64(ty.dtype, ty.shape.clone(), &v)
            }
        })
        .collect()
}

/// Runs onnxruntime (`scripts/ort_run.py`, optimizations off) on `inputs`.
fn onnxruntime_outputs(
    python: &str,
    model: &Path,
    inputs: &[Tensor],
) -> Result<Vec<Tensor>, String> {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "arenac-eval-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let result = (|| {
        let mut cmd = Command::new(python);
        cmd.arg(repo_root().join("scripts").join("ort_run.py"))
            .arg(model)
            .arg(&dir);
        for (k, t) in inputs.iter().enumerate() {
            let p = dir.join(format!("in{k}.npy"));
            write_npy(&p, t)?;
            cmd.arg(p);
        }
        let run = cmd
            .output()
            .map_err(|e| format!("cannot run {python}: {e}"))?;
        if !run.status.success() {
            return Err(format!(
                "ort_run.py failed: {}",
                String::from_utf8_lossy(&run.stderr).trim()
            ));
        }
        let mut outs = Vec::new();
        for k in 0.. {
            let p = dir.join(format!("out{k}.npy"));
            if !p.exists() {
                break;
            }
            outs.push(npy_tensor(&p)?);
        }
        Ok(outs)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Compares our outputs with onnxruntime's: within 1e-4 + 1e-3 * |onnxruntime| everywhere;
/// returns the largest absolute difference, or the first problem.
fn compare_outputs(g: &Graph, ours: &[Tensor], theirs: &[Tensor]) -> Result<f64, String> {
    if ours.len() != theirs.len() {
        return Err(format!(
            "{} outputs, onnxruntime {}",
            ours.len(),
            theirs.len()
        ));
    }
    let mut max_diff = 0.0f64;
    for (k, (ours, theirs)) in ours.iter().zip(theirs).enumerate() {
        let name = &g.value(g.outputs[k]).name;
        if theirs.shape() != ours.shape() {
            return Err(format!(
                "output '{name}': shape {:?}, onnxruntime {:?}",
                ours.shape(),
                theirs.shape()
            ));
        }
        for (i, (a, b)) in ours
            .to_f64_vec()
            .into_iter()
            .zip(theirs.to_f64_vec())
            .enumerate()
        {
            if a.is_nan() && b.is_nan() {
                continue;
            }
            let d = (a - b).abs();
            if d.is_nan() || d > 1e-4 + 1e-3 * b.abs() {
                return Err(format!(
                    "output '{name}'[{i}]: {a}, onnxruntime {b} (|diff| {d:.2e})"
                ));
            }
            max_diff = max_diff.max(d);
        }
    }
    Ok(max_diff)
}

/// Runs the reference evaluation and onnxruntime on the same deterministic inputs and
/// compares them ([`compare_outputs`]).
fn eval_vs_onnxruntime(python: &str, model: &Path, g: &Graph) -> Result<f64, String> {
    let inputs = test_inputs(g);
    let theirs = onnxruntime_outputs(python, model, &inputs)?;
    let ours = eval_graph(g, &inputs).map_err(|e| format!("reference evaluation: {e}"))?;
    compare_outputs(g, &ours, &theirs)
}

/// Compiles the model with the JIT (`arenac::compile_file` with `shapes`), runs it in a
/// `Session` and compares with onnxruntime on the same deterministic inputs. Returns the
/// largest difference and the compile time.
fn jit_vs_onnxruntime(
    python: &str,
    model: &Path,
    shapes: &[(String, Vec<usize>)],
    g: &Graph,
) -> Result<(f64, f64), String> {
    let opts = arenac::CompileOptions {
        shapes: shapes.to_vec(),
        ..Default::default()
    };
    let start = std::time::Instant::now();
    let compiled = arenac::compile_file(model, &opts).map_err(|e| format!("compile: {e}"))?;
    let compile_s = start.elapsed().as_secs_f64();
    let inputs = test_inputs(g);
    let mut session = compiled.session().map_err(|e| e.to_string())?;
    let views = inputs
        .iter()
        .map(|t| arenac::TensorRef::from_bytes(t.dtype(), t.shape(), t.bytes()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let named: Vec<(&str, arenac::TensorRef<'_>)> = g
        .inputs
        .iter()
        .map(|&id| g.value(id).name.as_str())
        .zip(views)
        .collect();
    let outputs = session.run(&named).map_err(|e| format!("run: {e}"))?;
    let ours = outputs
        .iter()
        .map(|(_, t)| {
            Tensor::from_bytes(
                t.dtype(),
                t.shape().to_vec(),
                bytes::Bytes::copy_from_slice(t.bytes()),
            )
            .map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, _>>()?;
    let theirs = onnxruntime_outputs(python, model, &inputs)?;
    Ok((compare_outputs(g, &ours, &theirs)?, compile_s))
}

fn argmax(row: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        if v > row[best] {
            best = i;
        }
    }
    best
}

#[test]
fn digits_reference_eval_matches_onnxruntime() {
    let dir = digits_dir();
    let (descr, shape, data) = read_npy(&dir.join("samples.npy")).expect("samples.npy");
    assert_eq!((descr.as_str(), shape.as_slice()), ("<f4", &[100, 64][..]));
    let samples = Tensor::from_bytes(DType::F32, shape, data.into()).expect("samples tensor");
    let (descr, shape, data) = read_npy(&dir.join("labels.npy")).expect("labels.npy");
    assert_eq!((descr.as_str(), shape.as_slice()), ("<i8", &[100][..]));
    let labels: Vec<i64> = data
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect();
    let (descr, shape, data) =
        read_npy(&dir.join("expected_probs.npy")).expect("expected_probs.npy");
    assert_eq!((descr.as_str(), shape.as_slice()), ("<f4", &[100, 10][..]));
    let expected: Vec<f32> = data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect();

    let opts = ImportOptions {
        shapes: vec![("N".into(), vec![100])],
        ..Default::default()
    };
    let imported = import_file(&dir.join("digits.onnx"), &opts).expect("imports");
    let outputs = eval_graph(&imported.graph, &[samples]).expect("reference evaluation");
    let [probs] = outputs.as_slice() else {
        panic!("one output expected, got {}", outputs.len());
    };
    assert_eq!(probs.shape(), &[100, 10]);
    let probs = probs.to_f32_vec();
    let max_diff = probs
        .iter()
        .zip(&expected)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(max_diff < 1e-5, "max |ours - onnxruntime| = {max_diff}");
    let mut correct = 0;
    for (i, &label) in labels.iter().enumerate() {
        let ours = argmax(&probs[i * 10..(i + 1) * 10]);
        assert_eq!(ours, argmax(&expected[i * 10..(i + 1) * 10]), "sample {i}");
        correct += usize::from(ours as i64 == label);
    }
    println!("digits: reference accuracy {correct}/100, max |ours - onnxruntime| = {max_diff:.2e}");
    assert_eq!(
        correct, 98,
        "onnxruntime gets 98/100 (models/digits/README.md)"
    );
}

// ---------------------------------------------------------------------------------------------
// ONNX's light models.

/// The nine light models and their output shapes.
const LIGHT_MODELS: [(&str, &[usize]); 9] = [
    ("light_bvlc_alexnet", &[1, 1000]),
    ("light_densenet121", &[1, 1000, 1, 1]),
    ("light_inception_v1", &[1, 1000]),
    ("light_inception_v2", &[1, 1000]),
    ("light_resnet50", &[1, 1000]),
    ("light_shufflenet", &[1, 1000]),
    ("light_squeezenet", &[1, 1000, 1, 1]),
    ("light_vgg19", &[1, 1000]),
    ("light_zfnet512", &[1, 1000]),
];

#[test]
fn light_models() {
    let Some(dir) = env_var("ARENAC_ONNX_LIGHT_DIR") else {
        println!(
            "ARENAC_ONNX_LIGHT_DIR is unset: skipping the light models (bash scripts/test.sh sets it)"
        );
        return;
    };
    let python = python();
    let mut failures = Vec::new();
    let (mut total_compared, mut total_values) = (0, 0);
    for (name, out_shape) in LIGHT_MODELS {
        let path = Path::new(&dir).join(format!("{name}.onnx"));
        let check = match check_model(&path, &ImportOptions::default(), python.as_deref()) {
            Ok(c) => c,
            Err(e) => {
                println!("{name}: FAILED: {e}");
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        let g = &check.imported.graph;
        total_values += g.values().len();
        let mut line = format!(
            "{name}: {} nodes, {} values",
            g.node_count(),
            g.values().len()
        );
        if output_shapes(g) != vec![out_shape.to_vec()] {
            failures.push(format!(
                "{name}: outputs {:?}, expected [{out_shape:?}]",
                output_shapes(g)
            ));
        }
        if !check.imported.warnings.is_empty() {
            failures.push(format!("{name}: warnings {:?}", check.imported.warnings));
        }
        if let Some(r) = &check.shapes {
            line += &format!("; {}", r.summary());
            total_compared += r.compared;
            for m in r.mismatches.iter().take(5) {
                failures.push(format!("{name}: {m}"));
            }
            if !r.missing.is_empty() {
                failures.push(format!(
                    "{name}: onnx knows {} values our graph lacks, e.g. {:?}",
                    r.missing.len(),
                    &r.missing[..r.missing.len().min(3)]
                ));
            }
        }
        println!("{line}");
    }
    println!(
        "light models: {total_values} values in total, {total_compared} compared with onnx shape inference"
    );
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Any directory of models (local use).

/// `ARENAC_MODEL_DIR=dir cargo test -p arenac-tests --test models -- --ignored model_dir
/// --nocapture`: checks every `*.onnx` in the directory and reports per model.
#[test]
#[ignore = "local use: set ARENAC_MODEL_DIR (and ARENAC_PYTHON)"]
fn model_dir() {
    let Some(dir) = env_var("ARENAC_MODEL_DIR") else {
        println!("ARENAC_MODEL_DIR is unset: nothing to check");
        return;
    };
    let shapes = env_var("ARENAC_MODEL_SHAPES")
        .map(|s| {
            s.split(';')
                .filter(|spec| !spec.trim().is_empty())
                .map(|spec| parse_shape_spec(spec.trim()).expect("ARENAC_MODEL_SHAPES"))
                .collect()
        })
        .unwrap_or_default();
    let opts = ImportOptions {
        shapes,
        ..Default::default()
    };
    let python = python();
    let eval = env_var("ARENAC_MODEL_EVAL").is_some();
    let jit = env_var("ARENAC_MODEL_JIT").is_some();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "onnx"))
        .collect();
    paths.sort();
    let mut failed = Vec::new();
    for path in &paths {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        match check_model(path, &opts, python.as_deref()) {
            Err(e) => {
                println!("{name}: FAILED: {e}");
                failed.push(name.to_string());
            }
            Ok(check) => {
                let g = &check.imported.graph;
                let mut line = format!(
                    "{name}: imports OK, {} nodes, {} values, outputs {:?}",
                    g.node_count(),
                    g.values().len(),
                    output_shapes(g)
                );
                if let Some(r) = &check.shapes {
                    line += &format!("; {}", r.summary());
                    if !r.mismatches.is_empty() {
                        failed.push(name.to_string());
                    }
                }
                if let (true, Some(py)) = (jit, python.as_deref()) {
                    match jit_vs_onnxruntime(py, path, &opts.shapes, g) {
                        Ok((d, compile_s)) => {
                            line += &format!(
                                "; JIT = onnxruntime (max |diff| {d:.2e}, compiled in {compile_s:.2}s)"
                            );
                        }
                        Err(e) => {
                            line += &format!("; JIT MISMATCH: {e}");
                            failed.push(name.to_string());
                        }
                    }
                }
                if let (true, Some(py)) = (eval, python.as_deref()) {
                    let start = std::time::Instant::now();
                    match eval_vs_onnxruntime(py, path, g) {
                        Ok(d) => {
                            line += &format!(
                                "; reference eval = onnxruntime (max |diff| {d:.2e}, {:.1}s)",
                                start.elapsed().as_secs_f64()
                            );
                        }
                        Err(e) => {
                            line += &format!("; EVAL MISMATCH: {e}");
                            failed.push(name.to_string());
                        }
                    }
                }
                for w in &check.imported.warnings {
                    line += &format!("\n    warning: {w}");
                }
                if let Some(r) = &check.shapes {
                    for m in r.mismatches.iter().take(10) {
                        line += &format!("\n    mismatch {m}");
                    }
                }
                println!("{line}");
            }
        }
    }
    println!("{} models, {} failed", paths.len(), failed.len());
    assert!(failed.is_empty(), "failed: {failed:?}");
}

#[test]
fn json_reader() {
    let text = r#"{"a\"b": [1, ["N", 64, null]], "c": [7, null], "\u00e9\ud83d\ude00": [1, []]}"#;
    let m = parse_onnx_shapes(text).expect("parses");
    assert_eq!(
        m.get("a\"b"),
        Some(&(
            1,
            Some(vec![Dim::Symbol("N".into()), Dim::Known(64), Dim::Unknown])
        ))
    );
    assert_eq!(m.get("c"), Some(&(7, None)));
    assert_eq!(m.get("é😀"), Some(&(1, Some(vec![]))));
    assert!(parse_onnx_shapes("{\"a\": [1]}").is_err());
    assert!(parse_onnx_shapes("[1, 2").is_err());
}

#[test]
fn npy_round_trip() {
    let dir = std::env::temp_dir().join(format!("arenac-npy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    for t in [
        Tensor::f32(vec![2, 3], &[1.0, -2.5, 3.0, 0.0, 5.0, 6.25]),
        Tensor::i64(vec![4], &[1, -2, 3, 1 << 40]),
        Tensor::f32(vec![], &[7.0]),
        Tensor::from_i64(DType::Bool, vec![3, 1], &[1, 0, 1]),
    ] {
        let p = dir.join("t.npy");
        write_npy(&p, &t).expect("writes");
        assert_eq!(npy_tensor(&p).expect("reads"), t);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The onnxruntime comparison of the model-directory check, on the demo model.
#[test]
fn digits_eval_vs_onnxruntime_script() {
    let Some(py) = python() else { return };
    let path = digits_dir().join("digits.onnx");
    let opts = ImportOptions {
        shapes: vec![("N".into(), vec![3])],
        ..Default::default()
    };
    let imported = import_file(&path, &opts).expect("imports");
    let d = eval_vs_onnxruntime(&py, &path, &imported.graph).expect("agrees with onnxruntime");
    println!("digits: reference eval vs onnxruntime on random inputs: max |diff| {d:.2e}");
}
