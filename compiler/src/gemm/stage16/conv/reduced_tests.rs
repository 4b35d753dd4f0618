//! Staged Convs with reduced weights (`--weights f16|bf16|int8` with `--activations`)
//! against the same staged Conv with f32 weights holding the widened values: the Winograd
//! bands (per-run transform reading the reduced OIHW weights, in passes of output channels
//! where the budget holds fewer matrices) and the direct kernels' bands (reading the reduced
//! direct layout) run the same f32 kernels on the same f32 values, so the outputs are equal
//! bit for bit at every budget either runs: odd sizes, pads, a short last band, two images.

use super::{band_rows, weights_params};
use super::{bands, budgets, conv, reduced_direct, scratch_bytes_at, wino_bands};
use crate::gemm::conv::{Activation, ConvParams, prepare_weights, prepared_len};
use crate::gemm::lowp::WeightType;
use crate::gemm::lowp::conv::{Layout, Reduced, pack, region_bytes};
use crate::gemm::stage16::{N16, narrow};
use crate::gemm::winograd::WINOGRAD_PACKED;

const REDUCED: [WeightType; 3] = [WeightType::F16, WeightType::Bf16, WeightType::I8];

/// A 64-aligned buffer of at least `bytes` bytes (as u64 words) and its first aligned word.
fn aligned(bytes: usize) -> (Vec<u64>, usize) {
    let v = vec![0u64; bytes.div_ceil(8) + 8];
    let off = v.as_ptr().align_offset(64);
    (v, off)
}

