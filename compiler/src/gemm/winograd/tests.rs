//! Winograd F(4x4, 3x3) against an f64 direct convolution.
//!
//! Tolerance: F(4x4, 3x3) in f32 has an error that grows with the transforms' constants (up
//! to 8 in `Aᵀ`, 5 in `Bᵀ`, 1/24 in `G`), not with the plane. Each output is checked
//! against `TOL * (|b| + Σ |w| |x|)` over its taps: the sum of magnitudes is the scale any
//! f32 summation's rounding is relative to (a direct f32 sum errs by up to `K * 2^-24` of it),
//! and `TOL = 2e-5` (about 170 ulps of 2^-23) holds the F(4,3) error seen here (at most
//! 5.4e-6 with the AVX-512 and AVX2 kernels, 6.5e-6 with the portable one, on these cases)
//! with a 3x margin, while a wrong tap, edge or channel gives errors of the order of the
//! terms themselves.

use super::super::conv::{Activation, ConvParams};
use super::*;

const TOL: f64 = 2e-5;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// Runs `p` through [`run`] (weights transformed per run) and checks every output against
/// the f64 reference; returns the largest error relative to its scale.
fn check(p: ConvParams, seed: u64) -> f64 {
    check_as(p, seed, false)
}

/// [`run`] on `p` with OIHW weights `wt`, transformed per run or (`pre`) by
/// [`transform_weights`] beforehand; the output.
fn conv(p: &ConvParams, x: &[f32], wt: &[f32], bias: &[f32], pre: bool) -> Vec<f32> {
    let mut p = *p;
    p.packed_a = if pre {
        WINOGRAD_U_PACKED
    } else {
        WINOGRAD_PACKED
    };
    let u = if pre {
        let mut u = vec![f32::NAN; weights_floats(&p)];
        assert!(transform_weights(&p, wt, &mut u), "{p:?}");
        assert!(
            !transform_weights(&p, &wt[1..], &mut u),
            "short weights refused"
        );
        u
    } else {
        wt.to_vec()
    };
    let mut y = vec![f32::NAN; (p.n * p.m * p.oh * p.ow) as usize];
    // Stale values (NaN) must not reach the output; a guard after the scratch must stay.
    let floats = scratch_bytes(&p) / 4;
    let mut scratch = vec![f32::NAN; floats + 64];
    scratch[floats..].fill(GUARD);
    // SAFETY: the sizes of run's contract (U: weights_floats floats from transform_weights).
    unsafe {
        run(
            &p,
            x.as_ptr(),
            u.as_ptr(),
            bias.as_ptr(),
            y.as_mut_ptr(),
            scratch.as_mut_ptr(),
        )
    };
    assert!(
        scratch[floats..].iter().all(|&v| v == GUARD),
        "{p:?}: the run wrote past its scratch"
    );
    y
}

/// The value written after the scratch [`conv`] gives [`run`].
const GUARD: f32 = 12345.0;

/// [`check`], the weights precomputed when `pre`.
fn check_as(p: ConvParams, seed: u64, pre: bool) -> f64 {
    assert!(geometry_fits(&p), "{p:?}");
    let us = |v: u64| v as usize;
    let (n, c, h, w, m, oh, ow) = (
        us(p.n),
        us(p.c),
        us(p.h),
        us(p.w),
        us(p.m),
        us(p.oh),
        us(p.ow),
    );
    let mut rng = Rng(seed);
    let x: Vec<f32> = (0..n * c * h * w).map(|_| rng.next()).collect();
    let wt: Vec<f32> = (0..m * c * 9).map(|_| rng.next()).collect();
    let bias: Vec<f32> = (0..m).map(|_| rng.next()).collect();
    let y = conv(&p, &x, &wt, &bias, pre);
    let act = p.activation();
    let mut worst = 0.0f64;
    for img in 0..n {
        for mi in 0..m {
            for oy in 0..oh {
                for ox in 0..ow {
                    let b = if p.has_bias != 0 {
                        bias[mi] as f64
                    } else {
                        0.0
                    };
                    let (mut s, mut mag) = (b, b.abs());
                    for ci in 0..c {
                        for ky in 0..3 {
                            for kx in 0..3 {
                                let iy = (oy + ky) as isize - p.pad_t as isize;
                                let ix = (ox + kx) as isize - p.pad_l as isize;
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                    continue;
                                }
                                let xv = x[((img * c + ci) * h + iy as usize) * w + ix as usize];
                                let wv = wt[(mi * c + ci) * 9 + ky * 3 + kx];
                                s += xv as f64 * wv as f64;
                                mag += (xv as f64 * wv as f64).abs();
                            }
                        }
                    }
                    let want = act.apply(s as f32) as f64;
                    let got = y[((img * m + mi) * oh + oy) * ow + ox] as f64;
                    let err = (got - want).abs() / mag.max(1e-30);
                    assert!(
                        err <= TOL,
                        "{p:?}: y[{img},{mi},{oy},{ox}] = {got}, want {want} (error {err:.2e} of \
                         the scale {mag})"
                    );
                    worst = worst.max(err);
                }
            }
        }
    }
    worst
}

