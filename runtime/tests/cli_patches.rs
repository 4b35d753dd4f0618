//! Patch-based execution through the CLI: a CNN whose plan does not fit a `--memory-limit`
//! unpatched runs under it patched (the default policy), `--no-patches` refuses it, `--patches`
//! patches it unasked, the plan report shows the stage; outputs match the unpatched run's.

use arenac::DType;
use arenac_compiler::import::builder::{Attr, Dim, ModelBuilder};
use arenac_compiler::ir::tensor::Tensor;
use prost::Message;

mod common;
use common::arenac;

/// A MobileNet-style stem on a 3x128x128 image: conv 3x3/s2 to 16 channels + Relu, depthwise
/// 3x3 + Relu, pointwise expand to 48 and project to 16, MaxPool 2x2, a 3x3/s2 conv, global
/// average pooling and a Gemm to 10 classes. The full-resolution tensors make the peak.
fn model(dir: &std::path::Path) -> std::path::PathBuf {
    let mut seed = 0x2545_f491_u64;
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
    let m = ModelBuilder::new("stem", 13)
        .input("x", DType::F32, &[1, 3, 128, 128].map(Dim::N))
        .output("y", DType::F32, &[])
        .initializer("w1", &t(&[16, 3, 3, 3]))
        .initializer("wd", &t(&[16, 1, 3, 3]))
        .initializer("we", &t(&[48, 16, 1, 1]))
        .initializer("wp", &t(&[16, 48, 1, 1]))
        .initializer("w2", &t(&[32, 16, 3, 3]))
        .initializer("fc", &t(&[32, 10]))
        .node(
            "stem",
            "Conv",
            &["x", "w1"],
            &["a"],
            vec![("pads", ints(&[1, 1, 1, 1])), ("strides", ints(&[2, 2]))],
        )
        .node("r1", "Relu", &["a"], &["ar"], vec![])
        .node(
            "dw",
            "Conv",
            &["ar", "wd"],
            &["d"],
            vec![("pads", ints(&[1, 1, 1, 1])), ("group", Attr::Int(16))],
        )
        .node("r2", "Relu", &["d"], &["dr"], vec![])
        .node("exp", "Conv", &["dr", "we"], &["e"], vec![])
        .node("proj", "Conv", &["e", "wp"], &["p"], vec![])
        .node(
            "mp",
            "MaxPool",
            &["p"],
            &["m"],
            vec![("kernel_shape", ints(&[2, 2])), ("strides", ints(&[2, 2]))],
        )
        .node(
            "c2",
            "Conv",
            &["m", "w2"],
            &["c"],
            vec![("pads", ints(&[1, 1, 1, 1])), ("strides", ints(&[2, 2]))],
        )
        .node("gap", "GlobalAveragePool", &["c"], &["g"], vec![])
        .node("flat", "Flatten", &["g"], &["f"], vec![])
        .node("head", "Gemm", &["f", "fc"], &["y"], vec![])
        .build();
    let path = dir.join("stem.onnx");
    std::fs::write(&path, m.encode_to_vec()).expect("write the model");
    path
}

/// `arena_bytes` and `weights_bytes` of `arenac plan --json` with `extra` flags.
fn planned(model: &str, extra: &[&str]) -> (usize, usize, String) {
    let mut args = vec!["plan", model, "--json", "--threads", "1"];
    args.extend_from_slice(extra);
    let (code, out, err) = arenac(&args);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let n = |k: &str| v[k].as_u64().expect("a number") as usize;
    (n("arena_bytes"), n("weights_bytes"), out)
}

