//! A staged pointwise Conv (`1 x 1`, stride 1, no padding, no groups) by runs of pixels:
//! the planes are flat, so a band is any run of pixels across row ends, one contiguous
//! widen per input channel and one narrow per output channel. Runs are whole tiles of the
//! f32 kernel the whole plane takes (12 pixels for [`crate::gemm::pw_small`], 16-column
//! panels for the GEMM path), where bands of whole rows left 7- or 14-pixel bands that fill
//! tiles of 12 or panels of 16 partly (7x7 and 14x14 planes). Each run is a pointwise
//! convolution of its own (`h = 1`, `w` = the run) in the layout of the whole plane.
//! Where the small-plane kernel's 16-bit tiles run (`super::pw_direct`), a plane it takes
//! whole is not staged at all (`crate::gemm::pw_small::run16`); these runs serve the other
//! CPUs, the GEMM path's planes, and the tests' reference.

use super::super::split::{Shared, for_each_spread, narrow_spread, widen_spread};
use super::{N16, narrow, row_parts, widen};
use crate::gemm::NR;
use crate::gemm::conv::{ConvParams, arenac_conv2d, mark_packed};

/// Pixels per run of a pointwise `p` at staging `budget`: the most whole tiles (of 48
/// pixels, else of 12 for the small-plane kernel or 16 for the GEMM path) whose input and
/// output fit the budget, at least one tile (all pixels of a smaller plane); `None` for
/// other convs, or where the runs' scratch would exceed that of bands of whole rows at the
/// same budget (the planner's sizes never grow).
pub fn pw_pixels(p: &ConvParams, budget: u64) -> Option<u64> {
    if !p.is_pointwise() || p.group > 1 || p.n == 0 {
        return None;
    }
    let pixels = (p.h * p.w).max(1);
    let unit = if pw_layout(p) == crate::gemm::pw_small::PW_SMALL_PACKED {
        12
    } else {
        NR as u64
    };
    let fit = budget / ((p.c + p.m) * 4).max(1);
    let step = if fit >= 48 { 48 } else { unit };
    let npix = (fit / step * step).max(unit).min(pixels);
    let (a, b, c) = row_parts(p, budget);
    let up = |f: u64| (f as usize).next_multiple_of(16);
    let wb = pw_width(p, npix);
    (up(p.c * wb) + up(p.m * wb) <= a + b + c).then_some(npix)
}

/// The layout the whole plane's weights take in f32 ([`mark_packed`] of `p`).
pub(super) fn pw_layout(p: &ConvParams) -> u64 {
    let mut q = ConvParams { packed_a: 0, ..*p };
    mark_packed(&mut q);
    q.packed_a
}

/// Pixels of the staging rows of a run of `npix`: rounded up to whole 16-column panels, so
/// the GEMM path (f32 weights, or weights stored reduced: known to the lowering, not to the
/// planner) never copies a partial panel into scratch of its own.
pub(super) fn pw_width(_p: &ConvParams, npix: u64) -> u64 {
    npix.next_multiple_of(NR as u64)
}

/// How [`pointwise_runs`] cuts and runs `p`.
pub(super) struct PwRun {
    /// Pixels per run ([`pw_pixels`]).
    pub npix: u64,
    /// The weights' layout (`ConvParams::packed_a` of every run).
    pub packed: u64,
    /// The staging budget (the im2col tile of the GEMM path's runs).
    pub budget: u64,
    /// Floats of the input and output parts of the scratch.
    pub xin: usize,
    pub yout: usize,
}

/// `y = act(conv(x, w) + bias)` of a pointwise `p` run by run: a run's pixels of every
/// input channel widened into rows of [`pw_width`] floats (the padding zeroed for the GEMM
/// path; the small-plane kernel reads only the run), convolved, narrowed; the (image, run)
/// tasks spread over the threads ([`super::spread`]).
///
/// # Safety
/// As [`super::conv`], with `run` from [`pw_pixels`] at the budget the weights and scratch
/// were sized for, `sl` the slots of `super::slots::slots`.
pub(super) unsafe fn pointwise_runs(
    t: N16,
    p: &ConvParams,
    run: &PwRun,
    io: super::Io,
    scratch: *mut f32,
    sl: &super::slots::Slots,
) {
    let (c, m) = (p.c as usize, p.m as usize);
    let pixels = (p.h * p.w) as usize;
    let small = run.packed == crate::gemm::pw_small::PW_SMALL_PACKED;
    let npix = run.npix as usize;
    let nr = pixels.div_ceil(npix.max(1));
    super::spread(p, sl, p.n as usize * nr, scratch, |i, slot, threads| {
        let (img, p0) = (i / nr, (i % nr) * npix);
        let nb = npix.min(pixels - p0);
        let wb = if small { nb } else { nb.next_multiple_of(NR) };
        let mut q = ConvParams {
            n: 1,
            h: 1,
            w: wb as u64,
            oh: 1,
            ow: wb as u64,
            packed_a: run.packed,
            threads,
            ..*p
        };
        q.tile = super::band_tile(&q, run.budget);
        let (x, y, w, bias) = (
            io.x.get().cast_const(),
            io.y.get(),
            io.w.get().cast_const(),
            io.bias.get().cast_const(),
        );
        // SAFETY: the run's pixels of every channel of image `img` lie in `x` and `y` (this
        // task's alone); this thread's slot holds `c` and `m` rows of `wb <= pw_width(npix)`
        // floats ([`super::staged_parts`]), the inner kernel needs none (whole panels, or none).
        unsafe {
            if wb == pixels {
                // The whole plane unpadded (squeeze-excitation convs on 1x1 planes): the
                // image's channels are one run in `x`, in the scratch and in `y`.
                let src = std::slice::from_raw_parts(x.add(img * c * pixels), c * pixels);
                widen_spread(t, src, std::slice::from_raw_parts_mut(slot, c * pixels));
                let sy = slot.add(run.xin);
                if p.accumulate != 0 {
                    let at = y.add(img * m * pixels);
                    super::residual::widen_out(t, (at, pixels), (sy, pixels), m, pixels);
                }
                arenac_conv2d(&q, slot, w, bias, sy, sy.add(run.yout));
                narrow_spread(
                    t,
                    std::slice::from_raw_parts(sy, m * pixels),
                    std::slice::from_raw_parts_mut(y.add(img * m * pixels), m * pixels),
                );
                return;
            }
            // A run with the pool to itself (one task) widens and narrows on every thread.
            let (xs, ys, ss) = (Shared::of(x), Shared(y), Shared(slot));
            for_each_spread(c, c * nb, |ch| {
                let src =
                    std::slice::from_raw_parts(xs.get().add((img * c + ch) * pixels + p0), nb);
                let dst = std::slice::from_raw_parts_mut(ss.get().add(ch * wb), wb);
                widen(t, src, &mut dst[..nb]);
                dst[nb..].fill(0.0);
            });
            let sy = slot.add(run.xin);
            if p.accumulate != 0 {
                // The run's residual (its pixels of every output plane) into its output.
                let at = y.add(img * m * pixels + p0);
                super::residual::widen_out(t, (at, pixels), (sy, wb), m, nb);
            }
            arenac_conv2d(&q, slot, w, bias, sy, sy.add(run.yout));
            let sys = Shared(sy);
            for_each_spread(m, m * nb, |mo| {
                let dst = ys.get().add((img * m + mo) * pixels + p0);
                narrow(
                    t,
                    std::slice::from_raw_parts(sys.get().add(mo * wb), nb),
                    std::slice::from_raw_parts_mut(dst, nb),
                );
            });
        }
    });
}