/// A 3 x 3 stride-1 geometry with pads `(t, l, b, r)`.
pub(crate) fn geom(
    n: u64,
    c: u64,
    (h, w): (u64, u64),
    m: u64,
    pads: (u64, u64, u64, u64),
) -> ConvParams {
    ConvParams {
        n,
        c,
        h,
        w,
        m,
        group: 1,
        kh: 3,
        kw: 3,
        stride_h: 1,
        stride_w: 1,
        pad_t: pads.0,
        pad_l: pads.1,
        dil_h: 1,
        dil_w: 1,
        oh: h + pads.0 + pads.2 - 2,
        ow: w + pads.1 + pads.3 - 2,
        threads: 1,
        ..ConvParams::default()
    }
}

#[test]
fn random_geometries_match_the_reference() {
    let mut worst = 0.0f64;
    let cases = [
        (1, 3, (5, 7), 5, (0, 0, 0, 0)),
        (1, 5, (9, 11), 7, (1, 1, 1, 1)),
        (2, 17, (13, 13), 13, (1, 1, 1, 1)),
        (1, 19, (10, 15), 50, (2, 2, 2, 2)),
        (1, 16, (23, 17), 64, (0, 1, 2, 1)),
        (1, 33, (8, 8), 97, (1, 0, 1, 2)),
        (1, 7, (3, 3), 4, (2, 2, 2, 2)),
        (1, 64, (29, 29), 20, (1, 1, 1, 1)),
    ];
    for (i, &(n, c, hw, m, pads)) in cases.iter().enumerate() {
        for (bias, act) in [(false, Activation::None), (true, Activation::Relu)] {
            let mut p = geom(n, c, hw, m, pads);
            p.has_bias = u64::from(bias);
            [p.act, p.act_a, p.act_b] = act.encode();
            worst = worst.max(check(p, 7 + i as u64));
        }
    }
    eprintln!("worst error / scale: {worst:.2e}");
}

#[test]
fn many_tiles_and_k_blocks() {
    // Several tile blocks per image (blocking) and C past one K block (KC = 384).
    let p = geom(1, 400, (30, 30), 24, (1, 1, 1, 1));
    check(p, 3);
    let p = geom(1, 8, (70, 66), 16, (1, 1, 1, 1));
    assert!(blocking(&p).blocks > 1);
    check(p, 4);
}

#[test]
fn precomputed_weights_match_the_reference_and_the_per_run_transform() {
    // The same cases through transform_weights + WINOGRAD_U_PACKED: within the reference's
    // bound, and bit-identical to the per-run transform at 1, 2 and 3 threads (the scratch
    // has no head: a stale head offset would read the slots as weights).
    let cases = [
        (1, 3, (5, 7), 5, (0, 0, 0, 0)),
        (2, 17, (13, 13), 13, (1, 1, 1, 1)),
        (1, 33, (8, 8), 97, (1, 0, 1, 2)),
        (1, 400, (30, 30), 24, (1, 1, 1, 1)),
        (1, 8, (70, 66), 16, (1, 1, 1, 1)),
    ];
    let pool = crate::par::Pool::new(3).expect("a pool of 3 threads");
    for (i, &(n, c, hw, m, pads)) in cases.iter().enumerate() {
        let mut p = geom(n, c, hw, m, pads);
        p.has_bias = 1;
        [p.act, p.act_a, p.act_b] = Activation::Relu.encode();
        check_as(p, 11 + i as u64, true);
        let mut rng = Rng(100 + i as u64);
        let x: Vec<f32> = (0..(n * c * hw.0 * hw.1) as usize)
            .map(|_| rng.next())
            .collect();
        let wt: Vec<f32> = (0..(m * c * 9) as usize).map(|_| rng.next()).collect();
        let bias: Vec<f32> = (0..m as usize).map(|_| rng.next()).collect();
        let want = conv(&p, &x, &wt, &bias, false);
        for threads in [1, 2, 3] {
            let pt = ConvParams { threads, ..p };
            let got = crate::par::with_pool(Some(&pool), || conv(&pt, &x, &wt, &bias, true));
            let same = want
                .iter()
                .zip(&got)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(
                same,
                "{pt:?}: precomputed differs from per-run at {threads} threads"
            );
        }
    }
}