#[test]
fn a_model_over_the_limit_runs_patched_with_the_same_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let model = model(dir.path());
    let m = model.to_str().unwrap();
    let (arena, weights, _) = planned(m, &[]);
    let (patched, _, json) = planned(m, &["--patches"]);
    assert!(patched * 2 < arena, "patched arena {patched} vs {arena}");
    assert!(json.contains("\"patches\""), "{json}");
    // Between the two totals: refused unpatched, fits patched.
    let limit = (weights + (arena + patched) / 2).to_string();
    let (code, _, err) = arenac(&[
        "run",
        m,
        "--threads",
        "1",
        "--memory-limit",
        &limit,
        "--no-patches",
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("memory limit exceeded"), "{err}");
    let plain = dir.path().join("plain");
    let (code, _, err) = arenac(&[
        "run",
        m,
        "--threads",
        "1",
        "--output-dir",
        plain.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let fitted = dir.path().join("fitted");
    let (code, out, err) = arenac(&[
        "run",
        m,
        "--threads",
        "1",
        "--memory-limit",
        &limit,
        "--output-dir",
        fitted.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("patches: stage of"), "{out}");
    // Same header; values equal within 1e-6 of the output's scale (a patch's smaller planes
    // may take another kernel path, e.g. the small-plane pointwise kernel, which adds in
    // another order).
    let a = std::fs::read(plain.join("output_0.npy")).unwrap();
    let b = std::fs::read(fitted.join("output_0.npy")).unwrap();
    assert_eq!(a.len(), b.len());
    let values = |d: &[u8]| -> Vec<f32> {
        d[d.len() - 40..]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    };
    let (va, vb) = (values(&a), values(&b));
    let scale = va.iter().fold(0f32, |m, x| m.max(x.abs()));
    for (x, y) in va.iter().zip(&vb) {
        assert!(
            (x - y).abs() <= 1e-6 * scale,
            "patched {y} vs unpatched {x}"
        );
    }
    let svg = dir.path().join("plan.svg");
    let (code, out, err) = arenac(&[
        "plan",
        m,
        "--threads",
        "1",
        "--patches",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("arena without patches"), "{out}");
    let svg = std::fs::read_to_string(svg).unwrap();
    assert!(svg.contains("patches: stage of"), "the SVG shows the stage");
}

/// `--patch-flops` bounds what the halos may recompute: the plan report's share stays under
/// it, and a larger budget never plans a larger arena; a memory limit that only a larger
/// budget meets is met (the policy tries 25% and 50% before refusing).
#[test]
fn the_recompute_budget_bounds_the_stage() {
    let dir = tempfile::tempdir().unwrap();
    let model = model(dir.path());
    let m = model.to_str().unwrap();
    let share = |json: &str| {
        let v: serde_json::Value = serde_json::from_str(json).expect("JSON");
        let p = &v["patches"];
        p["extra_flops"].as_f64().unwrap_or(0.0) / p["total_flops"].as_f64().unwrap_or(1.0)
    };
    let (tight, weights, tj) = planned(m, &["--patches", "--patch-flops", "1"]);
    let (loose, _, lj) = planned(m, &["--patches", "--patch-flops", "50"]);
    assert!(share(&tj) <= 0.01, "{tj}");
    assert!(share(&lj) <= 0.50, "{lj}");
    // Here a finer grid or a deeper stage pays (1.0 MiB at 1%, 274 KiB at 50%).
    assert!(loose < tight, "50%: {loose}, 1%: {tight}");
    // A limit at the 50% plan's total: met (the policy tries 10%, then 25% and 50%).
    let limit = (weights + loose).to_string();
    let (code, out, err) = arenac(&["run", m, "--threads", "1", "--memory-limit", &limit]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("patches: stage of"), "{out}");
    let (code, _, err) = arenac(&["plan", m, "--patch-flops", "-3"]);
    assert_ne!(code, 0, "{err}");
}

/// `--activations f16|bf16`: the retyped graph starts with the image's Cast to 16 bits, which a
/// stage takes (element-wise), and the staged 16-bit Convs and pools run on windows; the
/// patched 16-bit plan is smaller than the unpatched 16-bit one and its outputs match the
/// unpatched 16-bit run's.
#[test]
fn a_16bit_plan_patches_with_the_unpatched_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let model = model(dir.path());
    let m = model.to_str().unwrap();
    for act in ["f16", "bf16"] {
        let (arena, _, _) = planned(m, &["--activations", act, "--no-patches"]);
        let (patched, _, json) = planned(m, &["--activations", act, "--patches"]);
        assert!(json.contains("\"patches\""), "{act}: {json}");
        // Near half: the whole-plan choice (`patches::whole`) may keep a plan up to
        // WHOLE_SLACK above the smallest for less time (f16: 32x1 cached strips, nothing
        // recomputed, 0.508 of unpatched, over an 8x8 grid recomputing 8.9%, 0.486).
        assert!(
            patched * 100 < arena * 55,
            "{act}: patched {patched} vs {arena}"
        );
        let run = |name: &str, flag: &str| {
            let out = dir.path().join(format!("{act}-{name}"));
            let (code, _, err) = arenac(&[
                "run",
                m,
                "--threads",
                "1",
                "--activations",
                act,
                flag,
                "--output-dir",
                out.to_str().unwrap(),
            ]);
            assert_eq!(code, 0, "{err}");
            let d = std::fs::read(out.join("output_0.npy")).unwrap();
            d[d.len() - 40..]
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect::<Vec<f32>>()
        };
        let (plain, fitted) = (run("plain", "--no-patches"), run("patched", "--patches"));
        let scale = plain.iter().fold(0f32, |m, x| m.max(x.abs()));
        let exact = plain.iter().zip(&fitted).filter(|(x, y)| x == y).count();
        for (x, y) in plain.iter().zip(&fitted) {
            assert!(
                (x - y).abs() <= 1e-6 * scale,
                "{act}: patched {y} vs unpatched {x} ({exact} of 10 bit-identical)"
            );
        }
    }
}
