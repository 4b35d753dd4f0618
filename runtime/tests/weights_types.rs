//! `--weights f16|bf16|int8`: the demo model keeps its accuracy in every mode with its outputs
//! close to f32's, the weights region shrinks by what the summary predicts, and the
//! combinations that change nothing say so (a model without weights; f16 weights given f16).

use std::process::Command;

use arenac::io::npy::read_npy;
use arenac::{CompileOptions, Model, WeightType, compile_file};

mod common;

fn digits(t: WeightType) -> Model {
    let opts = CompileOptions {
        weights: t,
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
fn digits_keeps_its_accuracy_in_every_weights_mode() {
    let labels = read_npy(&common::repo("models/digits/labels.npy"))
        .unwrap()
        .view()
        .to_f32_vec();
    let f32_model = digits(WeightType::F32);
    let reference = probs(&f32_model);
    let f32_weights = f32_model.executable().unwrap().weights_bytes();
    for (t, tol) in [
        (WeightType::F16, 1e-2),
        (WeightType::Bf16, 6e-2),
        (WeightType::I8, 6e-2),
    ] {
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
        // Probabilities lie in [0, 1]: an absolute bound is a relative one to the largest.
        assert!(worst <= tol, "{t:?}: max |p - p_f32| = {worst}");
        // The executable stores what the summary predicted, and less than f32.
        let exe = model.executable().unwrap();
        let (stored, source) = exe.reduced_weights();
        let s = model
            .summary()
            .weights_storage
            .expect("a reduced type is reported");
        assert_eq!(
            (s.reduced_bytes, s.reduced_source_bytes),
            (stored, source),
            "{t:?}"
        );
        assert!(s.saving_bytes > 0 && s.note.is_none(), "{t:?}: {s:?}");
        assert!(
            exe.weights_bytes() + s.saving_bytes / 2 < f32_weights,
            "{t:?}: {} bytes against {f32_weights} for f32",
            exe.weights_bytes()
        );
        assert!(
            model
                .plan_report()
                .to_json()
                .contains("\"weights_storage\"")
        );
    }
}

/// A model's bytes written to a temporary file.
fn tiny(name: &str, build: impl FnOnce() -> Vec<u8>) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("arenac-wt-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.onnx"));
    std::fs::write(&path, build()).unwrap();
    path
}

#[test]
fn a_model_without_weights_gets_a_note_and_f16_weights_given_f16_another() {
    use arenac::DType;
    use arenac_compiler::import::builder::{Dim, ModelBuilder};
    use prost::Message;
    let relu = tiny("relu", || {
        ModelBuilder::new("relu", 13)
            .input("x", DType::F32, &[Dim::N(4)])
            .output("y", DType::F32, &[])
            .node("r", "Relu", &["x"], &["y"], vec![])
            .build()
            .encode_to_vec()
    });
    let opts = CompileOptions {
        weights: WeightType::I8,
        ..CompileOptions::default()
    };
    let m = compile_file(&relu, &opts).unwrap();
    let s = m.summary().weights_storage.unwrap();
    assert_eq!(s.saving_bytes, 0);
    assert!(
        s.note
            .as_deref()
            .unwrap()
            .contains("no Conv/Gemm/MatMul weights"),
        "{s:?}"
    );

    // MatMul on an f16 model: its weight (widened to f32 at import) goes back to f16 exactly.
    let half = tiny("half", || {
        let vals: Vec<f64> = (0..64 * 64).map(|i| f64::from(i % 7) / 8.0).collect();
        let w = arenac::Tensor::from_f64(DType::F16, vec![64, 64], &vals);
        ModelBuilder::new("half", 13)
            .input("x", DType::F16, &[Dim::N(2), Dim::N(64)])
            .initializer("w", &w)
            .output("y", DType::F16, &[])
            .node("mm", "MatMul", &["x", "w"], &["y"], vec![])
            .build()
            .encode_to_vec()
    });
    let opts = CompileOptions {
        weights: WeightType::F16,
        ..CompileOptions::default()
    };
    let m = compile_file(&half, &opts).unwrap();
    let s = m.summary().weights_storage.unwrap();
    assert!(
        s.note
            .as_deref()
            .unwrap_or_default()
            .contains("stored in f16 exactly"),
        "{s:?}"
    );
    assert_eq!(s.reduced_source_bytes, 64 * 64 * 4);
    // The same outputs as with f32 weights, bit for bit.
    let x = arenac::Tensor::from_f64(DType::F16, vec![2, 64], &[0.5; 128]);
    let run = |m: &Model| {
        let mut s = m.session().unwrap();
        let xr = arenac::TensorRef::from_bytes(DType::F16, &[2, 64], x.bytes()).unwrap();
        s.run(&[("x", xr)]).unwrap().get(0).unwrap().to_f32_vec()
    };
    let f32_model = compile_file(&half, &CompileOptions::default()).unwrap();
    assert_eq!(run(&m), run(&f32_model));
}