#[test]
fn precomputed_weights_leave_no_head_in_the_scratch() {
    let mut p = geom(1, 64, (56, 56), 64, (1, 1, 1, 1));
    let per_run = scratch_bytes(&ConvParams {
        packed_a: WINOGRAD_PACKED,
        ..p
    });
    mark(&mut p, true);
    assert_eq!(p.packed_a, WINOGRAD_U_PACKED);
    assert_eq!(per_run - scratch_bytes(&p), weights_floats(&p) * 4);
    // Not constant f32, or past PRECOMPUTE_MAX: the per-run transform.
    mark(&mut p, false);
    assert_eq!(p.packed_a, WINOGRAD_PACKED);
    let mut big = geom(1, 256, (56, 56), 256, (1, 1, 1, 1));
    mark(&mut big, true);
    assert_eq!(
        big.packed_a, WINOGRAD_PACKED,
        "9.4 MB of transformed weights"
    );
    // 14 x 14: 16 tiles, enough only with precomputed weights.
    let mut small = geom(1, 64, (14, 14), 64, (1, 1, 1, 1));
    assert!(!wins(&small), "per-run transform at 16 tiles");
    mark(&mut small, true);
    assert!(wins(&small), "precomputed at 16 tiles");
    let mut tiny = geom(1, 64, (7, 7), 64, (1, 1, 1, 1));
    mark(&mut tiny, true);
    assert!(!wins(&tiny), "4 tiles: one panel mostly zero columns");
    let mut edge = geom(1, 128, (28, 28), 128, (1, 1, 1, 1));
    mark(&mut edge, true);
    assert_eq!(edge.packed_a, WINOGRAD_U_PACKED, "128 -> 128: 2.4 MB");
}

#[test]
fn small_row_blocks_are_bit_identical_and_smaller() {
    // One panel of tiles with 24- and 12-row blocks (block_sizes' last values): the same bits
    // as the default 48-row block, at 1 and 2 threads, with a scratch that shrinks with the
    // row block; m = 64 ends in a partial block (4 edge rows), m = 20 offers only 12.
    let pool = crate::par::Pool::new(2).expect("a pool of 2 threads");
    for (i, &(c, hw, m)) in [(64, (18, 18), 64), (19, (10, 13), 20)].iter().enumerate() {
        let mut p = geom(1, c, hw, m, (1, 1, 1, 1));
        p.has_bias = 1;
        [p.act, p.act_a, p.act_b] = Activation::Relu.encode();
        let sizes: Vec<usize> = block_sizes(&p).collect();
        let small: Vec<usize> = sizes.iter().copied().filter(|&t| t > NR * 8).collect();
        let rows: Vec<usize> = small.iter().map(|&t| t >> ROWS_SHIFT).collect();
        let want_rows: Vec<usize> = SMALL_ROWS.into_iter().filter(|&r| r < m as usize).collect();
        assert_eq!(rows, want_rows, "{sizes:?}");
        let bytes: Vec<usize> = sizes
            .iter()
            .map(|&t| scratch_bytes(&with_block(&p, t)))
            .collect();
        // Never larger down the list; each smaller row block strictly smaller.
        assert!(bytes.windows(2).all(|w| w[1] <= w[0]), "{bytes:?}");
        let tail = &bytes[bytes.len() - small.len() - 1..];
        assert!(tail.windows(2).all(|w| w[1] < w[0]), "{bytes:?}");
        let mut rng = Rng(300 + i as u64);
        let x: Vec<f32> = (0..(c * hw.0 * hw.1) as usize)
            .map(|_| rng.next())
            .collect();
        let wt: Vec<f32> = (0..(m * c * 9) as usize).map(|_| rng.next()).collect();
        let bias: Vec<f32> = (0..m as usize).map(|_| rng.next()).collect();
        let want = conv(&with_block(&p, NR), &x, &wt, &bias, true);
        for &t in &small {
            for threads in [1, 2] {
                let pt = ConvParams {
                    threads,
                    ..with_block(&p, t)
                };
                // The scratch reads back the block at one thread; at two, a larger block
                // run as one unit (one slot) may need no more.
                let back = block_for_scratch(&pt, scratch_bytes(&pt)).expect("a block");
                assert!(
                    back == t
                        || (threads > 1
                            && units(&with_block(&pt, back)) == 1
                            && scratch_bytes(&with_block(&pt, back)) <= scratch_bytes(&pt)),
                    "{pt:?}: block {back} read back"
                );
                let got = crate::par::with_pool(Some(&pool), || conv(&pt, &x, &wt, &bias, true));
                let same = want
                    .iter()
                    .zip(&got)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(
                    same,
                    "{pt:?}: rows {} differ at {threads} threads",
                    t >> ROWS_SHIFT
                );
            }
        }
        check_as(
            with_block(&p, *small.last().expect("a small block")),
            40 + i as u64,
            true,
        );
    }
}

