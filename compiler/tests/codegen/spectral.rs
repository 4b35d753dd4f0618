//! DFT and STFT: the FFT kernel (`arenac_dft`, rustfft/realfft plans) against the reference
//! evaluation (the definition in f64, O(n^2)), at lengths 1, 2, primes, powers of two and
//! large ones, with batch dims on both sides of the axis, every onesided/inverse combination,
//! real and complex input, zero padding and truncation, windows, and widened f64/f16 nodes.

use crate::common::*;

/// The error bound of an f32 FFT of values in [-1, 1]: it grows like `sqrt(n) log2(n)`.
fn fft_atol(n: usize) -> f32 {
    let n = n as f32;
    2e-6 * n.sqrt() * n.log2().max(1.0) + 1e-6
}

/// A DFT node (opset 20, `axis` and `dft_length` as initializers) on an f32 input `x`.
fn dft_model(
    x: &[usize],
    axis: i64,
    len: Option<usize>,
    inverse: bool,
    onesided: bool,
) -> ModelProto {
    let mut b = ModelBuilder::new("dft", 20)
        .input("x", DType::F32, &dims(x))
        .initializer("axis", &Tensor::i64(vec![], &[axis]))
        .output("y", DType::F32, &dims(&[1]));
    let n = match len {
        Some(l) => {
            b = b.initializer("n", &Tensor::i64(vec![], &[l as i64]));
            "n"
        }
        None => "",
    };
    b.node(
        "dft",
        "DFT",
        &["x", n, "axis"],
        &["y"],
        vec![
            ("inverse", Attr::Int(i64::from(inverse))),
            ("onesided", Attr::Int(i64::from(onesided))),
        ],
    )
    .build()
}

#[test]
fn dft_every_mode_at_many_lengths() {
    let mut rng = Rng(0xDF7);
    // (inverse, onesided, input channels)
    let modes = [
        (false, false, 1),
        (false, false, 2),
        (false, true, 1),
        (false, true, 2),
        (true, false, 2),
        (true, false, 1),
        (true, true, 2),
    ];
    for n in [1usize, 2, 3, 7, 8, 13, 16, 60, 64, 97, 128, 257, 1000] {
        for &(inverse, onesided, c) in &modes {
            // Batch dims before and after the axis when small; one signal when large.
            let (outer, inner) = if n <= 64 { (2, 3) } else { (1, 1) };
            let x = [outer, n, inner, c];
            // For IRFFT the input holds n/2 + 1 bins of a length-n signal.
            let (x, len) = if inverse && onesided {
                ([outer, n / 2 + 1, inner, c], Some(n))
            } else {
                (x, None)
            };
            let m = dft_model(&x, 1, len, inverse, onesided);
            check(m, &[rng.tensor(&x, -1.0, 1.0)], 0.0, fft_atol(n));
        }
    }
}

#[test]
fn dft_large_power_of_two_and_large_prime() {
    let mut rng = Rng(4096);
    for n in [4096usize, 4099] {
        for (inverse, onesided, c) in [(false, true, 1), (false, false, 2), (true, false, 2)] {
            let x = [1, n, 1, c];
            let m = dft_model(&x, -3, None, inverse, onesided);
            check(m, &[rng.tensor(&x, -1.0, 1.0)], 0.0, fft_atol(n));
        }
    }
}

#[test]
fn dft_pads_truncates_and_takes_any_axis() {
    let mut rng = Rng(11);
    for (x, axis, len) in [
        (vec![3, 10, 1], 1, 16),
        (vec![3, 10, 2], -2, 7),
        (vec![5, 4, 6, 2], 0, 9),
        (vec![2, 3, 12, 1], 2, 5),
        (vec![2, 3, 12, 1], -3, 31),
    ] {
        for (inverse, onesided) in [(false, false), (false, true), (true, false)] {
            let m = dft_model(&x, axis, Some(len), inverse, onesided);
            check(m, &[rng.tensor(&x, -1.0, 1.0)], 0.0, fft_atol(len));
        }
    }
    // IRFFT with fewer and more bins than dft_length / 2 + 1.
    for (bins, n) in [(3, 10), (9, 10), (6, 11), (1, 1)] {
        let x = [2, bins, 2];
        let m = dft_model(&x, 1, Some(n), true, true);
        check(m, &[rng.tensor(&x, -1.0, 1.0)], 0.0, fft_atol(n));
    }
}

#[test]
fn dft_opset_17_attribute_axis() {
    let mut rng = Rng(17);
    let x = [2, 3, 9, 2];
    let m = ModelBuilder::new("dft17", 17)
        .input("x", DType::F32, &dims(&x))
        .output("y", DType::F32, &dims(&[1]))
        .node("dft", "DFT", &["x"], &["y"], vec![("axis", Attr::Int(2))])
        .build();
    check(m, &[rng.tensor(&x, -1.0, 1.0)], 0.0, fft_atol(9));
}

#[test]
fn dft_on_f64_and_f16_is_computed_in_f32() {
    let mut rng = Rng(64);
    for dt in [DType::F64, DType::F16] {
        let x = [2, 12, 1];
        let m = ModelBuilder::new("dft", 20)
            .input("x", dt, &dims(&x))
            .output("y", dt, &dims(&[1]))
            .node(
                "dft",
                "DFT",
                &["x"],
                &["y"],
                vec![("onesided", Attr::Int(1))],
            )
            .build();
        let g = import(&m);
        assert!(
            g.nodes().any(|(_, n)| n.op.name() == "Cast"),
            "{dt:?}: widened to f32"
        );
        let v = rng.tensor(&x, -1.0, 1.0).to_f64_vec();
        let tol = if dt == DType::F16 { 2e-2 } else { fft_atol(12) };
        check_graph(&g, &[Tensor::from_f64(dt, x.to_vec(), &v)], 1e-3, tol);
    }
}

