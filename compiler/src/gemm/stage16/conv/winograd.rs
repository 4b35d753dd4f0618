//! A staged 3 x 3 stride-1 Conv whose bands run Winograd F(4x4, 3x3)
//! ([`crate::gemm::winograd`]) on transformed weights precomputed into the weights region
//! ([`WINOGRAD_U_PACKED`]), or transformed once per run into the head of the scratch
//! ([`WINOGRAD_PACKED`]: weights too large to precompute or stored reduced, the OIHW
//! weights given, f32 or in `p.wtype`, widened by the transform as it reads them): with
//! no weight transform per band, a band of whole 4-row tile rows is just a smaller Winograd
//! problem, so the bands pay nothing the whole convolution would not.
//!
//! The node's params arrive marked [`WINOGRAD_U_PACKED`] when the planner gave its weights
//! a precomputed form (`crate::analysis::liveness::winograd::precomputed`), or
//! [`WINOGRAD_PACKED`] when they are f32 but not precomputed; at a staging
//! budget the bands then run Winograd where [`wino_bands`] finds a band of at least 4 rows
//! (a multiple of 4 below the whole plane, so every band's tile grid is the whole plane's:
//! each output element is computed as in one whole-plane Winograd run) with enough tiles
//! ([`crate::gemm::winograd::applies`]) and a tile block whose scratch fits the budget.
//! Elsewhere the marked params behave as unmarked ones (the direct/im2col bands).

use super::super::split::{Shared, for_each_spread, narrow_spread};
use super::{N16, band, bands, narrow};
use crate::gemm::conv::ConvParams;
use crate::gemm::winograd::{self, WINOGRAD_PACKED, WINOGRAD_U_PACKED};

/// How the Winograd bands of a staged Conv are cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WinoBands {
    /// Output rows per band: a multiple of 4, or the whole plane.
    pub rows: u64,
    /// Tiles per Winograd tile block ([`winograd::with_block`]), with [`winograd::SHARED`]
    /// where the units share one slot.
    pub block: u64,
    /// Output channels per pass over the bands: all of them, or (weights transformed per
    /// run, [`WINOGRAD_PACKED`]) the passes of at most a multiple of [`winograd::MB`] whose
    /// transformed matrices fit the budget, made equal (whole micro-panels; the last pass
    /// may be shorter): each pass transforms its channels' weights into the head, then runs
    /// every band for them (re-widening the input rows, re-transforming the input tiles).
    pub mb: u64,
}

/// Whether `p` is marked for Winograd bands (on precomputed transformed weights, or on
/// weights transformed once per run).
pub fn marked(p: &ConvParams) -> bool {
    winograd::marks(p.packed_a)
}

/// `p` without the Winograd mark (the weights packed for the other paths).
pub fn unmarked(p: &ConvParams) -> ConvParams {
    ConvParams {
        packed_a: if marked(p) { 1 } else { p.packed_a },
        ..*p
    }
}

/// `p` restricted to `mc` output channels (one pass of [`WinoBands::mb`]).
fn channels(p: &ConvParams, mc: u64) -> ConvParams {
    ConvParams { m: mc, ..*p }
}

/// Floats of the head of `p` (output channels of one pass): the 36 matrices transformed
/// per run for a [`WINOGRAD_PACKED`] `p` (a multiple of 16), none otherwise.
fn head_floats(p: &ConvParams) -> usize {
    if p.packed_a == WINOGRAD_PACKED {
        winograd::weights_floats(p).next_multiple_of(16)
    } else {
        0
    }
}

