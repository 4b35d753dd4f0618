//! The activations against f64 formulas, per variant, and the same bits wherever an element
//! sits in a row (tails included).

use super::{Activation, bias_act_portable, reference};

const ACTS: [Activation; 9] = [
    Activation::None,
    Activation::Relu,
    Activation::Clip(-0.5, 2.0),
    Activation::LeakyRelu(0.1),
    Activation::Sigmoid,
    Activation::Silu,
    Activation::Tanh,
    Activation::HardSigmoid(0.2, 0.5),
    Activation::HardSwish,
];

type RowFn = fn(&mut [f32], f32, Activation);

fn variants() -> Vec<(&'static str, RowFn)> {
    let mut v: Vec<(&'static str, RowFn)> = vec![("portable", bias_act_portable)];
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            // SAFETY: AVX2 and FMA detected.
            v.push(("avx2", |r, b, a| unsafe {
                super::x86::bias_act_avx2(r, b, a)
            }));
            if is_x86_feature_detected!("avx512f") {
                // SAFETY: AVX-512F, AVX2 and FMA detected.
                v.push(("avx512", |r, b, a| unsafe {
                    super::x86::bias_act_avx512(r, b, a)
                }));
            }
        }
    }
    v
}

/// Inputs over the whole range: small, around the branch points, large, huge, signed zeros.
fn inputs() -> Vec<f32> {
    let mut xs: Vec<f32> = (-2000..=2000).map(|i| i as f32 * 0.01).collect();
    xs.extend((-200..=200).map(|i| i as f32 * 0.5));
    xs.extend([
        0.0, -0.0, 0.624, 0.625, -0.626, 3.0, -3.0, 87.0, -87.0, 88.7, -88.7, 89.0, -89.0, 1e10,
        -1e10, 1e-30, -1e-30,
    ]);
    xs
}

#[test]
fn every_variant_matches_the_f64_formula() {
    let xs = inputs();
    for (name, f) in variants() {
        for act in ACTS {
            let bias = 0.25f32;
            let mut got = xs.clone();
            f(&mut got, bias, act);
            for (&x, &g) in xs.iter().zip(&got) {
                let want = reference(act, f64::from(x + bias));
                let tol = 1e-6 + 4e-7 * want.abs();
                assert!(
                    (f64::from(g) - want).abs() <= tol,
                    "{name} {act:?}({x} + {bias}): got {g}, want {want}"
                );
            }
        }
    }
}

#[test]
fn nan_stays_nan_where_the_formula_keeps_it() {
    for (name, f) in variants() {
        for act in [
            Activation::Sigmoid,
            Activation::Silu,
            Activation::Tanh,
            Activation::HardSigmoid(0.2, 0.5),
            Activation::HardSwish,
        ] {
            let mut v = vec![f32::NAN; 19];
            f(&mut v, 0.0, act);
            assert!(v.iter().all(|x| x.is_nan()), "{name} {act:?}: {v:?}");
        }
    }
}

#[test]
fn an_element_gets_the_same_bits_wherever_the_row_is_cut() {
    let xs: Vec<f32> = (0..77).map(|i| (i as f32 * 0.37).sin() * 9.0).collect();
    for (name, f) in variants() {
        for act in ACTS {
            let mut whole = xs.clone();
            f(&mut whole, 0.5, act);
            for cut in [1, 3, 8, 13, 16, 31, 40] {
                let mut parts = xs.clone();
                let (a, b) = parts.split_at_mut(cut);
                f(a, 0.5, act);
                f(b, 0.5, act);
                let same = whole
                    .iter()
                    .zip(&parts)
                    .all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(same, "{name} {act:?} cut at {cut}");
            }
        }
    }
}
