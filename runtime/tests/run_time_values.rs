//! Values that decide no shape are run-time values, and bad run-time values are errors:
//! - the log-mel front end's floor (`Clip(x, ReduceMax(x) - 80)`): `arenac run --input` must
//!   not freeze `x`, and one compiled model gives each input its own answer (checked against
//!   onnxruntime when the Python venv is there, and against the formula always);
//! - an index out of range at run time: `Session::run` returns [`RunError::OutOfRange`]
//!   naming the node, the value and the range; the session stays usable.

mod common;

use std::path::{Path, PathBuf};

use arenac::io::npy::{read_npy, write_npy};
use arenac::{CompileOptions, DType, RunError, TensorRef, compile_file};
use arenac_compiler::import::builder::{Dim, ModelBuilder};
use arenac_compiler::ir::tensor::Tensor;
use common::{arenac, repo};
use prost::Message;

const SHAPE: [usize; 3] = [1, 16, 40];

/// `y = Clip(x, ReduceMax(x) - 80)`: the dynamic-range floor of a log-mel front end.
fn write_log_mel(path: &Path) {
    let dims: Vec<Dim> = SHAPE.iter().map(|&d| Dim::N(d)).collect();
    let m = ModelBuilder::new("logmel_floor", 18)
        .input("x", DType::F32, &dims)
        .initializer("range", &Tensor::f32(vec![], &[80.0]))
        .output("y", DType::F32, &dims)
        .node(
            "peak",
            "ReduceMax",
            &["x"],
            &["m"],
            vec![("keepdims", arenac_compiler::import::builder::Attr::Int(0))],
        )
        .node("floor", "Sub", &["m", "range"], &["lo"], vec![])
        .node("clip", "Clip", &["x", "lo"], &["y"], vec![])
        .build();
    std::fs::write(path, m.encode_to_vec()).expect("write the model");
}

/// Seeded values uniform in `[lo, hi)`.
fn uniform(seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    let mut s = seed;
    (0..SHAPE.iter().product::<usize>())
        .map(|_| {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            lo + (hi - lo) * ((s >> 40) as f32 / (1u64 << 24) as f32)
        })
        .collect()
}

/// The formula: every element floored at the maximum minus 80.
fn floored(x: &[f32]) -> Vec<f32> {
    let max = x.iter().fold(f32::MIN, |a, &b| a.max(b));
    x.iter().map(|&v| v.max(max - 80.0)).collect()
}

/// The venv's Python (ARENAC_PYTHON from scripts/test.sh, or the repository's `.venv`).
fn python() -> Option<PathBuf> {
    std::env::var_os("ARENAC_PYTHON")
        .map(PathBuf::from)
        .or_else(|| Some(repo(".venv/bin/python")).filter(|p| p.exists()))
}

/// onnxruntime's output for `x` (written to `dir`), when the venv is there.
fn onnxruntime(model: &Path, dir: &Path, tag: &str, x: &Path) -> Option<Vec<f32>> {
    let py = python()?;
    let out = dir.join(format!("ort_{tag}"));
    let status = std::process::Command::new(py)
        .arg(repo("scripts/ort_run.py"))
        .arg(model)
        .arg(&out)
        .arg(x)
        .status()
        .expect("run python");
    assert!(status.success(), "scripts/ort_run.py failed");
    let y = read_npy(&out.join("out0.npy")).expect("onnxruntime's output");
    Some(y.view().to_f32_vec())
}

fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= 1e-6 * b.abs().max(1.0),
            "{what}[{i}]: {a} vs {b}"
        );
    }
}

