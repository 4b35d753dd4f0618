//! The shipped demo model end to end: all 100 samples in one run match onnxruntime's stored
//! probabilities within 1e-5 and give 98/100 correct; `arenac run --labels` reports the same.

use std::process::Command;

use arenac::TensorRef;
use arenac::io::npy::read_npy;

mod common;

#[test]
fn digits_matches_onnxruntime() {
    let model = common::digits(100);
    let samples = read_npy(&common::repo("models/digits/samples.npy")).unwrap();
    let expected = read_npy(&common::repo("models/digits/expected_probs.npy"))
        .unwrap()
        .view()
        .to_f32_vec();
    let labels = read_npy(&common::repo("models/digits/labels.npy"))
        .unwrap()
        .view()
        .to_f32_vec();
    let mut session = model.session().unwrap();
    let out = session.run(&[("pixels", samples.view())]).unwrap();
    let probs = out.by_name("probs").unwrap();
    assert_eq!(probs.shape(), &[100, 10]);
    let probs = probs.to_f32_vec();
    let worst = probs
        .iter()
        .zip(&expected)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(worst <= 1e-5, "max |arenac - onnxruntime| = {worst}");
    let correct = (0..100)
        .filter(|&r| {
            let row = &probs[r * 10..r * 10 + 10];
            let best = (0..10).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap();
            best as f32 == labels[r]
        })
        .count();
    assert_eq!(correct, 98);

    // One sample at a time gives the same rows.
    let one = common::digits(1);
    let mut s1 = one.session().unwrap();
    let px = samples.view().to_f32_vec();
    for r in [0, 37, 99] {
        let x = TensorRef::from_slice(&[1, 64], &px[r * 64..r * 64 + 64]).unwrap();
        let row = s1
            .run(&[("pixels", x)])
            .unwrap()
            .get(0)
            .unwrap()
            .to_f32_vec();
        for (a, b) in row.iter().zip(&expected[r * 10..r * 10 + 10]) {
            assert!((a - b).abs() <= 1e-5, "row {r}: {a} vs {b}");
        }
    }
}

#[test]
fn cli_run_reports_accuracy_and_writes_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_arenac"))
        .arg("run")
        .arg(common::repo("models/digits/digits.onnx"))
        .arg("--input")
        .arg(format!(
            "pixels={}",
            common::repo("models/digits/samples.npy").display()
        ))
        .arg("--labels")
        .arg(common::repo("models/digits/labels.npy"))
        .arg("--output-dir")
        .arg(dir.path())
        .args(["--repeat", "3"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for needle in [
        "output 0: probs f32[100,10]",
        "median of 3 runs",
        "arena:",
        "weights:",
        "compiled in",
        "predicted: ",
        "accuracy: 98/100 (98.0%)",
    ] {
        assert!(stdout.contains(needle), "{needle} missing:\n{stdout}");
    }
    let written = read_npy(&dir.path().join("output_0.npy")).unwrap();
    assert_eq!(written.shape(), &[100, 10]);
    let expected = read_npy(&common::repo("models/digits/expected_probs.npy")).unwrap();
    for (a, b) in written
        .view()
        .to_f32_vec()
        .iter()
        .zip(expected.view().to_f32_vec())
    {
        assert!((a - b).abs() <= 1e-5);
    }

    // No inputs: seeded random ones, the same output twice.
    let run_random = || {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_arenac"))
            .arg("run")
            .arg(common::repo("models/digits/digits.onnx"))
            .args(["--shape", "N=4", "--output-dir"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success());
        assert!(String::from_utf8_lossy(&out.stdout).contains("random, seeded"));
        std::fs::read(dir.path().join("output_0.npy")).unwrap()
    };
    assert_eq!(run_random(), run_random());
}

/// One compiled model shared by threads, one session each: every thread gets the same rows
/// as onnxruntime's stored probabilities (`Model: Sync`, `Session: Send`).
#[test]
fn one_model_runs_on_several_threads() {
    fn send<T: Send>() {}
    fn sync<T: Send + Sync>() {}
    send::<arenac::Session>();
    sync::<arenac::Model>();

    let model = common::digits(1);
    let samples = read_npy(&common::repo("models/digits/samples.npy"))
        .unwrap()
        .view()
        .to_f32_vec();
    let expected = read_npy(&common::repo("models/digits/expected_probs.npy"))
        .unwrap()
        .view()
        .to_f32_vec();
    std::thread::scope(|s| {
        for t in 0..4 {
            let (model, samples, expected) = (&model, &samples, &expected);
            s.spawn(move || {
                let mut session = model.session().unwrap();
                for r in (t..100).step_by(4) {
                    let x = TensorRef::from_slice(&[1, 64], &samples[r * 64..r * 64 + 64]).unwrap();
                    let row = session
                        .run(&[("pixels", x)])
                        .unwrap()
                        .get(0)
                        .unwrap()
                        .to_f32_vec();
                    for (a, b) in row.iter().zip(&expected[r * 10..r * 10 + 10]) {
                        assert!((a - b).abs() <= 1e-5, "thread {t}, row {r}: {a} vs {b}");
                    }
                }
            });
        }
    });
}
