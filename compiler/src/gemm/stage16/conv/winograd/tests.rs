//! Staged Winograd bands against the f32 convolution narrowed: the whole plane run by
//! [`arenac_conv2d`] (Winograd on the same precomputed matrices) on the widened input, its
//! output rounded to 16 bits; the bands on precomputed matrices and on the OIHW weights
//! transformed once per run into the scratch's head (in passes of output channels where
//! the budget holds fewer matrices). Bands of a multiple of 4 rows keep the whole plane's tile
//! grid, so every output is the same f32 value before rounding: equal bits at every budget
//! that runs Winograd bands (a short last band, odd sizes, pads, two images), and within
//! f16 rounding plus F(4x4, 3x3)'s error of the f64 convolution.

use super::super::{budgets, config_for_scratch, conv, scratch_bytes_at, scratch_sizes};
use super::{marked, unmarked, wino_bands};
use crate::gemm::conv::{Activation, ConvParams, arenac_conv2d, conv2d_scratch_bytes};
use crate::gemm::stage16::{N16, narrow, widen};
use crate::gemm::winograd::{
    WINOGRAD_PACKED, WINOGRAD_U_PACKED, transform_weights, weights_floats,
};

/// A 3 x 3 stride-1 geometry: `pads` (top, left, bottom, right), `WINOGRAD_U_PACKED`.
fn geom(n: u64, c: u64, hw: (u64, u64), m: u64, pads: (u64, u64, u64, u64)) -> ConvParams {
    ConvParams {
        has_bias: 1,
        packed_a: WINOGRAD_U_PACKED,
        ..crate::gemm::winograd::tests::geom(n, c, hw, m, pads)
    }
}

/// A 64-aligned f32 buffer of at least `floats` floats: the vector and the offset.
fn aligned(floats: usize) -> (Vec<f32>, usize) {
    let v = vec![0f32; floats + 16];
    let off = v.as_ptr().align_offset(64);
    (v, off)
}

#[test]
fn winograd_bands_equal_the_f32_conv_narrowed() {
    let cases = [
        // A short last band (oh 19), odd sizes, "same" pads, ReLU.
        (geom(1, 8, (19, 37), 12, (1, 1, 1, 1)), Activation::Relu),
        // Two images, odd H and W, uneven pads.
        (geom(2, 5, (23, 29), 7, (2, 1, 0, 2)), Activation::None),
        // No padding (a valid conv), more output channels than one row block.
        (geom(1, 16, (26, 70), 50, (0, 0, 0, 0)), Activation::None),
        // The bottom pad in the last band only, a plane of 5 tile rows.
        (geom(1, 3, (20, 64), 16, (0, 1, 1, 1)), Activation::Relu),
    ];
    let mut banded = 0;
    let mut passes = 0;
    let mut short_last = 0;
    for (i, (mut p, act)) in cases.into_iter().enumerate() {
        [p.act, p.act_a, p.act_b] = act.encode();
        let (n, c, hw, m, ohw) = (
            p.n as usize,
            p.c as usize,
            (p.h * p.w) as usize,
            p.m as usize,
            (p.oh * p.ow) as usize,
        );
        let x32: Vec<f32> = (0..n * c * hw)
            .map(|j| (((j + 7 * i) * 37 % 113) as f32 - 56.0) / 32.0)
            .collect();
        let mut x = vec![0u16; x32.len()];
        narrow(N16::F16, &x32, &mut x);
        let mut xw = vec![0f32; x.len()];
        widen(N16::F16, &x, &mut xw);
        let wt: Vec<f32> = (0..m * c * 9)
            .map(|j| (((j + i) * 11 % 29) as f32 - 14.0) / 64.0)
            .collect();
        let bias: Vec<f32> = (0..m).map(|j| j as f32 / 8.0 - 2.0).collect();
        let mut u = vec![0f32; weights_floats(&p)];
        assert!(transform_weights(&p, &wt, &mut u));
        // The f32 whole-plane Winograd conv of the widened input, narrowed.
        let (mut s32, o32) = aligned(conv2d_scratch_bytes(&p) / 4);
        let mut y32 = vec![0f32; n * m * ohw];
        // SAFETY: operands of the sizes the contract asks; U transformed for `p`; the
        // scratch as `conv2d_scratch_bytes` asks, 64-aligned.
        unsafe {
            arenac_conv2d(
                &p,
                xw.as_ptr(),
                u.as_ptr(),
                bias.as_ptr(),
                y32.as_mut_ptr(),
                s32.as_mut_ptr().add(o32),
            )
        };
        let mut want = vec![0u16; y32.len()];
        narrow(N16::F16, &y32, &mut want);
        let mut runs = 0;
        // Precomputed matrices, then the OIHW weights transformed once per run.
        for (p, wp) in [
            (p, &u),
            (
                ConvParams {
                    packed_a: WINOGRAD_PACKED,
                    ..p
                },
                &wt,
            ),
        ] {
            for budget in budgets(&p) {
                let Some(b) = wino_bands(&p, budget) else {
                    continue;
                };
                runs += 1;
                assert!(b.rows == p.oh || b.rows.is_multiple_of(4), "{p:?}: {b:?}");
                banded += usize::from(b.rows < p.oh);
                passes += usize::from(b.mb < p.m);
                short_last += usize::from(b.rows < p.oh && !p.oh.is_multiple_of(b.rows));
                let (mut s, off) = aligned(scratch_bytes_at(&p, budget) / 4);
                // Stale values in the scratch must not leak into the output.
                s.fill(f32::NAN);
                let mut y = vec![0u16; n * m * ohw];
                // SAFETY: as above; the scratch as `scratch_bytes_at` asks at this budget.
                unsafe {
                    conv(
                        N16::F16,
                        &p,
                        budget,
                        x.as_ptr(),
                        wp.as_ptr(),
                        bias.as_ptr(),
                        y.as_mut_ptr(),
                        s.as_mut_ptr().add(off),
                    )
                };
                assert!(y == want, "{p:?} at budget {budget} ({b:?})");
            }
        }
        assert!(
            runs > 1,
            "{p:?}: no budget ran Winograd bands in both forms"
        );
        // The narrowed f32 conv within f16 rounding and Winograd's error of the f64 one.
        let mut got = vec![0f32; want.len()];
        widen(N16::F16, &want, &mut got);
        let (h, w) = (p.h as i64, p.w as i64);
        let (pt, pl) = (p.pad_t as i64, p.pad_l as i64);
        for img in 0..n {
            for mo in 0..m {
                for oy in 0..p.oh as i64 {
                    for ox in 0..p.ow as i64 {
                        let mut r = f64::from(bias[mo]);
                        for ci in 0..c {
                            for k in 0..9i64 {
                                let (iy, ix) = (oy + k / 3 - pt, ox + k % 3 - pl);
                                if (0..h).contains(&iy) && (0..w).contains(&ix) {
                                    let xi = (img * c + ci) * hw + (iy * w + ix) as usize;
                                    r += f64::from(xw[xi])
                                        * f64::from(wt[(mo * c + ci) * 9 + k as usize]);
                                }
                            }
                        }
                        if act == Activation::Relu {
                            r = r.max(0.0);
                        }
                        let at = (img * m + mo) * ohw + (oy * p.ow as i64 + ox) as usize;
                        let g = f64::from(got[at]);
                        assert!(
                            (g - r).abs() <= 2e-3 * r.abs().max(1.0),
                            "{p:?}: y[{img}][{mo}][{oy}][{ox}] = {g}, reference {r}"
                        );
                    }
                }
            }
        }
    }
    assert!(
        banded > 0,
        "no budget cut a plane into several Winograd bands"
    );
    assert!(short_last > 0, "no Winograd bands ended in a short band");
    assert!(
        passes > 0,
        "no weights transformed per run in several passes of channels"
    );
}

