use super::softmax_f32;

fn reference(row: &[f32], log: bool) -> Vec<f64> {
    let m = row
        .iter()
        .fold(f64::NEG_INFINITY, |m, &v| m.max(f64::from(v)));
    let s: f64 = row.iter().map(|&v| (f64::from(v) - m).exp()).sum();
    row.iter()
        .map(|&v| {
            let d = f64::from(v) - m;
            if log { d - s.ln() } else { d.exp() / s }
        })
        .collect()
}

#[test]
fn f32_softmax_rows_against_the_reference_in_place_and_apart() {
    let mut s = 12345u32;
    for (rows, len) in [(1usize, 1usize), (3, 7), (64, 64), (5, 1000)] {
        let x: Vec<f32> = (0..rows * len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s % 20001) as f32 / 1000.0 - 10.0
            })
            .collect();
        for log in [false, true] {
            let mut apart = vec![f32::NAN; x.len()];
            let mut inplace = x.clone();
            let p = inplace.as_mut_ptr();
            // SAFETY: `rows * len` floats each; apart, then in place.
            unsafe {
                softmax_f32(rows, len, log, x.as_ptr(), apart.as_mut_ptr());
                softmax_f32(rows, len, log, p, p);
            }
            for r in 0..rows {
                let want = reference(&x[r * len..(r + 1) * len], log);
                for (k, &w) in want.iter().enumerate() {
                    let a = apart[r * len + k];
                    assert!(
                        (f64::from(a) - w).abs() <= 2e-6 * w.abs().max(1e-3),
                        "{rows}x{len} log {log} row {r} [{k}]: {a}, reference {w}"
                    );
                    assert_eq!(a.to_bits(), inplace[r * len + k].to_bits());
                }
            }
        }
    }
}

/// The AVX-512 copy of the LayerNorm row gives the AVX2 copy's bits (the one that ran on
/// AVX-512 CPUs before): rows of odd lengths, with and without a bias.
#[cfg(target_arch = "x86_64")]
#[test]
fn layer_norm_row_avx512_matches_avx2_bit_for_bit() {
    use crate::gemm::stage16::convert::{Isa, isa};
    if isa() != Isa::Avx512 || !super::avx2() {
        eprintln!("no AVX-512 here: the copy does not run");
        return;
    }
    let mut s = 777u32;
    for len in [1usize, 7, 16, 37, 128, 1001] {
        let x: Vec<f32> = (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s % 20001) as f32 / 997.0 - 10.0
            })
            .collect();
        let scale: Vec<f32> = (0..len).map(|j| 0.5 + j as f32 / 300.0).collect();
        let bias: Vec<f32> = (0..len).map(|j| j as f32 / 50.0 - 1.0).collect();
        for b in [None, Some(&bias[..])] {
            let (mut a, mut w) = (x.clone(), x.clone());
            // SAFETY: the CPU has AVX2, FMA and AVX-512F (checked above).
            unsafe {
                super::layer_norm_row_avx2(&mut a, 1e-5, &scale, b);
                super::layer_norm_row_avx512(&mut w, 1e-5, &scale, b);
            }
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&a), bits(&w), "len {len} bias {}", b.is_some());
        }
    }
}
