//! Convs the direct row kernel runs on their 16-bit planes ([`row_direct`]:
//! `crate::gemm::direct::act16`, no staging) against the f32 row kernel on the widened input,
//! narrowed, and against the staged bands ([`staged`] at the smallest and largest budget:
//! widen, the f32 kernel, narrow): bit for bit, f16 and bf16, 3x3 at strides 1 and 2 (first
//! layers' 2-4 channels), 5x5, dilation 2, odd and
//! non-square planes, pads 0-2, channel counts off the 12-row panels, two images, fused
//! activations, one thread and an eager 2-thread pool; inputs with infinities, NaN and values
//! past f16's range.

use super::{
    band_weights_params, budgets, conv, row_direct, row_params, staged, staged_bytes_at,
    weights_params,
};
use crate::gemm::conv::{Activation, ConvParams, arenac_conv2d, prepare_weights, prepared_len};
use crate::gemm::stage16::{N16, narrow, widen};
use crate::par::{Pool, with_pool};

/// `n` images, `c` -> `m` channels, `h x w` planes, a `k x k` kernel at stride `s`, pad
/// `pad` on every side, dilation `d`, with a bias.
#[allow(clippy::too_many_arguments)]
fn geom(
    n: u64,
    c: u64,
    (h, w): (u64, u64),
    m: u64,
    k: u64,
    s: u64,
    pad: u64,
    d: u64,
) -> ConvParams {
    let out = |x: u64| (x + 2 * pad - (k - 1) * d - 1) / s + 1;
    ConvParams {
        n,
        c,
        h,
        w,
        m,
        group: 1,
        kh: k,
        kw: k,
        stride_h: s,
        stride_w: s,
        pad_t: pad,
        pad_l: pad,
        dil_h: d,
        dil_w: d,
        oh: out(h),
        ow: out(w),
        has_bias: 1,
        packed_a: 1,
        threads: 1,
        ..ConvParams::default()
    }
}

/// Deterministic values in about [-1, 1).
fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|j| (((j * 37 + seed * 11) % 113) as f32 - 56.0) / 57.0)
        .collect()
}

/// The OIHW weights of `p` prepared for `wp` (its packing).
fn prepared(wp: &ConvParams, wt: &[f32]) -> Vec<f32> {
    let mut out = vec![0f32; prepared_len(wp)];
    prepare_weights(&mut wp.clone(), wt, &mut out);
    out
}

/// [`conv`] of `p` (weights prepared for it) with a scratch of `bytes`, 64-aligned.
#[allow(clippy::too_many_arguments)]
fn run(
    t: N16,
    p: &ConvParams,
    budget: u64,
    x: &[u16],
    w: &[f32],
    bias: &[f32],
    bytes: usize,
    bands: bool,
) -> Vec<u16> {
    let mut y = vec![0u16; (p.n * p.m * p.oh * p.ow) as usize];
    let mut s = vec![0f32; bytes / 4 + 16];
    let off = s.as_ptr().align_offset(64);
    // SAFETY: operands of the sizes the contract asks, the weights prepared for `p` (the
    // bands': for `band_weights_params`), the scratch as `staged_bytes_at` asks, 64-aligned.
    unsafe {
        let args = (x.as_ptr(), w.as_ptr(), bias.as_ptr(), y.as_mut_ptr());
        let sp = s.as_mut_ptr().add(off);
        if bands {
            staged(t, p, budget, args.0, args.1, args.2, args.3, sp);
        } else {
            conv(t, p, budget, args.0, args.1, args.2, args.3, sp);
        }
    }
    y
}