/// Every size the planner may give a marked Conv reads back to params and a budget whose
/// scratch fits it: Winograd bands where they fit, else the unmarked paths.
#[test]
fn every_planned_size_reads_back_within_itself() {
    for p in [
        geom(1, 64, (56, 56), 64, (1, 1, 1, 1)),
        geom(1, 3, (224, 224), 64, (1, 1, 1, 1)),
        geom(2, 32, (15, 15), 48, (1, 1, 1, 1)),
        ConvParams {
            packed_a: WINOGRAD_PACKED,
            ..geom(1, 256, (56, 56), 256, (1, 1, 1, 1))
        },
    ] {
        let mut wino = 0;
        for size in scratch_sizes(&p) {
            let (q, budget) = config_for_scratch(&p, size);
            assert!(scratch_bytes_at(&q, budget) <= size, "{p:?}: {size}");
            assert!(marked(&q) || q == unmarked(&p), "{q:?}");
            wino += usize::from(wino_bands(&q, budget).is_some());
        }
        assert!(wino > 0, "{p:?}: no size ran Winograd bands");
        // Unmarked params never run them.
        assert!(
            budgets(&p)
                .into_iter()
                .all(|b| wino_bands(&unmarked(&p), b).is_none())
        );
    }
}

/// A band whose Winograd run is one unit (one tile block, one block of output rows: U-Net's
/// 192 -> 64 channel 64 x 64 Conv at a 4-row band) keeps one slot of the run whatever the
/// node's threads (its threads share it: `winograd::shared_unit`), so at 2 and 3 threads its
/// scratch is no larger than at one. Run on an eager pool of that many threads in exactly
/// that scratch (a guard after it), f16 and bf16, it gives the bits of the f32 whole-plane
/// Winograd conv narrowed, as at one thread.
#[test]
fn one_unit_bands_take_one_slot_at_every_thread_count() {
    use super::{band_at, band_scratch_floats, channels};
    use crate::gemm::winograd::units;
    let base = geom(1, 48, (16, 64), 24, (1, 1, 1, 1));
    let (c, hw, m, ohw) = (48usize, 16 * 64, 24usize, 16 * 64);
    let x32: Vec<f32> = (0..c * hw)
        .map(|j| ((j * 37 % 113) as f32 - 56.0) / 32.0)
        .collect();
    let wt: Vec<f32> = (0..m * c * 9)
        .map(|j| ((j * 11 % 29) as f32 - 14.0) / 64.0)
        .collect();
    let bias: Vec<f32> = (0..m).map(|j| j as f32 / 8.0 - 2.0).collect();
    let mut u = vec![0f32; weights_floats(&base)];
    assert!(transform_weights(&base, &wt, &mut u));
    let mut one_unit = [0; 2];
    for ty in [N16::F16, N16::Bf16] {
        let mut x = vec![0u16; x32.len()];
        narrow(ty, &x32, &mut x);
        let mut xw = vec![0f32; x.len()];
        widen(ty, &x, &mut xw);
        let (mut s32, o32) = aligned(conv2d_scratch_bytes(&base) / 4);
        let mut y32 = vec![0f32; m * ohw];
        // SAFETY: operands of the sizes the contract asks; U transformed for `base`; the
        // scratch as `conv2d_scratch_bytes` asks, 64-aligned.
        unsafe {
            arenac_conv2d(
                &base,
                xw.as_ptr(),
                u.as_ptr(),
                bias.as_ptr(),
                y32.as_mut_ptr(),
                s32.as_mut_ptr().add(o32),
            )
        };
        let mut want = vec![0u16; y32.len()];
        narrow(ty, &y32, &mut want);
        for threads in [1u64, 2, 3] {
            let pool = crate::par::Pool::new(threads as usize).expect("threads");
            pool.set_eager(true);
            for (form, (p, wp)) in [
                (ConvParams { threads, ..base }, &u),
                (
                    ConvParams {
                        packed_a: WINOGRAD_PACKED,
                        threads,
                        ..base
                    },
                    &wt,
                ),
            ]
            .into_iter()
            .enumerate()
            {
                for budget in budgets(&p) {
                    let Some(b) = wino_bands(&p, budget) else {
                        continue;
                    };
                    let q = band_at(&channels(&p, b.mb), 0, b.rows, b.block).0;
                    if units(&ConvParams { threads, ..q }) > 1 {
                        continue;
                    }
                    one_unit[form] += usize::from(threads > 1);
                    assert_eq!(
                        band_scratch_floats(&p, b, threads),
                        band_scratch_floats(&p, b, 1),
                        "{p:?} at {budget} ({b:?}): a second slot for a run of one unit"
                    );
                    let floats = scratch_bytes_at(&p, budget) / 4;
                    let (mut s, off) = aligned(floats + 64);
                    s.fill(f32::NAN);
                    let guard = 12345.0f32;
                    s[off + floats..off + floats + 64].fill(guard);
                    let mut y = vec![0u16; m * ohw];
                    crate::par::with_pool(Some(&pool), || {
                        // SAFETY: as above; the scratch as `scratch_bytes_at` asks at this
                        // budget.
                        unsafe {
                            conv(
                                ty,
                                &p,
                                budget,
                                x.as_ptr(),
                                wp.as_ptr(),
                                bias.as_ptr(),
                                y.as_mut_ptr(),
                                s.as_mut_ptr().add(off),
                            )
                        }
                    });
                    assert!(
                        y == want,
                        "{ty:?} {p:?} at budget {budget} ({b:?}) on {threads} threads"
                    );
                    assert!(
                        s[off + floats..off + floats + 64]
                            .iter()
                            .all(|&v| v == guard),
                        "{p:?} at {budget}: the run wrote past its scratch"
                    );
                }
            }
        }
    }
    assert!(
        one_unit.iter().all(|&k| k > 0),
        "one-unit Winograd bands (precomputed, per-run transform): {one_unit:?}"
    );
}

