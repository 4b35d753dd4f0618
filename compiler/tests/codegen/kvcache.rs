//! TensorScatter (a KV-cache update moving bytes) and MaxPool's Indices output (host
//! kernels): against the reference evaluation and plain loops written here; run-time write
//! indices outside the cache are the run's fault.

use crate::common::*;

fn scatter_model(past: &[usize], up: &[usize], mode: &str, dtype: DType) -> ModelProto {
    ModelBuilder::new("scatter", 24)
        .input("past", dtype, &dims(past))
        .input("up", dtype, &dims(up))
        .input("idx", DType::I64, &dims(&past[..1]))
        .output("y", dtype, &[])
        .node(
            "my_scatter",
            "TensorScatter",
            &["past", "up", "idx"],
            &["y"],
            vec![("mode", Attr::Str(mode.into()))],
        )
        .build()
}

#[test]
fn tensor_scatter_writes_the_update_rows() {
    let mut rng = Rng(0x5eed_0e01);
    let (past_s, up_s) = ([2usize, 3, 5, 4], [2usize, 3, 2, 4]);
    for mode in ["linear", "circular"] {
        let past = rng.tensor(&past_s, -1.0, 1.0);
        let up = rng.tensor(&up_s, -1.0, 1.0);
        let starts = if mode == "linear" { [3i64, 0] } else { [4, 9] };
        let idx = Tensor::i64(vec![2], &starts);
        let exe = check(
            scatter_model(&past_s, &up_s, mode, DType::F32),
            &[past.clone(), up.clone(), idx.clone()],
            0.0,
            0.0,
        );
        let y = run(&exe, &[past.clone(), up.clone(), idx])[0].to_f32_vec();
        let mut want = past.to_f32_vec();
        let u = up.to_f32_vec();
        for b in 0..2 {
            for h in 0..3 {
                for s in 0..2 {
                    let c = (starts[b] + s as i64).rem_euclid(5) as usize;
                    for d in 0..4 {
                        want[((b * 3 + h) * 5 + c) * 4 + d] = u[((b * 3 + h) * 2 + s) * 4 + d];
                    }
                }
            }
        }
        assert_eq!(y, want, "{mode}");
    }
    // Any element type: int64, 3-d.
    let past = Tensor::i64(vec![2, 3, 1], &[1, 2, 3, 4, 5, 6]);
    let up = Tensor::i64(vec![2, 1, 1], &[70, 80]);
    let idx = Tensor::i64(vec![2], &[2, 0]);
    let exe = check(
        scatter_model(&[2, 3, 1], &[2, 1, 1], "linear", DType::I64),
        &[past.clone(), up.clone(), idx.clone()],
        0.0,
        0.0,
    );
    assert_eq!(
        run(&exe, &[past, up, idx])[0].to_i64_vec(),
        vec![1, 2, 70, 80, 5, 6]
    );
}

#[test]
fn tensor_scatter_index_outside_the_cache_is_a_fault() {
    let g = import(&scatter_model(&[2, 4, 3], &[2, 2, 3], "linear", DType::F32));
    let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
    let exe = compile(&g, &plan).expect("compiles");
    let mut arena = AlignedBytes::zeroed(exe.arena_bytes());
    let past = Tensor::f32(vec![2, 4, 3], &[0.0; 24]);
    let up = Tensor::f32(vec![2, 2, 3], &[1.0; 12]);
    let ok = run_in(
        &exe,
        &mut arena,
        &[past.clone(), up.clone(), Tensor::i64(vec![2], &[2, 0])],
    );
    assert!(ok.is_ok());
    let e = run_in(&exe, &mut arena, &[past, up, Tensor::i64(vec![2], &[3, 0])]).expect_err("bad");
    assert!(e.contains("my_scatter") && e.contains('3'), "{e}");
}

#[test]
fn max_pool_indices_point_at_the_maxima() {
    let mut rng = Rng(0x5eed_0e02);
    let xs = [2, 3, 5, 6];
    let x = rng.tensor(&xs, -1.0, 1.0);
    for (order, pads) in [(0, vec![0i64; 4]), (1, vec![1, 0, 1, 1])] {
        let m = ModelBuilder::new("argmax", 12)
            .input("x", DType::F32, &dims(&xs))
            .output("y", DType::F32, &[])
            .output("i", DType::I64, &[])
            .node(
                "my_pool",
                "MaxPool",
                &["x"],
                &["y", "i"],
                vec![
                    ("kernel_shape", Attr::Ints(vec![2, 3])),
                    ("strides", Attr::Ints(vec![2, 2])),
                    ("pads", Attr::Ints(pads)),
                    ("storage_order", Attr::Int(order)),
                ],
            )
            .build();
        let exe = check(m, std::slice::from_ref(&x), 0.0, 0.0);
        let out = run(&exe, std::slice::from_ref(&x));
        let (y, idx) = (out[0].to_f32_vec(), out[1].to_i64_vec());
        let v = x.to_f32_vec();
        for (k, (&y, &i)) in y.iter().zip(&idx).enumerate() {
            // Undo the index's layout, then read X there.
            let i = i as usize;
            let (plane, rest) = (i / 30, i % 30);
            let (h, w) = if order == 0 {
                (rest / 6, rest % 6)
            } else {
                (rest % 5, rest / 5)
            };
            assert_eq!(v[plane * 30 + h * 6 + w], y, "output {k}");
            assert_eq!(plane, k / out[0].shape()[2..].iter().product::<usize>());
        }
    }
}