#[test]
fn cli_takes_weights_and_refuses_nonsense() {
    let model = common::repo("models/digits/digits.onnx");
    let out = Command::new(env!("CARGO_BIN_EXE_arenac"))
        .args(["plan", "--weights", "int8", "--shape", "N=1"])
        .arg(&model)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("as int8"), "{stdout}");
    let out = Command::new(env!("CARGO_BIN_EXE_arenac"))
        .args(["run", "--weights", "fp8"])
        .arg(&model)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("unknown weights type 'fp8': use f32, f16, bf16 or int8"),
        "{stderr}"
    );
}

/// A small CNN (strided 3x3 stem, depthwise, pointwise, 3x3, pooling, Gemm head, MatMul)
/// with seeded weights, as ONNX bytes.
fn small_cnn() -> Vec<u8> {
    use arenac::{DType, Tensor};
    use arenac_compiler::import::builder::{Attr, Dim, ModelBuilder};
    use prost::Message;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut t = |shape: &[usize]| {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            })
            .collect();
        Tensor::f32(shape.to_vec(), &v)
    };
    let ints = |v: &[i64]| Attr::Ints(v.to_vec());
    let pad1 = || vec![("pads", ints(&[1, 1, 1, 1]))];
    ModelBuilder::new("cnn", 13)
        .input("x", DType::F32, &[1, 3, 48, 48].map(Dim::N))
        .output("y", DType::F32, &[])
        .initializer("w1", &t(&[32, 3, 3, 3]))
        .initializer("b1", &t(&[32]))
        .initializer("wd", &t(&[32, 1, 3, 3]))
        .initializer("wp", &t(&[64, 32, 1, 1]))
        .initializer("w2", &t(&[64, 64, 3, 3]))
        .initializer("fc", &t(&[64, 48]))
        .initializer("mm", &t(&[48, 10]))
        .node(
            "stem",
            "Conv",
            &["x", "w1", "b1"],
            &["a"],
            vec![("pads", ints(&[1, 1, 1, 1])), ("strides", ints(&[2, 2]))],
        )
        .node("r1", "Relu", &["a"], &["ar"], vec![])
        .node("dw", "Conv", &["ar", "wd"], &["d"], {
            let mut a = pad1();
            a.push(("group", Attr::Int(32)));
            a
        })
        .node("pw", "Conv", &["d", "wp"], &["p"], vec![])
        .node("r2", "Relu", &["p"], &["pr"], vec![])
        .node("c2", "Conv", &["pr", "w2"], &["c"], pad1())
        .node("gap", "GlobalAveragePool", &["c"], &["g"], vec![])
        .node("flat", "Flatten", &["g"], &["f"], vec![])
        .node("head", "Gemm", &["f", "fc"], &["h"], vec![])
        .node("out", "MatMul", &["h", "mm"], &["y"], vec![])
        .build()
        .encode_to_vec()
}

/// `--weights` reduced together with `--activations f16|bf16`: the staged Conv, Gemm and
/// MatMul store their weights in the reduced type too (the executable holds what the summary
/// predicted), only the depthwise Conv's stay f32, and the outputs stay close to f32's.
#[test]
fn reduced_weights_with_16_bit_activations() {
    use arenac::ActType;
    let path = tiny("cnn", small_cnn);
    let x: Vec<f32> = (0..3 * 48 * 48)
        .map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0)
        .collect();
    let run = |m: &Model| {
        let mut s = m.session().unwrap();
        let xr = arenac::TensorRef::from_slice(&[1, 3, 48, 48], &x).unwrap();
        s.run(&[("x", xr)]).unwrap().get(0).unwrap().to_f32_vec()
    };
    let reference = run(&compile_file(&path, &CompileOptions::default()).unwrap());
    let scale = reference.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    for act in [ActType::F16, ActType::Bf16] {
        for (t, tol) in [
            (WeightType::F16, 1e-2),
            (WeightType::Bf16, 6e-2),
            (WeightType::I8, 6e-2),
        ] {
            let opts = CompileOptions {
                weights: t,
                activations: act,
                ..CompileOptions::default()
            };
            let m = compile_file(&path, &opts)
                .unwrap_or_else(|e| panic!("{t:?} weights, {act:?} activations: {e}"));
            let s = m
                .summary()
                .weights_storage
                .expect("a reduced type is reported");
            let exe = m.executable().unwrap();
            assert_eq!(
                (s.reduced_bytes, s.reduced_source_bytes),
                exe.reduced_weights(),
                "{t:?}/{act:?}"
            );
            // Everything but the depthwise Conv's 288 weights (and the biases) is reduced.
            let all = 32 * 27 + 64 * 32 + 64 * 64 * 9 + 64 * 48 + 48 * 10;
            assert_eq!(s.reduced_source_bytes, all * 4, "{t:?}/{act:?}: {s:?}");
            assert!(
                s.saving_bytes > 0 && s.note.is_none(),
                "{t:?}/{act:?}: {s:?}"
            );
            let y = run(&m);
            let worst = y
                .iter()
                .zip(&reference)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            assert!(
                worst <= tol * scale,
                "{t:?}/{act:?}: max |y - y_f32| = {worst}, scale {scale}"
            );
        }
    }
}