/// `p` (one group) with `kk x kk` kernel, stride `s`, pads (top, left, bottom, right).
fn geom(
    n: u64,
    c: u64,
    (h, w): (u64, u64),
    m: u64,
    (kk, s): (u64, u64),
    pads: (u64, u64, u64, u64),
) -> ConvParams {
    let [act, act_a, act_b] = Activation::Relu.encode();
    ConvParams {
        n,
        c,
        h,
        w,
        m,
        group: 1,
        kh: kk,
        kw: kk,
        stride_h: s,
        stride_w: s,
        pad_t: pads.0,
        pad_l: pads.1,
        dil_h: 1,
        dil_w: 1,
        oh: (h + pads.0 + pads.2 - kk) / s + 1,
        ow: (w + pads.1 + pads.3 - kk) / s + 1,
        has_bias: 1,
        act,
        act_a,
        act_b,
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

/// `wt` (OIHW, `p.m x p.k()`) packed in `t` in `layout` for `lp` (the packing's params),
/// 64-aligned, and the widened OIHW values the kernels compute on (read back through the
/// kernels' own widening of the OIHW packing).
fn reduced(
    p: &ConvParams,
    lp: &ConvParams,
    t: WeightType,
    layout: Layout,
    wt: &[f32],
) -> ((Vec<u64>, usize), Vec<f32>) {
    let k = p.k();
    let mut oihw = aligned(region_bytes(p, t, Layout::Oihw));
    {
        let (v, off) = &mut oihw;
        let bytes = region_bytes(p, t, Layout::Oihw);
        let out = &mut bytes_of(v)[*off * 8..*off * 8 + bytes];
        pack(p, t, Layout::Oihw, |i| wt[i], out, &mut |_| {});
    }
    let mut wide = vec![0f32; wt.len()];
    let view = Reduced::of(
        &ConvParams {
            wtype: t.code(),
            ..*p
        },
        oihw.0[oihw.1..].as_ptr().cast(),
        Layout::Oihw,
    )
    .expect("a reduced view");
    for r in 0..p.m as usize {
        // SAFETY: row r of the packed OIHW weights, its scale; `k` floats of `wide`.
        unsafe { view.widen(r * k, k, wide.as_mut_ptr().add(r * k), (r, 1)) };
    }
    if layout == Layout::Oihw {
        return (oihw, wide);
    }
    let bytes = region_bytes(lp, t, layout);
    let (mut v, off) = aligned(bytes);
    pack(
        lp,
        t,
        layout,
        |i| wt[i],
        &mut bytes_of(&mut v)[off * 8..off * 8 + bytes],
        &mut |_| {},
    );
    ((v, off), wide)
}

fn bytes_of(v: &mut [u64]) -> &mut [u8] {
    // SAFETY: u64 words viewed as their bytes.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), v.len() * 8) }
}

/// [`conv`] of `p` at `budget` on 16-bit `x` with weights at `w`.
fn run(p: &ConvParams, budget: u64, x: &[u16], w: *const f32, bias: &[f32]) -> Vec<u16> {
    let mut y = vec![0u16; (p.n * p.m * p.oh * p.ow) as usize];
    let (mut s, off) = aligned(scratch_bytes_at(p, budget));
    // Stale values in the scratch must not leak into the output.
    bytes_of(&mut s).fill(0xff);
    // SAFETY: operands of the sizes the contract asks, the weights prepared for `p` at
    // `budget` by the caller, the scratch as `scratch_bytes_at` asks, 64-aligned.
    unsafe {
        conv(
            N16::Bf16,
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

/// 16-bit input and the bias of `p`.
fn operands(p: &ConvParams, seed: usize) -> (Vec<u16>, Vec<f32>) {
    let x32 = values((p.n * p.c * p.h * p.w) as usize, seed);
    let mut x = vec![0u16; x32.len()];
    narrow(N16::Bf16, &x32, &mut x);
    let bias: Vec<f32> = (0..p.m).map(|j| j as f32 / 16.0 - 1.0).collect();
    (x, bias)
}

#[test]
fn winograd_bands_on_reduced_weights_equal_the_widened_f32_ones() {
    let cases = [
        // A short last band (oh 19), odd sizes, "same" pads.
        geom(1, 8, (19, 37), 12, (3, 1), (1, 1, 1, 1)),
        // Two images, odd H and W, uneven pads, channels in several passes.
        geom(2, 5, (23, 29), 60, (3, 1), (2, 1, 0, 2)),
        // No padding, more output channels than one pass at small budgets.
        geom(1, 16, (26, 70), 100, (3, 1), (0, 0, 0, 0)),
    ];
    let (mut banded, mut passes, mut short_last) = (0, 0, 0);
    for (i, p) in cases.into_iter().enumerate() {
        let p = ConvParams {
            packed_a: WINOGRAD_PACKED,
            ..p
        };
        let (x, bias) = operands(&p, i);
        let wt = values((p.m * p.c * 9) as usize, i + 3);
        for t in REDUCED {
            let ((wr, off), wide) = reduced(&p, &p, t, Layout::Oihw, &wt);
            let pr = ConvParams {
                wtype: t.code(),
                ..p
            };
            let mut runs = 0;
            for budget in budgets(&p) {
                let Some(b) = wino_bands(&pr, budget) else {
                    assert!(wino_bands(&p, budget).is_none(), "{pr:?} at {budget}");
                    continue;
                };
                assert_eq!(wino_bands(&p, budget), Some(b), "the f32 bands' cut");
                assert_eq!(scratch_bytes_at(&pr, budget), scratch_bytes_at(&p, budget));
                runs += 1;
                banded += usize::from(b.rows < p.oh);
                passes += usize::from(b.mb < p.m);
                short_last += usize::from(b.rows < p.oh && !p.oh.is_multiple_of(b.rows));
                let want = run(&p, budget, &x, wide.as_ptr(), &bias);
                let got = run(&pr, budget, &x, wr[off..].as_ptr().cast(), &bias);
                assert!(got == want, "{pr:?} at budget {budget} ({b:?})");
            }
            assert!(runs > 1, "{pr:?}: Winograd bands at fewer than two budgets");
        }
    }
    assert!(banded > 0, "no plane cut into several bands");
    assert!(passes > 0, "no weights transformed in several passes");
    assert!(short_last > 0, "no short last band");
}

#[test]
fn direct_bands_on_reduced_weights_equal_the_widened_f32_ones() {
    let cases = [
        // 3 x 3 stride 1, odd width, a short last band, two images.
        geom(2, 24, (31, 33), 36, (3, 1), (1, 1, 1, 1)),
        // Channels in lanes (64 | m, k >= 64), uneven pads.
        geom(1, 32, (20, 27), 64, (3, 1), (1, 0, 2, 1)),
        // A first layer: 7 x 7 stride 2 on 3 channels.
        geom(1, 3, (45, 47), 16, (7, 2), (3, 3, 3, 3)),
    ];
    let mut direct = 0;
    for (i, p) in cases.into_iter().enumerate() {
        let (x, bias) = operands(&p, i);
        let wt = values((p.m * p.k() as u64) as usize, i + 5);
        for budget in budgets(&p) {
            let wp = weights_params(&p, budget);
            let marks_direct = wp.packed_a == crate::gemm::direct::DIRECT_PACKED;
            for t in REDUCED {
                let Some(q) = reduced_direct(&p, budget, t.code(), usize::MAX) else {
                    // Only where the f32 bands run the direct kernels on one packing.
                    let cl: Vec<usize> = bands(&p, band_rows(&p, budget))
                        .map(|mut b| {
                            crate::gemm::conv::mark_packed(&mut b);
                            crate::gemm::direct::block_rows(&b)
                        })
                        .collect();
                    assert!(!marks_direct || cl.windows(2).any(|w| w[0] != w[1]));
                    continue;
                };
                assert!(marks_direct, "{p:?} at {budget}");
                // Too little scratch: the GEMM path instead.
                assert!(
                    reduced_direct(&p, budget, t.code(), scratch_bytes_at(&q, budget) - 1)
                        .is_none()
                );
                direct += 1;
                let ((wr, off), wide) = reduced(&p, &wp, t, Layout::Direct, &wt);
                let mut w32 = vec![0f32; prepared_len(&wp)];
                prepare_weights(&mut wp.clone(), &wide, &mut w32);
                let pf = ConvParams {
                    packed_a: wp.packed_a,
                    ..p
                };
                let qr = ConvParams {
                    packed_a: wp.packed_a,
                    ..q
                };
                let want = run(&pf, budget, &x, w32.as_ptr(), &bias);
                let got = run(&qr, budget, &x, wr[off..].as_ptr().cast(), &bias);
                assert!(got == want, "{qr:?} at budget {budget}");
            }
        }
    }
    let avx512 = crate::gemm::selected_kernel().name.starts_with("avx512")
        && crate::gemm::selected_kernel().mr == 12;
    assert!(!avx512 || direct > 0, "no band ran the direct kernels");
}

/// [`conv`] of `p` at `budget` as [`run`], `y` holding `y0` on entry (a fused residual), on
/// a pool of `threads` eager threads.
fn run_on(
    p: &ConvParams,
    budget: u64,
    (x, y0): (&[u16], &[u16]),
    w: *const f32,
    bias: &[f32],
    threads: usize,
) -> Vec<u16> {
    let mut y = y0.to_vec();
    let (mut s, off) = aligned(scratch_bytes_at(p, budget));
    bytes_of(&mut s).fill(0xff);
    let pool = crate::par::Pool::new(threads).expect("threads");
    pool.set_eager(true);
    crate::par::with_pool(Some(&pool), || {
        // SAFETY: as in [`run`].
        unsafe {
            conv(
                N16::Bf16,
                p,
                budget,
                x.as_ptr(),
                w,
                bias.as_ptr(),
                y.as_mut_ptr(),
                s.as_mut_ptr().add(off).cast(),
            )
        }
    });
    y
}

#[test]
fn direct_blocks_on_reduced_weights_equal_the_widened_f32_ones() {
    let cases = [
        // ResNet's first 3x3/s2: two groups of 64, one-row bands at the smallest budgets.
        geom(1, 128, (30, 30), 128, (3, 2), (1, 1, 1, 1)),
        // A 1x1/s2 downsample of three groups, two images, a fused residual.
        geom(2, 64, (26, 22), 192, (1, 2), (0, 0, 0, 0)),
        // 3x3/s1, one group, odd sizes, a short last band, a fused residual.
        geom(1, 72, (29, 27), 64, (3, 1), (1, 1, 1, 1)),
    ];
    let (mut runs, mut narrow_blocks, mut several, mut chunked) = (0, 0, 0, 0);
    for (i, p) in cases.into_iter().enumerate() {
        let p = ConvParams {
            accumulate: u64::from(i > 0),
            ..p
        };
        let (x, bias) = operands(&p, i + 7);
        let y0 = operands(
            &ConvParams {
                c: p.m,
                h: p.oh,
                w: p.ow,
                ..p
            },
            i + 9,
        )
        .0;
        let wt = values((p.m * p.k() as u64) as usize, i + 2);
        for threads in 1..=3u64 {
            let p = ConvParams { threads, ..p };
            for budget in budgets(&p) {
                let wp = weights_params(&p, budget);
                for t in REDUCED {
                    let Some(q) = reduced_direct(&p, budget, t.code(), usize::MAX) else {
                        continue;
                    };
                    let qr = ConvParams {
                        packed_a: wp.packed_a,
                        ..q
                    };
                    let Some(b) = super::blocks::plan(&qr, budget) else {
                        continue;
                    };
                    runs += 1;
                    narrow_blocks += usize::from(b.b < 64);
                    several += usize::from(b.groups > 1);
                    chunked += usize::from(b.chunks > 1);
                    let ((wr, off), wide) = reduced(&p, &wp, t, Layout::Direct, &wt);
                    let mut w32 = vec![0f32; prepared_len(&wp)];
                    prepare_weights(&mut wp.clone(), &wide, &mut w32);
                    let pf = ConvParams {
                        packed_a: wp.packed_a,
                        ..p
                    };
                    let io = (&x[..], &y0[..]);
                    let want = run_on(&pf, budget, io, w32.as_ptr(), &bias, threads as usize);
                    let wr = wr[off..].as_ptr().cast();
                    let got = run_on(&qr, budget, io, wr, &bias, threads as usize);
                    assert!(got == want, "{qr:?} at budget {budget} ({b:?})");
                }
            }
        }
    }
    let avx512 = crate::gemm::selected_kernel().name.starts_with("avx512")
        && crate::gemm::selected_kernel().mr == 12;
    if avx512 {
        assert!(runs > 0, "no band ran in the block order");
        assert!(narrow_blocks > 0, "no block narrower than a group");
        assert!(several > 0, "no Conv of several blocks");
        assert!(chunked > 0, "no block's bands cut over several threads");
    }
}
