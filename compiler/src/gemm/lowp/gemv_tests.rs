//! The few-row reduced-B kernels against an f64 product of the widened weights, with and
//! without accumulation, on column counts that end in a partial panel and K past one block,
//! and the same bits for a column block computed alone (how threads split the columns). The
//! bits against the core's f32 path on the widened weights: `tests.rs`
//! (`reduced_b_products_match_f32_of_the_same_values_on_every_kernel`, rows 1 and 2).

use super::super::{LowpB, WeightType, load1, lowp_b_bytes, pack_b_lowp};
use super::*;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// Element (i, j) of the packed reduced B, widened.
fn widened(t: WeightType, k: usize, n: usize, packed: &[u8], i: usize, j: usize) -> f64 {
    let e = (j / NR) * k * NR + i * NR + j % NR;
    // SAFETY: element e < packed_b_len(k, n) of the packed bytes.
    let q = unsafe { load1(t, packed.as_ptr(), e) };
    let s = if t == WeightType::I8 {
        let at = (crate::gemm::packed_b_len(k, n) * t.bytes()).next_multiple_of(64) + j * 4;
        f32::from_le_bytes(packed[at..at + 4].try_into().expect("4 bytes"))
    } else {
        1.0
    };
    f64::from(q * s)
}

#[test]
fn few_row_products_match_the_widened_weights() {
    let kernel = crate::gemm::selected_kernel();
    if !takes(&kernel, 1) {
        eprintln!("no AVX-512 / AVX2 kernel selected: nothing to check");
        return;
    }
    let mut rng = Rng(0x5eed);
    for t in [WeightType::F16, WeightType::Bf16, WeightType::I8] {
        for (m, k, n) in [
            (1, 37, 100),
            (2, 800, 80),
            (3, 5, 17),
            (4, 130, 64),
            (1, 9, 5),
        ] {
            let a: Vec<f32> = (0..m * k).map(|_| rng.next()).collect();
            let b: Vec<f32> = (0..k * n).map(|_| rng.next()).collect();
            let mut packed = vec![0u8; lowp_b_bytes(t, k, n)];
            pack_b_lowp(t, k, n, |i| b[i], n, 1, &mut packed, &mut |_| {});
            let view = crate::gemm::BView::packed_lowp(packed.as_ptr(), t, k, n);
            let lb: LowpB = view.lowp.expect("reduced");
            let c0: Vec<f32> = (0..m * n).map(|_| rng.next()).collect();
            for accumulate in [false, true] {
                let mut c = c0.clone();
                // SAFETY: the operands' sizes of `run`'s contract.
                unsafe {
                    run(
                        &kernel,
                        m,
                        n,
                        k,
                        a.as_ptr(),
                        k,
                        &lb,
                        c.as_mut_ptr(),
                        n,
                        accumulate,
                    )
                };
                for r in 0..m {
                    for j in 0..n {
                        let (mut want, mut mag) = (0.0f64, 0.0f64);
                        for i in 0..k {
                            let p = f64::from(a[r * k + i]) * widened(t, k, n, &packed, i, j);
                            want += p;
                            mag += p.abs();
                        }
                        if accumulate {
                            want += f64::from(c0[r * n + j]);
                            mag += f64::from(c0[r * n + j]).abs();
                        }
                        let got = f64::from(c[r * n + j]);
                        assert!(
                            (got - want).abs() <= 1e-6 * mag + 1e-30,
                            "{t:?} m={m} k={k} n={n} ({r},{j}): {got} vs {want}"
                        );
                    }
                }
                // The core's f32 path on the widened weights (packed): the same bits.
                let mut wide = vec![0.0f32; crate::gemm::packed_b_len(k, n)];
                for i in 0..k {
                    for j in 0..n {
                        wide[(j / NR) * k * NR + i * NR + j % NR] =
                            widened(t, k, n, &packed, i, j) as f32;
                    }
                }
                let mut cf = c0.clone();
                let mut scratch = vec![0.0f32; crate::gemm::A_SCRATCH_FLOATS];
                // SAFETY: the operands' sizes of the core's contract.
                unsafe {
                    crate::gemm::sgemm_core(
                        kernel,
                        m,
                        n,
                        k,
                        crate::gemm::AView::Rows(a.as_ptr(), k),
                        crate::gemm::BView::packed(wide.as_ptr(), k, n),
                        cf.as_mut_ptr(),
                        n,
                        accumulate,
                        scratch.as_mut_ptr(),
                    )
                };
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&c),
                    bits(&cf),
                    "{t:?} m={m} k={k} n={n} acc={accumulate}"
                );
                // Columns from panel 1 on, alone: the same bits.
                if n > NR {
                    let mut c2 = c0.clone();
                    let lb1 = lb.at_panel(1);
                    // SAFETY: as above, columns NR.. of the same operands.
                    unsafe {
                        run(
                            &kernel,
                            m,
                            n - NR,
                            k,
                            a.as_ptr(),
                            k,
                            &lb1,
                            c2.as_mut_ptr().add(NR),
                            n,
                            accumulate,
                        )
                    };
                    for r in 0..m {
                        for j in NR..n {
                            assert_eq!(c2[r * n + j].to_bits(), c[r * n + j].to_bits());
                        }
                    }
                }
            }
        }
    }
}
