//! Pointwise Convs on their 16-bit planes directly ([`pw_direct`]: the small-plane kernel's
//! 16-bit tiles, no scratch) against the staged pixel runs ([`staged`]: widen, the f32
//! kernel, narrow) and against the f32 kernel on the widened input, narrowed: bit for bit,
//! f16 and bf16 planes, f32 and reduced (f16, bf16, int8) weights, fused activations, odd
//! pixel and channel counts (tiles of 1..12 pixels, channels not a multiple of 16), two and
//! three images, squeeze-excitation 1x1 planes and 14x14-class planes with K >= 256, K past
//! the stack buffer, on one thread and spread over an eager 2-thread pool (runs of tiles over
//! every block, or per-block tasks); inputs with infinities, NaN and values past f16's range.

use super::{budgets, conv, pw_direct, scratch_bytes, staged, staged_bytes_at, weights_params};
use crate::gemm::conv::{Activation, ConvParams, arenac_conv2d, prepare_weights, prepared_len};
use crate::gemm::lowp::WeightType;
use crate::gemm::lowp::conv::{Layout, pack, region_bytes};
use crate::gemm::stage16::{N16, narrow, widen};
use crate::par::{Pool, with_pool};

/// A pointwise geometry: `n` images, `c` -> `m` channels on `h x w` planes, with a bias.
pub(super) fn geom(n: u64, c: u64, (h, w): (u64, u64), m: u64) -> ConvParams {
    ConvParams {
        n,
        c,
        h,
        w,
        m,
        group: 1,
        kh: 1,
        kw: 1,
        stride_h: 1,
        stride_w: 1,
        dil_h: 1,
        dil_w: 1,
        oh: h,
        ow: w,
        has_bias: 1,
        threads: 1,
        ..ConvParams::default()
    }
}

/// A 64-aligned buffer of at least `bytes` bytes (as u64 words) and its first aligned word.
pub(super) fn aligned(bytes: usize) -> (Vec<u64>, usize) {
    let v = vec![0u64; bytes.div_ceil(8) + 8];
    let off = v.as_ptr().align_offset(64);
    (v, off)
}

/// Deterministic values in about [-1, 1).
pub(super) fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|j| (((j * 37 + seed * 11) % 113) as f32 - 56.0) / 57.0)
        .collect()
}

/// [`conv`] (the direct path: no scratch) of `p` on `x` with weights at `w` (also used by
/// `pw_big_tests`, with the helpers above and [`staged_at`]).
pub(super) fn direct(t: N16, p: &ConvParams, x: &[u16], w: *const f32, bias: &[f32]) -> Vec<u16> {
    let mut y = vec![0u16; (p.n * p.m * p.oh * p.ow) as usize];
    // SAFETY: operands of the sizes the contract asks, the weights prepared for `p` by the
    // caller; `pw_direct` or `pw_big_direct` holds, so no scratch is read or written.
    unsafe {
        conv(
            t,
            p,
            0,
            x.as_ptr(),
            w,
            bias.as_ptr(),
            y.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    y
}

/// [`staged`] pixel runs of `p` at `budget` on `x` with weights at `w`.
pub(super) fn staged_at(
    t: N16,
    p: &ConvParams,
    budget: u64,
    x: &[u16],
    w: *const f32,
    bias: &[f32],
) -> Vec<u16> {
    let mut y = vec![0u16; (p.n * p.m * p.oh * p.ow) as usize];
    let (mut s, off) = aligned(staged_bytes_at(p, budget));
    // SAFETY: as [`direct`]; the scratch as `staged_bytes_at` asks, 64-aligned.
    unsafe {
        staged(
            t,
            p,
            budget,
            x.as_ptr(),
            w,
            bias.as_ptr(),
            y.as_mut_ptr(),
            s.as_mut_ptr().add(off).cast(),
        )
    };
    y
}

#[test]
fn pointwise_direct_matches_the_staged_runs_and_the_f32_kernel() {
    let cases = [
        geom(2, 40, (7, 7), 50),
        geom(1, 96, (1, 1), 20),
        geom(2, 17, (5, 3), 33),
        geom(1, 256, (14, 14), 24),
        geom(1, 300, (13, 15), 40),
        geom(3, 24, (3, 7), 16),
        geom(1, 160, (7, 7), 96),
        geom(1, 64, (8, 8), 36),
        // K past the stack buffer, and a 1x1 plane over two threads: per-block tasks, K
        // widened in chunks.
        geom(1, 1100, (7, 7), 40),
        geom(1, 1280, (1, 1), 600),
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
        if !pw_direct(&base) {
            continue;
        }
        ran += 1;
        assert_eq!(scratch_bytes(&base), 0, "{base:?}");
        let budget = *budgets(&base).last().expect("a budget");
        let wp = weights_params(&base, budget);
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
            // The weights as the path reads them: f32 panels, or the reduced panels.
            let red = wtype.map(|wt_| {
                p.wtype = wt_.code();
                let bytes = region_bytes(&p, wt_, Layout::PwSmall);
                let (mut v, off) = aligned(bytes);
                // SAFETY: u64 words viewed as their bytes.
                let out = unsafe {
                    std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), v.len() * 8)
                };
                pack(
                    &p,
                    wt_,
                    Layout::PwSmall,
                    |i| wt[i],
                    &mut out[off * 8..off * 8 + bytes],
                    &mut |_| {},
                );
                (v, off)
            });
            let w = match &red {
                Some((v, off)) => v[*off..].as_ptr().cast::<f32>(),
                None => packed.as_ptr(),
            };
            for t in [N16::F16, N16::Bf16] {
                let mut x = vec![0u16; x32.len()];
                narrow(t, &x32, &mut x);
                // The f32 kernel on the widened input, narrowed (f32 weights only: the
                // reduced ones are compared with the staged runs on the same panels).
                let want = red.is_none().then(|| {
                    let mut xw = vec![0f32; x.len()];
                    widen(t, &x, &mut xw);
                    let mut y32 = vec![0f32; base.n as usize * m * px];
                    // SAFETY: operands of the sizes the contract asks; the small-plane
                    // kernel reads no scratch.
                    unsafe {
                        arenac_conv2d(
                            &p,
                            xw.as_ptr(),
                            w,
                            bias.as_ptr(),
                            y32.as_mut_ptr(),
                            std::ptr::null_mut(),
                        )
                    };
                    let mut want = vec![0u16; y32.len()];
                    narrow(t, &y32, &mut want);
                    want
                });
                let runs = staged_at(t, &p, budget, &x, w, &bias);
                if let Some(want) = &want {
                    assert!(&runs == want, "{t:?} {p:?}: staged runs vs f32");
                }
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
    #[cfg(target_arch = "x86_64")]
    if crate::gemm::selected_kernel().name.starts_with("avx512")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vl")
    {
        assert_eq!(ran, cases.len(), "the direct path did not run");
        assert!(jobs > 0, "no case spread over the pool");
    }
}