#[test]
fn one_unit_runs_share_one_slot_on_every_thread() {
    // One tile block of one row block per run ([`units`] 1): at 2 and 3 threads the scratch
    // of one thread (one slot, shared), the input transform, the products and the output
    // transform each spread over the pool (three jobs, and the per-run weight transform's),
    // the same bits as at one thread. Cases: a partial micro-panel of rows (45 = 3 x 12 + 9
    // on AVX-512, 7 x 6 + 3 on AVX2), pads on every side, two panels of tiles, 48 rows (one
    // whole row block), few input channels (fewer than the pieces of the input pass).
    let cases = [
        (40, (12, 30), 45, (1, 1, 1, 1)),
        (3, (9, 50), 13, (0, 1, 2, 1)),
        (64, (16, 16), 48, (1, 1, 1, 1)),
        (200, (8, 20), 20, (2, 0, 1, 2)),
    ];
    for (i, &(c, hw, m, pads)) in cases.iter().enumerate() {
        let mut p = geom(1, c, hw, m, pads);
        p.has_bias = 1;
        [p.act, p.act_a, p.act_b] = Activation::Relu.encode();
        check_as(p, 60 + i as u64, true);
        let mut rng = Rng(500 + i as u64);
        let x: Vec<f32> = (0..(c * hw.0 * hw.1) as usize)
            .map(|_| rng.next())
            .collect();
        let wt: Vec<f32> = (0..(m * c * 9) as usize).map(|_| rng.next()).collect();
        let bias: Vec<f32> = (0..m as usize).map(|_| rng.next()).collect();
        for pre in [true, false] {
            let want = conv(&p, &x, &wt, &bias, pre);
            for threads in [2u64, 3] {
                let pt = ConvParams { threads, ..p };
                let form = |q: &ConvParams| ConvParams {
                    packed_a: if pre {
                        WINOGRAD_U_PACKED
                    } else {
                        WINOGRAD_PACKED
                    },
                    ..*q
                };
                assert_eq!(units(&form(&pt)), 1, "{pt:?}");
                assert_eq!(scratch_bytes(&form(&pt)), scratch_bytes(&form(&p)));
                let pool = crate::par::Pool::new(threads as usize).expect("a pool");
                pool.set_eager(true);
                let jobs = pool.jobs();
                let got = crate::par::with_pool(Some(&pool), || conv(&pt, &x, &wt, &bias, pre));
                assert!(
                    pool.jobs() >= jobs + 3,
                    "{pt:?}: the unit ran on one thread"
                );
                let same = want
                    .iter()
                    .zip(&got)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{pt:?} (precomputed {pre}): differs from 1 thread");
            }
        }
    }
}