#[test]
fn log_mel_floor_is_not_frozen() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("logmel.onnx");
    write_log_mel(&model);
    // Two inputs whose maxima differ: a program frozen for `a` floors `b` at the wrong level.
    let a = uniform(1, -120.0, 10.0);
    let b = uniform(2, -30.0, 60.0);
    let files: Vec<PathBuf> = [("a", &a), ("b", &b)]
        .iter()
        .map(|(tag, v)| {
            let f = dir.path().join(format!("{tag}.npy"));
            write_npy(&f, TensorRef::from_slice(&SHAPE, v).unwrap()).unwrap();
            f
        })
        .collect();
    let ort: Vec<Option<Vec<f32>>> = files
        .iter()
        .zip(["a", "b"])
        .map(|(f, tag)| onnxruntime(&model, dir.path(), tag, f))
        .collect();
    if ort.iter().any(Option::is_none) {
        eprintln!("no Python venv (ARENAC_PYTHON or .venv): checked against the formula only");
    }

    // The CLI: the input is not frozen, and the answer is this input's.
    for (k, (f, x)) in files.iter().zip([&a, &b]).enumerate() {
        let out_dir = dir.path().join(format!("out{k}"));
        let (code, stdout, stderr) = arenac(&[
            "run",
            model.to_str().unwrap(),
            "--input",
            &format!("x={}", f.display()),
            "--output-dir",
            out_dir.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{stderr}");
        assert!(!stdout.contains("frozen"), "{stdout}");
        assert!(!stderr.contains("frozen"), "{stderr}");
        assert!(stdout.contains("input:   x "), "{stdout}");
        let y = read_npy(&out_dir.join("output_0.npy"))
            .unwrap()
            .view()
            .to_f32_vec();
        assert_close(&y, &floored(x), "CLI vs formula");
        if let Some(want) = &ort[k] {
            assert_close(&y, want, "CLI vs onnxruntime");
        }
    }

    // The library: compiled once with `a`'s value given (as `arenac run` does), nothing is
    // frozen, and the same session answers `b` with `b`'s floor.
    let opts =
        CompileOptions::default().with_value("x", TensorRef::from_slice(&SHAPE, &a).unwrap());
    let compiled = compile_file(&model, &opts).expect("compiles");
    assert!(compiled.frozen().is_empty(), "{:?}", compiled.frozen());
    let mut session = compiled.session().unwrap();
    for (k, x) in [&a, &b, &a].into_iter().enumerate() {
        let out = session
            .run(&[("x", TensorRef::from_slice(&SHAPE, x).unwrap())])
            .expect("runs");
        let y = out.get(0).unwrap().to_f32_vec();
        assert_close(&y, &floored(x), "library vs formula");
        if let Some(want) = &ort[k % 2] {
            assert_close(&y, want, "library vs onnxruntime");
        }
    }
}

/// `y = Gather(table, ids)` with both at run time.
fn write_lookup(path: &Path) {
    let m = ModelBuilder::new("lookup", 13)
        .input("table", DType::F32, &[Dim::N(6), Dim::N(2)])
        .input("ids", DType::I64, &[Dim::N(3)])
        .output("y", DType::F32, &[])
        .node("embed", "Gather", &["table", "ids"], &["y"], vec![])
        .build();
    std::fs::write(path, m.encode_to_vec()).expect("write the model");
}

#[test]
fn run_time_index_out_of_range_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("lookup.onnx");
    write_lookup(&model);
    let compiled = compile_file(&model, &CompileOptions::default()).expect("compiles");
    let mut session = compiled.session().unwrap();
    let table: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let run = |session: &mut arenac::Session, ids: [i64; 3]| -> Result<Vec<f32>, RunError> {
        let out = session.run(&[
            ("table", TensorRef::from_slice(&[6, 2], &table).unwrap()),
            ("ids", TensorRef::from_slice(&[3], &ids).unwrap()),
        ])?;
        Ok(out.get(0).unwrap().to_f32_vec())
    };
    // In range, negative ones counted from the end.
    assert_eq!(
        run(&mut session, [0, -1, 2]).unwrap(),
        [0.0, 1.0, 10.0, 11.0, 4.0, 5.0]
    );
    let err = run(&mut session, [1, 6, 0]).expect_err("6 is past the end");
    assert_eq!(
        err,
        RunError::OutOfRange {
            node: "embed".into(),
            op: "Gather".into(),
            what: "index",
            value: 6,
            lo: -6,
            hi: 5,
        }
    );
    assert_eq!(
        err.to_string(),
        "node 'embed' (Gather): index 6 is out of range (valid: -6 to 5); this run's outputs \
         are not valid"
    );
    assert!(matches!(
        run(&mut session, [-7, 0, 0]),
        Err(RunError::OutOfRange { value: -7, .. })
    ));
    // The session stays usable.
    assert_eq!(
        run(&mut session, [5, 5, -6]).unwrap(),
        [10.0, 11.0, 10.0, 11.0, 0.0, 1.0]
    );

    // The CLI prints the same one-line error and exits 1.
    let ids = dir.path().join("ids.npy");
    write_npy(&ids, TensorRef::from_slice(&[3], &[0i64, 9, 1]).unwrap()).unwrap();
    let t = dir.path().join("table.npy");
    write_npy(&t, TensorRef::from_slice(&[6, 2], &table).unwrap()).unwrap();
    let (code, _, stderr) = arenac(&[
        "run",
        model.to_str().unwrap(),
        "--input",
        &format!("table={}", t.display()),
        "--input",
        &format!("ids={}", ids.display()),
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("node 'embed' (Gather): index 9 is out of range (valid: -6 to 5)"),
        "{stderr}"
    );
}

/// An `If` whose else-branch cannot run with these shapes (tests/fixtures/control/
/// if_unrunnable_branch.onnxtxt, silero-vad's pattern): compiling warns and freezes nothing;
/// `Session::run` taking the then-branch answers, taking the else-branch is
/// [`RunError::Unrunnable`] naming the node and the branch, and the session stays usable;
/// the CLI prints the warning and exits 1 with the one-line error.
#[test]
fn run_taking_an_unrunnable_branch_is_an_error() {
    let src = std::fs::read_to_string(repo("tests/fixtures/control/if_unrunnable_branch.onnxtxt"))
        .expect("reads the fixture");
    let m = arenac_compiler::import::text::parse_model_text(&src).expect("parses");
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("if.onnx");
    std::fs::write(&model, m.encode_to_vec()).unwrap();
    let compiled = compile_file(&model, &CompileOptions::default()).expect("compiles");
    assert!(compiled.frozen().is_empty());
    assert!(
        compiled
            .warnings()
            .iter()
            .any(|w| w.contains("else_branch cannot run")),
        "{:?}",
        compiled.warnings()
    );
    let mut session = compiled.session().unwrap();
    let x = [0.5f32, -1.0, 2.0, -0.25];
    let mut run = |sr: i64| -> Result<Vec<f32>, RunError> {
        let out = session.run(&[
            ("sr", TensorRef::from_slice(&[1], &[sr]).unwrap()),
            ("X", TensorRef::from_slice(&[1, 4], &x).unwrap()),
        ])?;
        Ok(out.get(0).unwrap().to_f32_vec())
    };
    assert_eq!(run(16000).unwrap(), [0.5, 0.0, 2.0, 0.0]);
    let err = run(8000).expect_err("the else-branch cannot run");
    assert!(
        matches!(err, RunError::Unrunnable { ref op, .. } if op == "If"),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("the condition chose the else_branch") && msg.contains("MatMul"),
        "{msg}"
    );
    assert!(msg.ends_with("this run's outputs are not valid"), "{msg}");
    assert_eq!(run(16000).unwrap(), [0.5, 0.0, 2.0, 0.0]);

    let sr = dir.path().join("sr.npy");
    write_npy(&sr, TensorRef::from_slice(&[1], &[8000i64]).unwrap()).unwrap();
    let xf = dir.path().join("x.npy");
    write_npy(&xf, TensorRef::from_slice(&[1, 4], &x).unwrap()).unwrap();
    let (code, _, stderr) = arenac(&[
        "run",
        model.to_str().unwrap(),
        "--input",
        &format!("sr={}", sr.display()),
        "--input",
        &format!("X={}", xf.display()),
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("else_branch cannot run"), "{stderr}");
    assert!(
        stderr
            .lines()
            .last()
            .is_some_and(|l| l.contains("the condition chose the else_branch")),
        "{stderr}"
    );
}
