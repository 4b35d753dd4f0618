//! The GEMM path's pointwise Convs on their 16-bit planes directly ([`pw_big_direct`]:
//! `crate::gemm::conv::act16`, no scratch) against the staged pixel runs ([`staged`]: widen,
//! the f32 kernel, narrow) and against the f32 kernel on the widened input, narrowed: bit for
//! bit, f16 and bf16 planes, f32 and reduced (f16, bf16, int8) weights, fused activations,
//! pixel counts no multiple of 16 and past one tile, output channels past one block and no
//! multiple of the micro-kernel's rows, K past one K block (balanced blocks) and past the
//! stack buffer (widened per K block), two and three
//! images, on one thread and spread over an eager 2-thread pool; inputs with infinities, NaN
//! and values past f16's range. Run with `ARENAC_GEMM_KERNEL=avx2` for the AVX2 kernel.

use super::pw_direct_tests::{aligned, direct, geom, staged_at, values};
use super::{budgets, pw_big_direct, scratch_bytes, weights_params};
use crate::gemm::conv::{Activation, ConvParams, arenac_conv2d, prepare_weights, prepared_len};
use crate::gemm::lowp::{WeightType, conv_lowp_bytes, mark_conv, pack_conv_lowp};
use crate::gemm::stage16::{N16, narrow, widen};
use crate::par::{Pool, with_pool};

#[test]
fn gemm_pointwise_direct_matches_the_staged_runs_and_the_f32_kernel() {
    let cases = [
        // 81 pixels (5 panels, the last of 1), M below the micro-kernel's rows.
        geom(1, 17, (9, 9), 5),
        // Two M blocks (96 + 4), 169 pixels, two images.
        geom(2, 64, (13, 13), 100),
        // Two balanced K blocks (2 x 256), M = 130 (96 + 34).
        geom(1, 512, (13, 13), 130),
        // Three K blocks (3 x 267), pixels past one tile (300: 256 + 44).
        geom(1, 801, (15, 20), 24),
        // Fewer pixels than channels: the channel blocks split over the threads.
        geom(1, 200, (9, 11), 300),
        // Three images of 323 pixels.
        geom(3, 40, (17, 19), 13),
        // A 56x56 plane: 13 tiles.
        geom(1, 24, (56, 56), 40),
        // K past the stack buffer's whole tile (1600 x 32 floats): each K block widened per
        // block of channels.
        geom(1, 1600, (10, 11), 100),
    ];
    let acts = [
        Activation::None,
        Activation::Relu,
        Activation::Clip(0.0, 6.0),
        Activation::Silu,
        Activation::HardSwish,
        Activation::Sigmoid,
    ];
    let wtypes = [
        None,
        Some(WeightType::F16),
        Some(WeightType::Bf16),
        Some(WeightType::I8),
    ];
    let pool = Pool::new(2).expect("threads");
    pool.set_eager(true);
    let (mut ran, mut jobs) = (0, 0);
    for (ci, &base) in cases.iter().enumerate() {
        if !pw_big_direct(&base) {
            continue;
        }
        ran += 1;
        assert_eq!(scratch_bytes(&base), 0, "{base:?}");
        let budget = *budgets(&base).last().expect("a budget");
        let wp = weights_params(&base, budget);
        assert_eq!(wp.packed_a, 1, "{base:?}: not the GEMM path's layout");
        let (c, m, px) = (base.c as usize, base.m as usize, (base.h * base.w) as usize);
        let wt = values(m * c, ci);
        let bias: Vec<f32> = (0..m).map(|j| j as f32 / 8.0 - 2.0).collect();
        let mut packed = vec![0f32; prepared_len(&wp)];
        prepare_weights(&mut wp.clone(), &wt, &mut packed);
        let mut x32 = values(base.n as usize * c * px, ci + 5);
        for (i, v) in [f32::INFINITY, f32::NAN, -1e6, 7e4, f32::NEG_INFINITY]
            .into_iter()
            .enumerate()
        {
            let at = (i * 997 + 5) % x32.len();
            x32[at] = v;
        }
        for (ai, &act) in acts.iter().enumerate() {
            let wtype = wtypes[(ai + ci) % wtypes.len()];
            let mut p = ConvParams {
                packed_a: wp.packed_a,
                ..base
            };
            [p.act, p.act_a, p.act_b] = act.encode();
            // The weights as the path reads them: f32 packed for the core, or packed reduced
            // in the core's layout (the marking the lowering gives them).
            let red = wtype.map(|wt_| {
                assert!(mark_conv(&mut p, wt_));
                let bytes = conv_lowp_bytes(&p, wt_);
                let (mut v, off) = aligned(bytes);
                // SAFETY: u64 words viewed as their bytes.
                let out = unsafe {
                    std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), v.len() * 8)
                };
                pack_conv_lowp(
                    &p,
                    wt_,
                    |i| wt[i],
                    &mut out[off * 8..off * 8 + bytes],
                    &mut |_| {},
                );
                (v, off)
            });
            assert!(pw_big_direct(&p), "{p:?}");
            let w = match &red {
                Some((v, off)) => v[*off..].as_ptr().cast::<f32>(),
                None => packed.as_ptr(),
            };
            for t in [N16::F16, N16::Bf16] {
                let mut x = vec![0u16; x32.len()];
                narrow(t, &x32, &mut x);
                // The f32 kernel on the widened input, narrowed.
                let want = {
                    let mut xw = vec![0f32; x.len()];
                    widen(t, &x, &mut xw);
                    let mut y32 = vec![0f32; base.n as usize * m * px];
                    let q = ConvParams { tile: 0, ..p };
                    let (mut s, off) = aligned(crate::gemm::conv::conv2d_scratch_bytes(&q));
                    // SAFETY: operands of the sizes the contract asks, the scratch as
                    // `conv2d_scratch_bytes` sizes it.
                    unsafe {
                        arenac_conv2d(
                            &q,
                            xw.as_ptr(),
                            w,
                            bias.as_ptr(),
                            y32.as_mut_ptr(),
                            s.as_mut_ptr().add(off).cast(),
                        )
                    };
                    let mut want = vec![0u16; y32.len()];
                    narrow(t, &y32, &mut want);
                    want
                };
                let runs = staged_at(t, &p, budget, &x, w, &bias);
                assert!(runs == want, "{t:?} {p:?}: staged runs vs f32");
                for threads in [1u64, 2] {
                    let q = ConvParams { threads, ..p };
                    let before = pool.jobs();
                    let y = if threads == 2 {
                        with_pool(Some(&pool), || direct(t, &q, &x, w, &bias))
                    } else {
                        direct(t, &q, &x, w, &bias)
                    };
                    jobs += pool.jobs() - before;
                    let bad = y.iter().zip(&runs).position(|(a, b)| a != b);
                    assert!(
                        bad.is_none(),
                        "{t:?} {act:?} {wtype:?} {threads} threads {q:?}: first difference at \
                         {bad:?}"
                    );
                }
            }
        }
    }
    assert_eq!(ran, cases.len(), "the direct path did not run");
    assert!(jobs > 0, "no case spread over the pool");
}
