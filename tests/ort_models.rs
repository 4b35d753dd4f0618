//! Whole models through the JIT against onnxruntime (owner: tooling).
//!
//! `ARENAC_LIGHT_RANDOM_DIR` holds ONNX's nine light models with random weights, a seeded
//! input and onnxruntime's outputs (one thread), written by `scripts/randomize_light.py`
//! (`bash scripts/test.sh` generates them into `.cache/light-random/` and sets the variable).
//! Each model is compiled with `arenac::compile_file`, run in a `Session`, and every output must
//! agree with onnxruntime's within 1e-4 + 1e-3 * |onnxruntime|.
//!
//! Models whose ops have no kernel yet are listed in [`KNOWN_MISSING_KERNELS`]: for those the
//! test expects exactly that compile error, and fails when one compiles after all, so the list
//! cannot go stale (empty it when the kernel lands).

use std::path::{Path, PathBuf};

use arenac::io::npy::read_npy;
use arenac::{CompileOptions, Session, compile_file};

/// Models expected to fail to compile today, with the op whose kernel is missing. The test
/// fails when a listed model compiles: then remove it from this list.
const KNOWN_MISSING_KERNELS: &[(&str, &str)] = &[];

/// The nine light models (names without the `light_` prefix).
const MODELS: [&str; 9] = [
    "bvlc_alexnet",
    "densenet121",
    "inception_v1",
    "inception_v2",
    "resnet50",
    "shufflenet",
    "squeezenet",
    "vgg19",
    "zfnet512",
];

/// Relative and absolute tolerance against onnxruntime.
const RTOL: f64 = 1e-3;
const ATOL: f64 = 1e-4;

/// Compiles and runs `dir/NAME.onnx` on `NAME_input_0.npy`; compares every output with
/// `NAME_output_K.npy`. Returns a one-line summary, or the first problem; a compile error is
/// returned as `Err(Compile(..))` so known missing kernels can be told apart.
fn check(dir: &Path, name: &str) -> Result<String, Failure> {
    let other = |e: String| Failure::Other(format!("{name}: {e}"));
    let model = compile_file(
        &dir.join(format!("{name}.onnx")),
        &CompileOptions::default(),
    )
    .map_err(|e| Failure::Compile(e.to_string()))?;
    let input =
        read_npy(&dir.join(format!("{name}_input_0.npy"))).map_err(|e| other(e.to_string()))?;
    let mut session = Session::new(&model).map_err(|e| other(e.to_string()))?;
    let outputs = session
        .run_positional(&[input.view()])
        .map_err(|e| other(e.to_string()))?;
    let mut line = format!("{name}: arena {} B", model.summary().arena_bytes);
    for k in 0..outputs.len() {
        let ours = outputs
            .get(k)
            .ok_or_else(|| other(format!("no output {k}")))?;
        let path = dir.join(format!("{name}_output_{k}.npy"));
        let theirs = read_npy(&path).map_err(|e| other(e.to_string()))?;
        if ours.shape() != theirs.shape() {
            return Err(other(format!(
                "output {k}: shape {:?}, onnxruntime {:?}",
                ours.shape(),
                theirs.shape()
            )));
        }
        let (a, b) = (ours.to_f32_vec(), theirs.view().to_f32_vec());
        let mut max_diff = 0.0f64;
        for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
            let d = (f64::from(x) - f64::from(y)).abs();
            if d.is_nan() || d > ATOL + RTOL * f64::from(y).abs() {
                return Err(other(format!(
                    "output {k}[{i}]: {x}, onnxruntime {y} (|diff| {d:.2e})"
                )));
            }
            max_diff = max_diff.max(d);
        }
        line += &format!("; output {k} {:?} max |diff| {max_diff:.2e}", ours.shape());
    }
    if dir
        .join(format!("{name}_output_{}.npy", outputs.len()))
        .exists()
    {
        return Err(other(format!(
            "onnxruntime has more than our {} outputs",
            outputs.len()
        )));
    }
    Ok(line)
}

/// Why a model failed.
enum Failure {
    /// `compile_file` failed (the message).
    Compile(String),
    /// Anything after compiling.
    Other(String),
}

fn light_random_dir() -> Option<PathBuf> {
    let dir = std::env::var("ARENAC_LIGHT_RANDOM_DIR")
        .ok()
        .filter(|s| !s.is_empty());
    if dir.is_none() {
        println!(
            "ARENAC_LIGHT_RANDOM_DIR is unset: skipping (bash scripts/test.sh generates the models and sets it)"
        );
    }
    dir.map(PathBuf::from)
}

#[test]
fn light_models_random_weights_match_onnxruntime() {
    let Some(dir) = light_random_dir() else {
        return;
    };
    let mut failures = Vec::new();
    for name in MODELS {
        if !dir.join(format!("{name}.onnx")).exists() {
            println!("{name}: not generated (randomize_light.py --skip?): skipped");
            continue;
        }
        let missing = KNOWN_MISSING_KERNELS
            .iter()
            .find(|(m, _)| *m == name)
            .map(|(_, op)| *op);
        match (check(&dir, name), missing) {
            (Ok(line), None) => println!("{line}"),
            (Ok(line), Some(op)) => failures.push(format!(
                "{name} compiles and runs now ({line}): remove it from KNOWN_MISSING_KERNELS ({op})"
            )),
            (Err(Failure::Compile(e)), Some(op)) if e.contains(&format!("no kernel for {op}")) => {
                println!("{name}: known missing kernel: {e}");
            }
            (Err(Failure::Compile(e)), _) => failures.push(format!("{name}: compile: {e}")),
            (Err(Failure::Other(e)), _) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// Runs `scripts/SCRIPT OUTDIR` (a model writer: models, seeded inputs and onnxruntime's
/// outputs, needs `ARENAC_PYTHON`) into a temporary directory and checks each of `names`.
fn scripted_models_match(script: &str, names: &[&str]) {
    let Some(py) = std::env::var_os("ARENAC_PYTHON").filter(|p| !p.is_empty()) else {
        println!("ARENAC_PYTHON is unset: skipping (bash scripts/test.sh sets it)");
        return;
    };
    let dir = tempfile::tempdir().expect("temporary directory");
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scripts")
        .join(script);
    let status = std::process::Command::new(py)
        .arg(&script)
        .arg(dir.path())
        .status()
        .expect("runs python");
    assert!(status.success(), "{} failed", script.display());
    let mut failures = Vec::new();
    for name in names {
        match check(dir.path(), name) {
            Ok(line) => println!("{line}"),
            Err(Failure::Compile(e)) => failures.push(format!("{name}: compile: {e}")),
            Err(Failure::Other(e)) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// Audio front ends (`scripts/make_logmel.py`): the STFT of 1 s of 16 kHz audio, and a log-mel
/// spectrogram (STFT -> |X|^2 -> MatMul with a MelWeightMatrix -> Log), with the window and
/// the mel matrix computed in the graph from constants.
#[test]
fn audio_front_ends_match_onnxruntime() {
    scripted_models_match("make_logmel.py", &["stft", "logmel"]);
}

/// 3-d convolutions (`scripts/make_conv3d.py`): a video-style stack of Convs over
/// `[N, C, frames, H, W]` with pads (symmetric, SAME_UPPER), strides, dilation, groups, bias
/// and fused activations, then 3-d pooling and a classifier; both the logits and the last
/// Conv's activation are compared.
#[test]
fn conv3d_stack_matches_onnxruntime() {
    scripted_models_match("make_conv3d.py", &["video3d"]);
}