/// The Winograd bands of a marked `p` ([`marked`]) at staging `budget`: output channels
/// per pass (all, or for weights transformed per run as many multiples of
/// [`winograd::MB`] as the budget holds their matrices, at least one, then spread evenly
/// over that many passes: 64 channels as 2 x 36 rather than 48 + 16), then as many rows as
/// the budget holds with the input rows they read (rounded down to a multiple of 4, or the
/// whole plane), at least 4, and tile blocks of the largest size whose scratch fits the
/// budget (at least one packed panel: the scratch may exceed the budget by it); `None` (the
/// other paths) when `p` is not marked, its weights are stored reduced but marked
/// precomputed (only the per-run transform widens them), or the bands would have too few
/// tiles for Winograd to repay its transforms.
pub fn wino_bands(p: &ConvParams, budget: u64) -> Option<WinoBands> {
    let reduced_ok = p.wtype == 0 || p.packed_a == WINOGRAD_PACKED;
    if !marked(p) || !reduced_ok || !winograd::geometry_fits(p) {
        return None;
    }
    // A per-run transform is repaid by the whole convolution's tiles (`winograd::wins`).
    if p.packed_a == WINOGRAD_PACKED && !winograd::applies(p) {
        return None;
    }
    let step = winograd::MB as u64;
    let mb = if head_floats(p) as u64 * 4 <= budget {
        p.m
    } else {
        let mut mb = step;
        while mb + step < p.m && head_floats(&channels(p, mb + step)) as u64 * 4 <= budget {
            mb += step;
        }
        // As many passes, of equal channels (whole micro-panels): a smaller head, and no
        // short last pass paying a whole input transform for a few channels.
        let passes = p.m.div_ceil(mb.min(p.m).max(1));
        let mr = crate::gemm::selected_kernel().mr as u64;
        p.m.div_ceil(passes).next_multiple_of(mr).min(mb).min(p.m)
    };
    let oh = p.oh.max(1);
    // Only the output rows are staged: the Winograd run reads the band's input rows in
    // place ([`winograd::run16`]).
    let per_row = (mb * p.ow).saturating_mul(4).max(1);
    let fit = budget / per_row;
    let rows = if fit >= oh { oh } else { fit / 4 * 4 };
    if rows < 4.min(oh) || rows == 0 {
        return None;
    }
    // At several threads a budget with `ONE_SLOT` set runs each band's units one after the
    // other in one Winograd slot, shared by the threads ([`winograd::SHARED`]).
    let shared = if p.threads >= 2 && budget & super::ONE_SLOT != 0 {
        winograd::SHARED
    } else {
        0
    };
    let q = band_at(&channels(p, mb), 0, rows, shared).0;
    if !winograd::applies(&q) {
        return None;
    }
    // The largest tile block whose scratch fits the budget, at least one packed panel.
    let block = winograd::block_for_scratch(&q, usize::try_from(budget).unwrap_or(usize::MAX))
        .unwrap_or(crate::gemm::NR);
    Some(WinoBands {
        rows,
        block: block as u64 | shared,
        mb,
    })
}

/// Band `[r0, r1)` of `p` as [`winograd::run`] takes it (tile blocks of at most `block`
/// tiles, 0: the default), and the first input row it reads.
fn band_at(p: &ConvParams, r0: u64, r1: u64, block: u64) -> (ConvParams, i64) {
    let (q, lo) = band(p, r0, r1);
    (
        ConvParams {
            packed_a: WINOGRAD_U_PACKED,
            tile: block,
            wtype: 0,
            ..q
        },
        lo,
    )
}

/// Floats of the scratch parts of `p`'s Winograd bands `b`: no input rows (the Winograd
/// run reads them from the 16-bit planes, [`winograd::run16`]), output rows (of one pass's
/// channels), and the largest band's Winograd scratch followed by the head
/// ([`head_floats`]).
pub(super) fn wino_parts(p: &ConvParams, b: WinoBands) -> (usize, usize, usize) {
    let pm = channels(p, b.mb);
    let yout = (b.mb * b.rows * p.ow) as usize;
    let inner = band_scratch_floats(p, b, p.threads);
    (0, yout.next_multiple_of(16), inner + head_floats(&pm))
}

/// Floats of the largest Winograd band's own scratch (no head) of `p`'s bands `b` run at
/// `threads` threads (one slot for a band whose run is one unit, [`winograd::units`]: its
/// threads share it).
fn band_scratch_floats(p: &ConvParams, b: WinoBands, threads: u64) -> usize {
    bands(&channels(p, b.mb), b.rows)
        .map(|q| {
            let q = ConvParams {
                packed_a: WINOGRAD_U_PACKED,
                tile: b.block,
                wtype: 0,
                threads,
                ..q
            };
            winograd::scratch_bytes(&q).div_ceil(4).next_multiple_of(16)
        })
        .max()
        .unwrap_or(0)
}