#[test]
fn row_direct_matches_the_f32_kernel_and_the_staged_bands() {
    // Many input channels stay staged (`crate::gemm::direct::act16::MAX_C`): U-Net's class,
    // a plane of 1024k pixels whose bands of a few rows take the channels-in-lanes kernel.
    assert!(row_params(&geom(1, 64, (32, 32), 64, 3, 1, 1, 1)).is_none());
    let cases = [
        // First layers at stride 2 (3 channels), odd planes, pads 1 and 0.
        geom(1, 3, (45, 45), 64, 3, 2, 1, 1),
        geom(2, 3, (47, 33), 16, 3, 2, 0, 1),
        // Stride 1: a plane of 1024 pixels, valid convs (not "same": the flat kernel's),
        // 5x5, dilation 2, pad 2, odd sizes, channels off the 12-row panels.
        geom(1, 4, (32, 32), 20, 3, 1, 1, 1),
        geom(1, 3, (17, 33), 13, 3, 1, 0, 1),
        geom(1, 4, (30, 31), 28, 5, 1, 1, 1),
        geom(2, 2, (20, 40), 12, 3, 1, 1, 2),
        geom(1, 4, (19, 50), 30, 3, 1, 2, 1),
    ];
    let acts = [
        Activation::Relu,
        Activation::None,
        Activation::Clip(0.0, 6.0),
        Activation::Silu,
    ];
    let pool = Pool::new(2).expect("threads");
    pool.set_eager(true);
    let (mut ran, mut jobs) = (0, 0);
    for (ci, &base) in cases.iter().enumerate() {
        let Some(rp) = row_params(&base) else {
            continue;
        };
        ran += 1;
        let (c, m) = (base.c as usize, base.m as usize);
        let k = (base.kh * base.kw) as usize;
        let wt = values(m * c * k, ci);
        let bias: Vec<f32> = (0..m).map(|j| j as f32 / 8.0 - 2.0).collect();
        let budget = *budgets(&base).last().expect("a budget");
        let wp = weights_params(&base, budget);
        assert_eq!(wp.packed_a, rp.packed_a, "{base:?}");
        let w = prepared(&wp, &wt);
        let bw = band_weights_params(&base, budget);
        let wb = prepared(&bw, &wt);
        let mut x32 = values(base.n as usize * c * (base.h * base.w) as usize, ci + 5);
        for (i, v) in [f32::INFINITY, f32::NAN, -1e6, 7e4, f32::NEG_INFINITY]
            .into_iter()
            .enumerate()
        {
            let at = (i * 997 + 5) % x32.len();
            x32[at] = v;
        }
        for &act in &acts {
            let mut p = ConvParams {
                packed_a: rp.packed_a,
                ..base
            };
            [p.act, p.act_a, p.act_b] = act.encode();
            assert!(row_direct(&p), "{p:?}");
            for t in [N16::F16, N16::Bf16] {
                let mut x = vec![0u16; x32.len()];
                narrow(t, &x32, &mut x);
                let mut xw = vec![0f32; x.len()];
                widen(t, &x, &mut xw);
                let mut y32 = vec![0f32; (p.n * p.m * p.oh * p.ow) as usize];
                // SAFETY: operands of the sizes the contract asks; the direct kernels read
                // no scratch.
                unsafe {
                    arenac_conv2d(
                        &p,
                        xw.as_ptr(),
                        w.as_ptr(),
                        bias.as_ptr(),
                        y32.as_mut_ptr(),
                        std::ptr::null_mut(),
                    )
                };
                let mut want = vec![0u16; y32.len()];
                narrow(t, &y32, &mut want);
                // The staged bands at the smallest and the largest budget (their own
                // packing).
                let q = ConvParams {
                    packed_a: bw.packed_a,
                    ..p
                };
                for b in [budget, budgets(&base)[0]] {
                    let bytes = staged_bytes_at(&q, b);
                    let bands = run(t, &q, b, &x, &wb, &bias, bytes, true);
                    assert!(bands == want, "{t:?} {act:?} {q:?} at {b}: bands vs f32");
                }
                for threads in [1u64, 2] {
                    let q = ConvParams { threads, ..p };
                    let before = pool.jobs();
                    let y = if threads == 2 {
                        with_pool(Some(&pool), || run(t, &q, budget, &x, &w, &bias, 0, false))
                    } else {
                        run(t, &q, budget, &x, &w, &bias, 0, false)
                    };
                    jobs += pool.jobs() - before;
                    let bad = y.iter().zip(&want).position(|(a, b)| a != b);
                    assert!(
                        bad.is_none(),
                        "{t:?} {act:?} {threads} threads {q:?}: first difference at {bad:?}"
                    );
                }
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    if crate::gemm::selected_kernel().name.starts_with("avx512")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && std::env::var("ARENAC_DIR16_DIRECT").map_or(true, |v| v != "0")
    {
        assert_eq!(ran, cases.len(), "the direct path did not run");
        assert!(jobs > 0, "no case spread over the pool");
    }
}