/// Winograd bands stage only their output rows (the input rows read in place from the
/// 16-bit planes, `winograd::run16`), so a DBNet-320 neck Conv (256 -> 64 channels, 80 x
/// 80, precomputed matrices) runs Winograd bands within the scratch of its smallest
/// unmarked budget at one thread: the size its plan gives it at the arena's peak. With the
/// band's input rows widened into the scratch (256 channels x 6 rows) its smallest
/// Winograd size was 1,273,856 bytes against 856,064, and the 16-bit plan lost Winograd
/// there (17.9 ms against f32's 6.3).
#[test]
fn neck_conv_runs_winograd_bands_in_its_least_scratch() {
    let p = geom(1, 256, (80, 80), 64, (1, 1, 1, 1));
    let q = unmarked(&p);
    let least = budgets(&q)
        .into_iter()
        .map(|b| scratch_bytes_at(&q, b))
        .min()
        .unwrap_or(0);
    let (r, budget) = config_for_scratch(&p, least);
    assert!(marked(&r), "{least} bytes read back unmarked");
    let b = wino_bands(&r, budget);
    assert!(b.is_some(), "no Winograd bands at budget {budget}");
    assert!(scratch_bytes_at(&r, budget) <= least);
    // No input rows in the slots.
    for budget in budgets(&p) {
        if let Some(b) = wino_bands(&p, budget) {
            assert_eq!(super::wino_parts(&p, b).0, 0, "{b:?}");
        }
    }
}