/// [`super::conv`] of `p` by Winograd bands `b`: per pass of [`WinoBands::mb`] output
/// channels (the weights of a [`WINOGRAD_PACKED`] `p` transformed into the head of slot 0
/// first), the (image, band) tasks spread over the threads ([`super::spread`]): the band's
/// input rows widened, [`winograd::run`] on the band's geometry, its output rows narrowed
/// into those channels of `y`.
///
/// # Safety
/// As [`super::conv`] (`w` the precomputed matrices of all `m` channels for
/// [`WINOGRAD_U_PACKED`], the OIHW weights for [`WINOGRAD_PACKED`]: f32, or stored reduced
/// by `crate::gemm::lowp::conv::pack` as `p.wtype` says); `sl` the slots of
/// `super::slots::slots` for `b` (slot 0's parts those [`wino_parts`] gives).
pub(super) unsafe fn run_bands(
    t: N16,
    p: &ConvParams,
    b: WinoBands,
    io: super::Io,
    scratch: *mut f32,
    sl: &super::slots::Slots,
) {
    let us = |v: u64| v as usize;
    let (c, h, wd, m, oh, ow) = (us(p.c), us(p.h), us(p.w), us(p.m), us(p.oh), us(p.ow));
    let (xin, yout) = (sl.xin, sl.yout);
    let nb = us(p.oh.max(1).div_ceil(b.rows.max(1)));
    let mut m0 = 0;
    while m0 < m {
        let mc = us(b.mb).min(m - m0);
        let pm = channels(p, mc as u64);
        let u = if p.packed_a == WINOGRAD_PACKED {
            let head = head_floats(&pm);
            let u = scratch.wrapping_add(xin + yout + sl.inner0 - head);
            // SAFETY: rows m0..m0 + mc of the OIHW weights (f32, or reduced as `p.wtype`
            // says: contract); the head (the end of slot 0) holds this pass's 36 matrices
            // ([`wino_parts`] sized it for `b.mb >= mc` channels), 64-aligned (every part a
            // multiple of 16 floats).
            unsafe { winograd::transform_channels(p, io.w.get(), (m0, mc), u) };
            super::Shared(u)
        } else {
            io.w
        };
        let bq = if p.has_bias != 0 {
            io.bias.get().wrapping_add(m0)
        } else {
            io.bias.get()
        };
        let bq = super::Shared(bq);
        super::spread(p, sl, us(p.n) * nb, scratch, |i, slot, threads| {
            let (img, r0) = (i / nb, (i % nb) as u64 * b.rows);
            let r1 = (r0 + b.rows).min(p.oh);
            let (mut q, lo) = band_at(&pm, r0, r1, b.block);
            // One slot when the run is one unit, shared by its threads
            // ([`band_scratch_floats`]).
            q.threads = threads;
            let (hb, ob) = (us(q.h), us(r1 - r0));
            let y = io.y.get();
            let sy = slot.wrapping_add(xin);
            // The band's input rows in place: band row r is plane row lo + r, the rows
            // outside the plane (the pads) read as zeros.
            let x16 = winograd::In16 {
                x: io
                    .x
                    .get()
                    .cast_const()
                    .wrapping_add(img * c * h * wd)
                    .wrapping_offset(lo as isize * wd as isize),
                t,
                cs: h * wd,
                rows: (
                    (-lo).max(0) as isize,
                    (h as i64 - lo).min(hb as i64) as isize,
                ),
            };
            // SAFETY: every range lies in `x`, `y` (band `r0..r1` of image `img`: this
            // task's alone) or the disjoint parts of this thread's slot by the contract and
            // `slots::slots` (sized for the largest band of a pass, the Winograd part for
            // `threads`; the head after slot 0's Winograd part); `u` holds this pass's
            // matrices, `bq` its `mc` biases; `x16` reads the band's rows inside the plane.
            unsafe {
                let (ys, sys) = (Shared(y), Shared(sy));
                if p.accumulate != 0 {
                    // The band's residual (rows r0..r1 of this pass's output planes).
                    let at = y.add(((img * m + m0) * oh + us(r0)) * ow);
                    super::residual::widen_out(t, (at, oh * ow), (sy, ob * ow), mc, ob * ow);
                }
                let inner = slot.add(xin + yout);
                winograd::run16(&q, x16, u.get(), bq.get(), sy, inner);
                if ob == oh && mc == m {
                    // One band and one pass: the output planes are one run in both.
                    let n = m * oh * ow;
                    let dst = std::slice::from_raw_parts_mut(y.add(img * n), n);
                    narrow_spread(t, std::slice::from_raw_parts(sy, n), dst);
                } else {
                    for_each_spread(mc, mc * ob * ow, |mo| {
                        let at = ((img * m + m0 + mo) * oh + us(r0)) * ow;
                        narrow(
                            t,
                            std::slice::from_raw_parts(sys.get().add(mo * ob * ow), ob * ow),
                            std::slice::from_raw_parts_mut(ys.get().add(at), ob * ow),
                        );
                    });
                }
            }
        });
        m0 += mc;
    }
}

#[cfg(test)]
mod tests;
