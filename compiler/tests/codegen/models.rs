//! Whole models: the demo model against onnxruntime, and any models in $ARENAC_CODEGEN_MODELS.

use arenac_compiler::arena::plan_graph;

use crate::common::*;

#[test]
fn digits_matches_reference_and_onnxruntime() {
    let dir = repo_root().join("models").join("digits");
    let opts = ImportOptions {
        shapes: vec![("N".into(), vec![100])],
        ..ImportOptions::default()
    };
    let g = import_file(&dir.join("digits.onnx"), &opts)
        .expect("imports")
        .graph;
    let (shape, samples) = read_npy_f32(&dir.join("samples.npy"));
    assert_eq!(shape, vec![100, 64]);
    let x = Tensor::f32(shape, &samples);
    let exe = check_graph(&g, std::slice::from_ref(&x), RTOL, ATOL);
    println!(
        "digits: compiled in {:?} ({} kernels, {} B weights, {} B arena)",
        exe.compile_time(),
        exe.kernel_count(),
        exe.weights_bytes(),
        exe.arena_bytes()
    );
    let got = run(&exe, &[x]);
    let (eshape, expected) = read_npy_f32(&dir.join("expected_probs.npy"));
    assert_eq!(got[0].shape(), &eshape[..]);
    let max = got[0]
        .to_f32_vec()
        .iter()
        .zip(&expected)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    println!("digits: max |jit - onnxruntime| = {max:.2e}");
    assert!(max <= 1e-5, "max difference {max}");
}

/// Every `.onnx` in `$ARENAC_CODEGEN_MODELS` (when set): compile, run on deterministic inputs,
/// compare with the reference (within 1e-4 relative to the output's largest magnitude).
/// Prints compile and run times.
#[test]
fn models_from_env_dir() {
    let Some(dir) = std::env::var_os("ARENAC_CODEGEN_MODELS") else {
        println!("ARENAC_CODEGEN_MODELS not set: skipped");
        return;
    };
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("reads the models folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "onnx"))
        .collect();
    paths.sort();
    for path in paths {
        // The reference runs on the graph as imported, the program on the fused graph.
        let unfused = import_file(&path, &ImportOptions::default())
            .expect("imports")
            .graph;
        let mut g = unfused.clone();
        let plan = plan_graph(&mut g, &PlanOptions::default()).expect("plans");
        let exe = match compile(&g, &plan) {
            Ok(e) => e,
            Err(e) => {
                println!("{}: {e}", path.display());
                continue;
            }
        };
        let inputs: Vec<Tensor> = g
            .inputs
            .iter()
            .map(|&v| {
                let ty = &g.value(v).ty;
                let n = ty.numel().expect("static");
                if ty.dtype == DType::I64 {
                    let ids: Vec<i64> = (0..n as i64).map(|i| i % 7).collect();
                    Tensor::i64(ty.shape.clone(), &ids)
                } else {
                    let v: Vec<f32> = (0..n)
                        .map(|i| (i * 7919 % 1000) as f32 / 500.0 - 1.0)
                        .collect();
                    Tensor::f32(ty.shape.clone(), &v)
                }
            })
            .collect();
        let started = std::time::Instant::now();
        let got = run(&exe, &inputs);
        let run_time = started.elapsed();
        let want = eval_graph(&unfused, &inputs).expect("reference");
        for (a, b) in got.iter().zip(&want) {
            let (a, b) = (a.to_f32_vec(), b.to_f32_vec());
            let scale = b.iter().fold(0.0f32, |m, x| m.max(x.abs())).max(1e-6);
            let diff = a
                .iter()
                .zip(&b)
                .fold(0.0f32, |m, (x, y)| m.max((x - y).abs()));
            println!(
                "{}: compile {:?} ({} kernels, {} nodes fused into {}), run {run_time:?}, max diff {diff:.2e} (max |ref| {scale:.3})",
                path.display(),
                exe.compile_time(),
                exe.kernel_count(),
                plan.fusion.nodes_fused,
                plan.fusion.groups
            );
            assert!(diff <= 1e-4 * scale, "{}: max diff {diff}", path.display());
        }
    }
}
