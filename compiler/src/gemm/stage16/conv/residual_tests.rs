//! A fused residual on 16-bit Convs ([`super::residual`], `ConvParams::accumulate`): the
//! output holding the residual on entry, each path against the f32 kernel with `accumulate`
//! on the widened input and residual, narrowed, bit for bit: the unstaged small-plane and
//! GEMM-path pointwise kernels ([`pw_direct`], [`pw_big_direct`]) and the staged pixel runs
//! of the same geometries, staged row bands (3x3 im2col and direct bands, a 1x1 stride-2
//! downsample) at the smallest and a larger budget; f16 and bf16, with and without a fused
//! activation, f32 and reduced weights on the pointwise kernels, on one thread and spread
//! over an eager 2-thread pool; residuals with infinities, NaN and values past f16's range.

use super::pw_direct_tests::{aligned, geom, values};
use super::{budgets, conv, pw_big_direct, pw_direct, staged, staged_bytes_at, weights_params};
use crate::gemm::conv::{Activation, ConvParams, arenac_conv2d, prepare_weights, prepared_len};
use crate::gemm::lowp::WeightType;
use crate::gemm::lowp::conv::{Layout, pack, region_bytes};
use crate::gemm::stage16::{N16, narrow, widen};
use crate::par::{Pool, with_pool};

/// `p` on `x` with weights at `w`, `y` holding `r` on entry: [`conv`] (every path; the
/// scratch as the smallest budget's staged bands need, unused by the unstaged kernels), or
/// [`staged`] at `budget` when `force_staged`.
fn run(
    t: N16,
    p: &ConvParams,
    budget: u64,
    (x, w, bias, r): (&[u16], *const f32, &[f32], &[u16]),
    force_staged: bool,
) -> Vec<u16> {
    let mut y = r.to_vec();
    let (mut s, off) = aligned(staged_bytes_at(p, budget));
    let s = s.as_mut_ptr().wrapping_add(off).cast::<f32>();
    // SAFETY: operands of the sizes the contract asks, the weights prepared for `p` at
    // `budget` by the caller, the scratch as `staged_bytes_at` sizes it, 64-aligned.
    unsafe {
        if force_staged {
            staged(
                t,
                p,
                budget,
                x.as_ptr(),
                w,
                bias.as_ptr(),
                y.as_mut_ptr(),
                s,
            )
        } else {
            conv(
                t,
                p,
                budget,
                x.as_ptr(),
                w,
                bias.as_ptr(),
                y.as_mut_ptr(),
                s,
            )
        }
    };
    y
}

/// The f32 kernel with `accumulate` on the widened `x` and `r`, narrowed.
fn want(t: N16, p: &ConvParams, (x, w, bias, r): (&[u16], *const f32, &[f32], &[u16])) -> Vec<u16> {
    let mut xw = vec![0f32; x.len()];
    widen(t, x, &mut xw);
    let mut y32 = vec![0f32; r.len()];
    widen(t, r, &mut y32);
    let q = ConvParams { tile: 0, ..*p };
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
    let mut out = vec![0u16; y32.len()];
    narrow(t, &y32, &mut out);
    out
}

/// A 3x3 "same" or 1x1 stride-`s` geometry on `h x w` planes.
fn spatial(c: u64, m: u64, (h, w): (u64, u64), k: u64, s: u64) -> ConvParams {
    let pad = k / 2;
    let o = |d: u64| (d + 2 * pad - k) / s + 1;
    ConvParams {
        kh: k,
        kw: k,
        stride_h: s,
        stride_w: s,
        pad_t: pad,
        pad_l: pad,
        oh: o(h),
        ow: o(w),
        ..geom(1, c, (h, w), m)
    }
}