/// An STFT node (opset 17): signal `x`, `frame_step`, an optional window (an initializer, or a
/// run-time input when `window_input`), `frame_length` when given.
fn stft_model(
    x: &[usize],
    step: usize,
    window: Option<(&Tensor, bool)>,
    len: Option<usize>,
    onesided: bool,
) -> ModelProto {
    let mut b = ModelBuilder::new("stft", 17)
        .input("x", DType::F32, &dims(x))
        .initializer("step", &Tensor::i64(vec![], &[step as i64]))
        .output("y", DType::F32, &dims(&[1]));
    let w = match window {
        Some((t, true)) => {
            b = b.input("w", DType::F32, &dims(t.shape()));
            "w"
        }
        Some((t, false)) => {
            b = b.initializer("w", t);
            "w"
        }
        None => "",
    };
    let l = match len {
        Some(l) => {
            b = b.initializer("len", &Tensor::i64(vec![], &[l as i64]));
            "len"
        }
        None => "",
    };
    b.node(
        "stft",
        "STFT",
        &["x", "step", w, l],
        &["y"],
        vec![("onesided", Attr::Int(i64::from(onesided)))],
    )
    .build()
}

#[test]
fn stft_windows_steps_and_signals() {
    let mut rng = Rng(0x57F7);
    for (x, n, step) in [
        (vec![2, 100, 1], 16, 8),
        (vec![1, 400, 1], 100, 37),
        (vec![3, 64, 2], 13, 5),
        (vec![2, 50], 50, 1),
        (vec![1, 1000, 1], 400, 160),
        (vec![1, 9, 1], 1, 1),
    ] {
        for onesided in [true, false] {
            let w = rng.tensor(&[n], 0.0, 1.0);
            // Run-time window, constant window, no window (frame_length given).
            for window in [Some((&w, true)), Some((&w, false)), None] {
                let len = if window.is_none() { Some(n) } else { None };
                let m = stft_model(&x, step, window, len, onesided);
                let mut inputs = vec![rng.tensor(&x, -1.0, 1.0)];
                if matches!(window, Some((_, true))) {
                    inputs.push(w.clone());
                }
                check(m, &inputs, 0.0, fft_atol(n));
            }
        }
    }
}

#[test]
fn plans_are_shared_and_runs_are_repeatable() {
    // Two nodes of one length: one plan; running twice gives the same bits.
    let mut rng = Rng(5);
    let x = [2, 30, 2];
    let m = ModelBuilder::new("dft2", 20)
        .input("x", DType::F32, &dims(&x))
        .output("z", DType::F32, &dims(&[1]))
        .node("f", "DFT", &["x"], &["y"], vec![])
        .node("i", "DFT", &["y"], &["z"], vec![("inverse", Attr::Int(1))])
        .build();
    let xv = rng.tensor(&x, -1.0, 1.0);
    let exe = check(m, std::slice::from_ref(&xv), 0.0, fft_atol(30));
    let (a, b) = (
        run(&exe, std::slice::from_ref(&xv)),
        run(&exe, std::slice::from_ref(&xv)),
    );
    assert_eq!(a[0].bytes(), b[0].bytes());
    // The round trip gives the signal back.
    for (p, q) in a[0].to_f32_vec().iter().zip(xv.to_f32_vec()) {
        assert!((p - q).abs() < 1e-5, "{p} vs {q}");
    }
}

#[test]
fn mel_weight_matrix_with_run_time_rate_and_edges() {
    for (out, rate_dt, edge_dt) in [
        (DType::F32, DType::I64, DType::F32),
        (DType::F64, DType::I32, DType::F64),
        (DType::U8, DType::I64, DType::F32),
        (DType::F16, DType::I32, DType::F16),
    ] {
        let m = ModelBuilder::new("mel", 17)
            .initializer("bins", &Tensor::i64(vec![], &[20]))
            .initializer("n", &Tensor::i64(vec![], &[512]))
            .input("sr", rate_dt, &[])
            .input("lo", edge_dt, &[])
            .input("hi", edge_dt, &[])
            .output("y", out, &dims(&[1]))
            .node(
                "mel",
                "MelWeightMatrix",
                &["bins", "n", "sr", "lo", "hi"],
                &["y"],
                vec![("output_datatype", Attr::Int(i64::from(out.to_onnx())))],
            )
            .build();
        let g = import(&m);
        for (sr, lo, hi) in [(16000.0, 20.0, 8000.0), (8000.0, 0.0, 3000.0)] {
            let inputs = [
                Tensor::from_f64(rate_dt, vec![], &[sr]),
                Tensor::from_f64(edge_dt, vec![], &[lo]),
                Tensor::from_f64(edge_dt, vec![], &[hi]),
            ];
            let exe = check_graph(&g, &inputs, 0.0, 1e-6);
            let y = run(&exe, &inputs).remove(0);
            assert_eq!(y.shape(), &[257, 20]);
            assert_eq!(y.dtype(), out);
        }
        // Edges the reference refuses: NaN for a float output, zeros for an integer one.
        let inputs = [
            Tensor::from_f64(rate_dt, vec![], &[1000.0]),
            Tensor::from_f64(edge_dt, vec![], &[0.0]),
            Tensor::from_f64(edge_dt, vec![], &[8000.0]),
        ];
        let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
        let exe = compile(&g, &plan).expect("compiles");
        let y = run(&exe, &inputs).remove(0).to_f64_vec();
        if out.is_float() {
            assert!(y.iter().all(|v| v.is_nan()));
        } else {
            assert!(y.iter().all(|&v| v == 0.0));
        }
    }
}
