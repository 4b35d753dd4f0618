//! `--activations f16|bf16`: the demo model keeps its accuracy in every mode with its outputs
//! close to f32's; the arena shrinks and the summary and plan report (text and JSON) carry the
//! activations fields; an f16 model is a no-op with a note; an unknown type is a clear CLI error.

use std::process::Command;

use arenac::io::npy::read_npy;
use arenac::{ActType, CompileOptions, Model, compile_file};

mod common;

fn digits(t: ActType) -> Model {
    let opts = CompileOptions {
        activations: t,
        ..CompileOptions::default()
    }
    .with_shape("N", vec![100]);
    compile_file(&common::repo("models/digits/digits.onnx"), &opts)
        .unwrap_or_else(|e| panic!("digits does not compile with {t:?}: {e}"))
}

fn probs(model: &Model) -> Vec<f32> {
    let samples = read_npy(&common::repo("models/digits/samples.npy")).unwrap();
    let mut session = model.session().unwrap();
    let out = session.run(&[("pixels", samples.view())]).unwrap();
    out.by_name("probs").unwrap().to_f32_vec()
}

#[test]
fn digits_keeps_its_accuracy_in_every_activations_mode() {
    let labels = read_npy(&common::repo("models/digits/labels.npy"))
        .unwrap()
        .view()
        .to_f32_vec();
    let f32_model = digits(ActType::F32);
    let reference = probs(&f32_model);
    assert!(f32_model.summary().activations_storage.is_none());
    for (t, tol) in [(ActType::F16, 1e-2), (ActType::Bf16, 4e-2)] {
        let model = digits(t);
        let p = probs(&model);
        let correct = (0..100)
            .filter(|&r| {
                let row = &p[r * 10..r * 10 + 10];
                let best = (0..10).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap();
                best as f32 == labels[r]
            })
            .count();
        assert!(correct >= 97, "{t:?}: {correct}/100");
        let worst = p
            .iter()
            .zip(&reference)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(worst <= tol, "{t:?}: max |p - p_f32| = {worst}");
        let s = model
            .summary()
            .activations_storage
            .expect("f16/bf16 activations are reported");
        assert_eq!(s.activations, t.name());
        assert_eq!(s.arena_f32_bytes, f32_model.summary().arena_bytes);
        assert!(s.arena_bytes < s.arena_f32_bytes, "{t:?}: {s:?}");
        assert!(s.staged_nodes > 0 && s.kept_f32.is_empty(), "{t:?}: {s:?}");
        let r = model.plan_report();
        assert_eq!(r.activations_storage.as_ref(), Some(&s));
        assert!(r.to_text().contains(&format!("activations: {}", t.name())));
        assert!(r.to_json().contains("\"activations_storage\""));
    }
}

/// The f32 input is stored in the 16-bit type (read only by narrow nodes): the session still
/// takes f32 (`inputs()` declares it), rounds it on copy-in from any alignment, and the plan
/// report (text and JSON) lists it.
#[test]
fn the_f32_input_is_stored_narrowed() {
    let samples = read_npy(&common::repo("models/digits/samples.npy")).unwrap();
    let view = samples.view();
    let mut unaligned = vec![0u8; 3];
    unaligned.extend_from_slice(view.bytes());
    let shifted =
        arenac::TensorRef::from_bytes(view.dtype(), view.shape(), &unaligned[3..]).unwrap();
    for t in [ActType::F16, ActType::Bf16] {
        let model = digits(t);
        let s = model.summary().activations_storage.unwrap();
        assert_eq!(s.narrowed_inputs, vec!["pixels".to_string()], "{t:?}");
        let mut session = model.session().unwrap();
        let slot = &session.inputs()[0];
        assert_eq!(slot.ty.dtype, arenac::DType::F32, "{t:?}: declared type");
        assert_eq!(slot.stored, t.dtype(), "{t:?}: stored type");
        let want = probs(&model);
        let got = session.run(&[("pixels", shifted)]).unwrap();
        assert_eq!(got.by_name("probs").unwrap().to_f32_vec(), want, "{t:?}");
        let r = model.plan_report();
        let text = r.to_text();
        assert!(
            text.contains(&format!(
                "input stored in {} (f32 rounded on copy-in",
                t.name()
            )),
            "{text}"
        );
        assert!(r.to_json().contains("\"narrowed_inputs\""));
    }
}

#[test]
fn cli_reports_activations_and_rejects_unknown_types() {
    let bin = env!("CARGO_BIN_EXE_arenac");
    let model = common::repo("models/digits/digits.onnx");
    let out = Command::new(bin)
        .args(["compile", "--activations", "bf16", "--shape", "N=4"])
        .arg(&model)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("activations: bf16: arena"), "{text}");
    let out = Command::new(bin)
        .args(["plan", "--activations", "f8"])
        .arg(&model)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("unknown activations type 'f8': use f32, f16 or bf16"),
        "{err}"
    );
}