#[test]
fn fused_residual_on_16_bit_paths_matches_the_f32_kernel() {
    let cases = [
        // Small-plane pointwise (7x7, 1x1, 14x14 with K >= 256, K past the stack buffer).
        geom(2, 64, (7, 7), 50),
        geom(1, 96, (1, 1), 40),
        geom(1, 256, (14, 14), 24),
        geom(1, 1100, (7, 7), 40),
        // GEMM-path pointwise (two M blocks, two K blocks, two tiles).
        geom(1, 64, (13, 13), 100),
        geom(1, 512, (13, 13), 130),
        geom(2, 24, (17, 19), 13),
        // Staged row bands: 3x3 (im2col on a small plane, direct on wide rows), a 1x1
        // stride-2 downsample.
        spatial(5, 7, (9, 7), 3, 1),
        spatial(16, 24, (20, 70), 3, 1),
        spatial(64, 128, (28, 28), 1, 2),
    ];
    let pool = Pool::new(2).expect("threads");
    pool.set_eager(true);
    let (mut unstaged, mut jobs) = (0, 0);
    for (ci, &base) in cases.iter().enumerate() {
        let base = ConvParams {
            accumulate: 1,
            ..base
        };
        let pointwise = pw_direct(&base) || pw_big_direct(&base);
        unstaged += usize::from(pointwise);
        let all = budgets(&base);
        // The smallest budget (several bands), and the largest (one band) for row bands.
        let mut picks = vec![*all.last().expect("a budget")];
        if !pointwise {
            picks.push(all[0]);
        }
        let (c, m) = (base.c as usize, base.m as usize);
        let kk = (base.kh * base.kw) as usize;
        let xn = (base.n * base.c * base.h * base.w) as usize;
        let yn = (base.n * base.m * base.oh * base.ow) as usize;
        let wt = values(m * c * kk, ci);
        let bias: Vec<f32> = (0..m).map(|j| j as f32 / 8.0 - 2.0).collect();
        let x32 = values(xn, ci + 5);
        let mut r32: Vec<f32> = values(yn, ci + 9).iter().map(|v| 3.0 * v).collect();
        for (i, v) in [f32::INFINITY, f32::NAN, -1e6, 7e4, f32::NEG_INFINITY]
            .into_iter()
            .enumerate()
        {
            let at = (i * 997 + 5) % r32.len();
            r32[at] = v;
        }
        for (ai, act) in [Activation::None, Activation::Relu].into_iter().enumerate() {
            for &budget in &picks {
                let wp = weights_params(&base, budget);
                let mut p = ConvParams {
                    packed_a: wp.packed_a,
                    ..base
                };
                [p.act, p.act_a, p.act_b] = act.encode();
                let mut packed = vec![0f32; prepared_len(&wp)];
                prepare_weights(&mut wp.clone(), &wt, &mut packed);
                // Reduced weights on the small-plane kernel every other case (its own layout).
                let red = (pw_direct(&p) && (ai + ci) % 2 == 1).then(|| {
                    let q = ConvParams {
                        wtype: WeightType::F16.code(),
                        ..p
                    };
                    let bytes = region_bytes(&q, WeightType::F16, Layout::PwSmall);
                    let (mut v, off) = aligned(bytes);
                    // SAFETY: u64 words viewed as their bytes.
                    let out = unsafe {
                        std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), v.len() * 8)
                    };
                    pack(
                        &q,
                        WeightType::F16,
                        Layout::PwSmall,
                        |i| wt[i],
                        &mut out[off * 8..off * 8 + bytes],
                        &mut |_| {},
                    );
                    (v, off, q)
                });
                let (w, p) = match &red {
                    Some((v, off, q)) => (v[*off..].as_ptr().cast::<f32>(), *q),
                    None => (packed.as_ptr(), p),
                };
                for t in [N16::F16, N16::Bf16] {
                    let (mut x, mut r) = (vec![0u16; xn], vec![0u16; yn]);
                    narrow(t, &x32, &mut x);
                    narrow(t, &r32, &mut r);
                    let ops = (&x[..], w, &bias[..], &r[..]);
                    let what = format!("{t:?} {act:?} budget {budget} {p:?}");
                    // The f32 kernel (f32 weights), else the staged runs on the same reduced
                    // panels (which match the f32 kernel on f32 weights).
                    let want = if red.is_none() {
                        let want = want(t, &p, ops);
                        if pointwise {
                            let runs = run(t, &p, budget, ops, true);
                            assert!(runs == want, "{what}: staged runs vs f32");
                        }
                        want
                    } else {
                        run(t, &p, budget, ops, true)
                    };
                    for threads in [1u64, 2] {
                        let q = ConvParams { threads, ..p };
                        let before = pool.jobs();
                        let y = if threads == 2 {
                            with_pool(Some(&pool), || run(t, &q, budget, ops, false))
                        } else {
                            run(t, &q, budget, ops, false)
                        };
                        jobs += pool.jobs() - before;
                        let bad = y.iter().zip(&want).position(|(a, b)| a != b);
                        assert!(
                            bad.is_none(),
                            "{what} {threads} threads: first difference at {bad:?}"
                        );
                    }
                }
            }
        }
    }
    // The GEMM-path kernel runs on every CPU; the small-plane one on AVX-512BW/VL.
    assert!(unstaged >= 3, "the unstaged kernels did not run");
    #[cfg(target_arch = "x86_64")]
    if crate::gemm::selected_kernel().name.starts_with("avx512")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vl")
    {
        assert!(unstaged >= 7, "the small-plane kernel did not run");
    }
    assert!(jobs > 0, "no case spread over the pool");
}
