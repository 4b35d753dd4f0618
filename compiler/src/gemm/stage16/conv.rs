//! Conv on 16-bit data: the output computed in bands of whole output rows. For each image
//! and band, the input rows the band reads (all channels) are widened into f32 scratch, the
//! band runs as a convolution of its own through [`crate::gemm::conv::arenac_conv2d`] (any
//! path: im2col, pointwise, direct, depthwise, and Winograd on precomputed transformed
//! weights for a marked 3 x 3 stride-1 Conv, [`winograd`]; bias and fused activation in its
//! epilogue) into f32 scratch, then narrowed into the output rows. A band's geometry: the input rows
//! `[lo, hi)` it reads, top padding what lies above `lo`, bottom padding implied (rows past
//! `hi` read as zero, as past `h`).

use super::split::{Shared, for_each_spread, narrow_spread, task_width, widen_spread};
use super::{N16, narrow, widen};
use crate::gemm::conv::{ConvParams, arenac_conv2d, mark_packed};

mod blocks;
mod budget;
mod pointwise;
#[cfg(test)]
mod pw_big_tests;
#[cfg(test)]
mod pw_direct_tests;
#[cfg(test)]
mod reduced_tests;
mod residual;
#[cfg(test)]
mod residual_tests;
#[cfg(test)]
mod row_direct_tests;
pub(super) mod slots;
mod winograd;
pub use budget::{
    F32_DIRECT, ONE_SLOT, budget_for_scratch, budgets, budgets_for, config_for_scratch,
    config_for_scratch_for, peak_sizes, scratch_bytes, scratch_sizes, scratch_sizes_for,
};
pub use pointwise::pw_pixels;
use pointwise::{PwRun, pointwise_runs, pw_layout, pw_width};
pub use residual::{fused, residual_ok};
pub use winograd::{WinoBands, marked, unmarked, wino_bands};

/// The geometry of the band of output rows `[r0, r1)` of one image of `p`: its params
/// (`n = 1`) and the first input row it reads (negative inside the top padding). A band is
/// vertically a *valid* convolution: its `h` is exactly the rows its window reads
/// (`(rows - 1) * stride + (kh - 1) * dilation + 1`), padding rows staged as zeros, so every
/// band (but a shorter last one) has one geometry whatever the padding.
pub fn band(p: &ConvParams, r0: u64, r1: u64) -> (ConvParams, i64) {
    let rows = r1.max(r0 + 1) - r0;
    let start = (r0 * p.stride_h) as i64 - p.pad_t as i64;
    let h = (rows - 1) * p.stride_h + (p.kh.max(1) - 1) * p.dil_h + 1;
    let q = ConvParams {
        n: 1,
        h,
        pad_t: 0,
        oh: rows,
        ..*p
    };
    (q, start)
}

/// The im2col tile of band `q` of `p`: the largest whose scratch fits the staging budget (the
/// smallest tile when none does); irrelevant for the paths without a tile.
fn band_tile(q: &ConvParams, budget: u64) -> u64 {
    crate::gemm::conv::conv2d_tile_for_scratch(q, budget as usize)
        .unwrap_or(crate::gemm::conv::CONV_MIN_TILE) as u64
}

/// Output rows per band: as many as fit the staging `budget`, at least one; all rows when
/// the bands would not share one packed-weights layout.
pub fn band_rows(p: &ConvParams, budget: u64) -> u64 {
    let oh = p.oh.max(1);
    if !uniform(p, oh) {
        return oh;
    }
    let per_row = (p.m * p.ow + p.c * p.stride_h * p.w)
        .saturating_mul(4)
        .max(1);
    let rows = (budget / per_row).clamp(1, oh);
    if uniform(p, rows) { rows } else { oh }
}

/// The distinct band geometries of `p` at `rows` rows per band (first, a middle one, last);
/// no allocation (the staged kernels call it per run).
fn bands(p: &ConvParams, rows: u64) -> impl Iterator<Item = ConvParams> {
    let (p, oh) = (*p, p.oh.max(1));
    let r0s = [0, rows, (oh - 1) / rows.max(1) * rows];
    let count = if rows < oh { 3 } else { 1 };
    r0s.into_iter()
        .take(count)
        .map(move |r0| band(&p, r0, (r0 + rows).min(oh)).0)
}

/// The packed-weights layout band `q` reads: its marking, and for the direct kernels which
/// of their two packings (channels-in-lanes groups or 12-row panels: `direct::block_rows`),
/// which the band's geometry decides (a 16 x 64 input plane and an 8 x 64 one differ).
fn layout(mut q: ConvParams) -> (u64, usize) {
    mark_packed(&mut q);
    let direct = q.packed_a == crate::gemm::direct::DIRECT_PACKED;
    (
        q.packed_a,
        if direct {
            crate::gemm::direct::block_rows(&q)
        } else {
            0
        },
    )
}

/// The layout every band of `p` at `rows` rows reads, when they share one.
fn shared_layout(p: &ConvParams, rows: u64) -> Option<(u64, usize)> {
    let mut layouts = bands(p, rows).map(layout);
    let first = layouts.next()?;
    layouts.all(|l| l == first).then_some(first)
}

/// Whether every band at `rows` rows takes the packed-weights layout of the first.
fn uniform(p: &ConvParams, rows: u64) -> bool {
    shared_layout(p, rows).is_some()
}

/// `p` as the weights are prepared for at `budget`, for `crate::gemm::conv::prepare_weights`:
/// where the row kernel runs the whole plane on the 16-bit data ([`row_params`]) its
/// packing, else [`band_weights_params`].
pub fn weights_params(p: &ConvParams, budget: u64) -> ConvParams {
    if pw_direct(p) || pw_big_direct(p) {
        return band_weights_params(p, budget);
    }
    row_params(p).unwrap_or_else(|| band_weights_params(p, budget))
}

/// `p` marked for the direct row kernel on its whole plane (`packed_a` as [`mark_packed`]
/// sets it), when that kernel runs it on the 16-bit planes directly
/// ([`crate::gemm::direct::act16::direct16`]: where the f32 conv runs the row kernel, f32
/// weights, not marked for Winograd); `None` otherwise.
pub fn row_params(p: &ConvParams) -> Option<ConvParams> {
    if p.wtype != 0 || marked(p) || crate::gemm::lowp::conv_weight_type(p).is_some() {
        return None;
    }
    let mut q = *p;
    mark_packed(&mut q);
    crate::gemm::direct::act16::direct16(&q).then_some(q)
}

/// Whether [`conv`] runs `p` by the row kernel on the 16-bit planes, unstaged: [`row_params`]
/// holds and the weights are packed for it (`p.packed_a` as [`weights_params`] gave it).
/// The scratch stays planned as for the staged bands (the planner does not know whether the
/// weights are stored reduced, which the bands then read), unused.
pub fn row_direct(p: &ConvParams) -> bool {
    row_params(p).is_some_and(|q| q.packed_a == p.packed_a)
}

/// `p` as the staged paths' weights are prepared for at `budget` (the first band's layout:
/// `packed_a` as [`mark_packed`] sets it for that band); where [`wino_bands`] runs, `p` as
/// marked (for `crate::gemm::winograd::transform_weights`).
pub fn band_weights_params(p: &ConvParams, budget: u64) -> ConvParams {
    if pw_direct(p) || pw_big_direct(p) {
        // The whole plane on the small-plane kernel's 16-bit tiles, or the GEMM path's.
        return ConvParams {
            packed_a: pw_layout(p),
            ..*p
        };
    }
    if wino_bands(p, budget).is_some() {
        // Winograd bands: the 36 transformed matrices (`winograd::transform_weights`).
        return *p;
    }
    if pw_pixels(p, budget).is_some() {
        return ConvParams {
            packed_a: pw_layout(p),
            ..*p
        };
    }
    let mut q = band(p, 0, band_rows(p, budget).min(p.oh.max(1))).0;
    mark_packed(&mut q);
    ConvParams { n: p.n, ..q }
}

/// `p` with its weights stored reduced (`wtype`, a [`crate::gemm::lowp::WeightType`] code)
/// in the direct kernels' layout (`crate::gemm::lowp::conv::Layout::Direct`, packed for
/// [`weights_params`]) at `budget`, when its bands run the direct kernels as with f32
/// weights: row bands (not Winograd, depthwise or pointwise runs, with either weights) all
/// marked direct with the same packing (the channels-in-lanes layout or the 12-row panels),
/// and the reduced path's per-thread slots fitting the `planned` scratch bytes (the
/// planner sized it for f32 weights: the im2col scratch). `None`: the GEMM path's reduced
/// layout ([`crate::gemm::lowp::mark_conv`]).
pub fn reduced_direct(
    p: &ConvParams,
    budget: u64,
    wtype: u64,
    planned: usize,
) -> Option<ConvParams> {
    let q = ConvParams { wtype, ..*p };
    if wtype == 0 || other_runs(p, budget) || other_runs(&q, budget) {
        return None;
    }
    let direct = crate::gemm::direct::DIRECT_PACKED;
    let shared = shared_layout(p, band_rows(p, budget));
    (shared.is_some_and(|(a, _)| a == direct) && scratch_bytes_at(&q, budget) <= planned)
        .then_some(q)
}

/// Whether `p` at `budget` runs other than in row bands: Winograd bands, depthwise bands or
/// channel blocks, pointwise pixel runs, or the GEMM path's unstaged pointwise kernel.
pub(super) fn other_runs(p: &ConvParams, budget: u64) -> bool {
    wino_bands(p, budget).is_some()
        || dw_bands(p, budget).is_some()
        || dw_block(p, budget).is_some()
        || pw_pixels(p, budget).is_some()
        || pw_big_direct(p)
}

/// Channels per block when a depthwise Conv is staged by whole channel planes (each block a
/// depthwise convolution of its own, its weights and bias a contiguous slice): with one
/// output channel per group, the most whole [`DW_LANES`]-channel blocks of the f32 kernel's
/// lanes whose planes fit the budget (a shorter last block of at least 2 channels: a block
/// of 9 of 144 channels ran as 8 + 1 lanes of 8, MobileNetV2's 56x56 layer at 1.9x f32's
/// time); else the largest divisor (at least 2, so the block stays depthwise) of the group
/// count whose planes fit the budget, else 2 for an even count; `None` (row bands) for
/// other convs.
pub fn dw_block(p: &ConvParams, budget: u64) -> Option<u64> {
    if !p.is_depthwise() {
        return None;
    }
    let g = p.group;
    let mult = p.m / g.max(1);
    let per = ((p.h * p.w + mult * p.oh * p.ow) * 4).max(1);
    let fit = (budget / per).max(2);
    let lanes = (1..=fit.min(g) / DW_LANES)
        .rev()
        .map(|k| k * DW_LANES)
        .find(|b| g % b != 1);
    if mult == 1
        && let Some(b) = lanes
    {
        return Some(b);
    }
    (2..=g).filter(|b| g.is_multiple_of(*b) && *b <= fit).max()
}

/// Channels per block of [`dw_bands`]: the lanes of the f32 depthwise kernel's vectors
/// (`crate::gemm::depthwise`'s 8-channel path).
pub const DW_LANES: u64 = 8;

/// Output rows per band when a depthwise Conv (one output channel per group) is staged by
/// blocks of [`DW_LANES`] channels in bands of output rows: when whole planes of that many
/// channels do not fit the budget ([`dw_block`] would take fewer channels, leaving the f32
/// kernel's lanes idle) and the groups come in whole blocks. As many rows as fit the budget
/// with the input rows they read, at least one; `None` for other convs.
pub fn dw_bands(p: &ConvParams, budget: u64) -> Option<u64> {
    if !p.is_depthwise() || p.m != p.group || !p.group.is_multiple_of(DW_LANES) {
        return None;
    }
    if dw_block(p, budget).is_some_and(|b| b >= DW_LANES) {
        return None;
    }
    let oh = p.oh.max(1);
    let bytes = |rows: u64| {
        let q = band(p, 0, rows.min(oh)).0;
        DW_LANES * (q.h * q.w + rows * p.ow) * 4
    };
    let mut rows = 1;
    while rows < oh && bytes(rows + 1) <= budget {
        rows += 1;
    }
    Some(rows)
}

/// Whether a depthwise `p` runs on its 16-bit planes directly, without staging
/// ([`crate::gemm::depthwise::run16`]: the channel-blocked f32 kernel widening input rows into
/// its ring and narrowing output rows on the stack): `C == M == group` where that kernel runs
/// on this CPU. The planner and the lowering ask the same (one machine: a JIT).
pub fn dw_direct(p: &ConvParams) -> bool {
    p.is_depthwise() && crate::gemm::depthwise::direct16(p)
}

/// Whether a pointwise `p` runs on its 16-bit planes directly, without staging
/// ([`crate::gemm::pw_small::run16`]: the small-plane kernel's tiles widening their input
/// rows on the stack and narrowing their outputs in registers): where the whole plane takes
/// that kernel in f32 and its 16-bit tiles run on this CPU. The planner and the lowering ask
/// the same (one machine: a JIT).
pub fn pw_direct(p: &ConvParams) -> bool {
    p.is_pointwise()
        && p.group <= 1
        && crate::gemm::pw_small::direct16(&ConvParams {
            packed_a: pw_layout(p),
            ..*p
        })
}

/// Whether a pointwise `p` the GEMM path takes in f32 runs on its 16-bit planes directly,
/// without staging ([`crate::gemm::conv::act16::run16`]: B rows widened a panel pair at a
/// time on the stack, the output tile accumulated in f32 on the stack and narrowed), with
/// f32 weights or weights stored reduced (`--weights`); `ARENAC_PWBIG16_DIRECT=0` stages it.
/// The planner and the lowering ask the same.
pub fn pw_big_direct(p: &ConvParams) -> bool {
    p.is_pointwise()
        && p.group <= 1
        && !pw_direct(p)
        && pw_layout(p) == 1
        && crate::gemm::conv::act16::enabled()
}

/// Floats of the scratch parts of the staged paths (every path but [`dw_direct`] and
/// [`pw_direct`]) at one
/// thread, slot 0's at several ([`slots::slots`]): input rows, output rows, the inner
/// kernel's scratch.
fn staged_parts(p: &ConvParams, budget: u64) -> (usize, usize, usize) {
    let up = |f: u64| (f as usize).next_multiple_of(16);
    if let Some(b) = wino_bands(p, budget) {
        return winograd::wino_parts(p, b);
    }
    if let Some(rows) = dw_bands(p, budget) {
        let q = band(p, 0, rows.min(p.oh.max(1))).0;
        return (up(DW_LANES * q.h * q.w), up(DW_LANES * rows * p.ow), 0);
    }
    if let Some(b) = dw_block(p, budget) {
        let mult = p.m / p.group.max(1);
        return (up(b * p.h * p.w), up(b * mult * p.oh * p.ow), 0);
    }
    if let Some(npix) = pw_pixels(p, budget) {
        let wb = pw_width(p, npix);
        return (up(p.c * wb), up(p.m * wb), 0);
    }
    row_parts(p, budget)
}

/// [`staged_parts`] of the bands of whole output rows ([`band_rows`]).
fn row_parts(p: &ConvParams, budget: u64) -> (usize, usize, usize) {
    let up = |f: u64| (f as usize).next_multiple_of(16);
    let rows = band_rows(p, budget);
    let xin = bands(p, rows)
        .map(|q| up(q.c * q.h * q.w))
        .max()
        .unwrap_or(0);
    let yout = up(p.m * rows * p.ow);
    (xin, yout, slots::row_inner(p, rows, budget, p.threads))
}

/// Scratch bytes [`conv`] uses for `p` at staging `budget`: the slots of [`slots::slots`]
/// (one at one thread: the parts of [`staged_parts`]), none for [`dw_direct`] and
/// [`pw_direct`].
pub fn scratch_bytes_at(p: &ConvParams, budget: u64) -> usize {
    if dw_direct(p) || pw_direct(p) || pw_big_direct(p) {
        return 0;
    }
    staged_bytes_at(p, budget)
}

/// Scratch bytes [`staged`] uses for `p` at staging `budget`.
pub(super) fn staged_bytes_at(p: &ConvParams, budget: u64) -> usize {
    if let Some(b) = blocks::plan(p, budget) {
        return b.floats() * 4;
    }
    slots::slots(p, budget).floats() * 4
}

/// `y = act(conv(x, w) + bias)` on 16-bit `x` and `y`, band by band; with `p.accumulate`
/// ([`fused`]: a fused residual) `y` holds the residual on entry and
/// `y = act(conv(x, w) + y + bias)` ([`residual`]).
///
/// # Safety
/// `p` describes the whole node (constant weights prepared by
/// `crate::gemm::conv::prepare_weights` for [`weights_params`] at `budget`, or by
/// `crate::gemm::winograd::transform_weights` where [`wino_bands`] runs on precomputed
/// weights, the OIHW f32 weights where it runs on weights transformed per run); `x` readable
/// for `n*c*h*w` values, `y` writable for `n*m*oh*ow`, `w`/`bias` as [`arenac_conv2d`] reads
/// them; `scratch` writable for [`scratch_bytes_at`] bytes at `budget`, 64-aligned; `y` and
/// `scratch` overlap nothing else.
#[allow(clippy::too_many_arguments)]
pub unsafe fn conv(
    t: N16,
    p: &ConvParams,
    budget: u64,
    x: *const u16,
    w: *const f32,
    bias: *const f32,
    y: *mut u16,
    scratch: *mut f32,
) {
    if dw_direct(p) {
        // SAFETY: the caller's contract (no scratch used).
        unsafe { crate::gemm::depthwise::run16(t, p, x, w, bias, y) };
        return;
    }
    if pw_direct(p) {
        // SAFETY: the caller's contract (`p.packed_a` and the weights as `weights_params`
        // gives them: the small-plane kernel's panels; no scratch used).
        unsafe { crate::gemm::pw_small::run16(t, p, x, w, bias, y) };
        return;
    }
    if pw_big_direct(p) {
        // SAFETY: the caller's contract (the weights as `weights_params` gives them: packed
        // for the GEMM core, or stored reduced in its layout; no scratch used).
        unsafe { crate::gemm::conv::act16::run16(t, p, x, w, bias, y) };
        return;
    }
    if row_direct(p) {
        // SAFETY: the caller's contract (the weights as `weights_params` gives them: the
        // row kernel's 12-row panels; no scratch used).
        unsafe { crate::gemm::direct::act16::run16(t, p, x, w, bias, y) };
        return;
    }
    // SAFETY: the caller's contract, passed on.
    unsafe { staged(t, p, budget, x, w, bias, y, scratch) };
}

/// The operands of a staged Conv, shared by the tasks of its job (each writes its own rows
/// of `y` and its own scratch slot).
#[derive(Clone, Copy)]
pub(super) struct Io {
    pub x: Shared<u16>,
    pub w: Shared<f32>,
    pub bias: Shared<f32>,
    pub y: Shared<u16>,
}

/// Runs `f(task, slot, threads)` for each of the `tasks` tasks of `p`: on the threads
/// `par::width` gives the whole node (each task in the scratch slot of its thread, its inner
/// kernel on `threads = 1`), or one after the other in slot 0 (the inner kernel on the
/// node's threads) when the slots or the work are too few.
fn spread(
    p: &ConvParams,
    sl: &slots::Slots,
    tasks: usize,
    scratch: *mut f32,
    f: impl Fn(usize, *mut f32, u64) + Sync,
) {
    let width = task_width(tasks, sl.count, slots::cost_ns(p));
    let s = Shared(scratch);
    let threads = if width > 1 { 1 } else { p.threads };
    crate::par::for_each(tasks, width, |i, th| {
        f(i, s.get().wrapping_add(sl.base(th)), threads)
    });
}

/// [`conv`] through f32 staging (every path but [`dw_direct`]).
///
/// # Safety
/// As [`conv`], `scratch` as [`staged_bytes_at`] sizes it.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn staged(
    t: N16,
    p: &ConvParams,
    budget: u64,
    x: *const u16,
    w: *const f32,
    bias: *const f32,
    y: *mut u16,
    scratch: *mut f32,
) {
    let sl = slots::slots(p, budget);
    let io = Io {
        x: Shared::of(x),
        w: Shared::of(w),
        bias: Shared::of(bias),
        y: Shared(y),
    };
    if let Some(rows) = dw_bands(p, budget) {
        // SAFETY: the caller's contract, passed on.
        unsafe { depthwise_bands(t, p, rows, io, scratch, &sl) };
        return;
    }
    if let Some(b) = dw_block(p, budget) {
        // SAFETY: the caller's contract, passed on.
        unsafe { depthwise_blocks(t, p, b, io, scratch, &sl) };
        return;
    }
    if let Some(b) = wino_bands(p, budget) {
        // SAFETY: the caller's contract, passed on; the slots of [`slots::slots`].
        unsafe { winograd::run_bands(t, p, b, io, scratch, &sl) };
        return;
    }
    let rows = band_rows(p, budget);
    // Weights stored in a reduced type keep their marking (the GEMM path, read widened); in
    // the direct kernels' layout ([`reduced_direct`], `p.wtype` set) the f32 bands' one.
    let packed = if crate::gemm::lowp::conv_weight_type(p).is_some() {
        p.packed_a
    } else {
        band_weights_params(p, budget).packed_a
    };
    if let Some(npix) = pw_pixels(p, budget) {
        let run = PwRun {
            npix,
            packed,
            budget,
            xin: sl.xin,
            yout: sl.yout,
        };
        // SAFETY: the caller's contract, passed on.
        unsafe { pointwise_runs(t, p, &run, io, scratch, &sl) };
        return;
    }
    if let Some(b) = blocks::plan(p, budget) {
        // SAFETY: the caller's contract, passed on; the slots of [`blocks::plan`]
        // ([`staged_bytes_at`]).
        unsafe { blocks::run(t, p, &b, io, scratch) };
        return;
    }
    let (c, h, wd, m, oh, ow) = (
        p.c as usize,
        p.h as usize,
        p.w as usize,
        p.m as usize,
        p.oh as usize,
        p.ow as usize,
    );
    let (xin, yout) = (sl.xin, sl.yout);
    let nb = p.oh.max(1).div_ceil(rows.max(1)) as usize;
    spread(p, &sl, p.n as usize * nb, scratch, |i, slot, threads| {
        let (img, r0) = (i / nb, (i % nb) as u64 * rows);
        let r1 = (r0 + rows).min(p.oh);
        let (mut q, lo) = band(p, r0, r1);
        q.packed_a = packed;
        q.threads = threads;
        q.tile = band_tile(&q, budget);
        let (hb, ob) = (q.h as usize, (r1 - r0) as usize);
        let (x, y) = (io.x.get().cast_const(), io.y.get());
        // SAFETY: every range lies in `x`, `y` (band `r0..r1` of image `img`: this task's
        // alone) or the disjoint parts of this thread's slot by the contract and
        // [`slots::slots`] (sized for the largest band, the inner part for `threads`).
        unsafe {
            let sx = slot;
            // A band with the pool to itself (one task) widens and narrows on every thread.
            if lo == 0 && hb == h {
                // The band reads whole planes: all channels are one run in both.
                let n = c * h * wd;
                let src = std::slice::from_raw_parts(x.add(img * n), n);
                widen_spread(t, src, std::slice::from_raw_parts_mut(sx, n));
            } else {
                let (xs, ss) = (Shared::of(x), Shared(sx));
                for_each_spread(c, c * hb * wd, |ch| {
                    let plane = xs.get().add((img * c + ch) * h * wd);
                    widen_rows(t, plane, h, wd, lo, hb, ss.get().add(ch * hb * wd));
                });
            }
            let sy = slot.add(xin);
            if p.accumulate != 0 {
                // The band's residual (rows r0..r1 of every output plane) into its output.
                let at = y.add(img * m * oh * ow + r0 as usize * ow);
                residual::widen_out(t, (at, oh * ow), (sy, ob * ow), m, ob * ow);
            }
            let inner = slot.add(xin + yout);
            arenac_conv2d(&q, sx, io.w.get(), io.bias.get(), sy, inner);
            if ob == oh {
                // One band: the output planes are one run in both.
                let n = m * oh * ow;
                let dst = std::slice::from_raw_parts_mut(y.add(img * n), n);
                narrow_spread(t, std::slice::from_raw_parts(sy, n), dst);
                return;
            }
            let (ys, ss) = (Shared(y), Shared(sy));
            for_each_spread(m, m * ob * ow, |mo| {
                let dst = ys.get().add(((img * m + mo) * oh + r0 as usize) * ow);
                let dst = std::slice::from_raw_parts_mut(dst, ob * ow);
                let src = std::slice::from_raw_parts(ss.get().add(mo * ob * ow), ob * ow);
                narrow(t, src, dst);
            });
        }
    });
}

/// [`conv`] of a depthwise `p` ([`dw_bands`]) by blocks of [`DW_LANES`] channels in bands
/// of `rows` output rows: each band's input rows (zeros above and below the plane) widened,
/// convolved as a depthwise convolution of its own ([`band`]'s geometry), narrowed; the
/// (image, block, band) tasks spread over the threads.
///
/// # Safety
/// As [`conv`]; `sl` the slots of [`slots::slots`].
unsafe fn depthwise_bands(
    t: N16,
    p: &ConvParams,
    rows: u64,
    io: Io,
    scratch: *mut f32,
    sl: &slots::Slots,
) {
    let lanes = DW_LANES as usize;
    let (h, wd, oh, ow) = (p.h as usize, p.w as usize, p.oh as usize, p.ow as usize);
    let kk = (p.kh * p.kw) as usize;
    let nb = p.oh.max(1).div_ceil(rows.max(1)) as usize;
    let blocks = (p.group / DW_LANES) as usize;
    let tasks = p.n as usize * blocks * nb;
    spread(p, sl, tasks, scratch, |i, slot, threads| {
        let (img, ch0, r0) = (
            i / (blocks * nb),
            (i / nb) % blocks * lanes,
            (i % nb) as u64 * rows,
        );
        let r1 = (r0 + rows).min(p.oh);
        let (q, lo) = band(p, r0, r1);
        let q = ConvParams {
            c: DW_LANES,
            m: DW_LANES,
            group: DW_LANES,
            packed_a: 0,
            tile: 0,
            threads,
            ..q
        };
        let (hb, ob) = (q.h as usize, (r1 - r0) as usize);
        let (x, y, bias) = (io.x.get().cast_const(), io.y.get(), io.bias.get());
        // SAFETY: channels `ch0..ch0 + 8` of image `img` lie in `x` and `y` (the groups come
        // in whole blocks), rows `r0..r1` of them this task's alone; rows `lo..lo + hb` are
        // read only inside `0..h`; this thread's slot holds one band ([`slots::slots`]);
        // the block's weights and bias are rows `ch0..` of the OIHW weights and of the bias.
        unsafe {
            for ch in 0..lanes {
                let plane = x.add((img * p.c as usize + ch0 + ch) * h * wd);
                widen_rows(t, plane, h, wd, lo, hb, slot.add(ch * hb * wd));
            }
            let sy = slot.add(sl.xin);
            let bq = if p.has_bias != 0 { bias.add(ch0) } else { bias };
            let w = io.w.get().add(ch0 * kk);
            arenac_conv2d(&q, slot, w, bq, sy, slot.add(sl.xin + sl.yout));
            for ch in 0..lanes {
                let dst = y.add(((img * p.m as usize + ch0 + ch) * oh + r0 as usize) * ow);
                narrow(
                    t,
                    std::slice::from_raw_parts(sy.add(ch * ob * ow), ob * ow),
                    std::slice::from_raw_parts_mut(dst, ob * ow),
                );
            }
        }
    });
}

/// [`conv`] of a depthwise `p` by blocks of `b` channels (whole planes), the (image, block)
/// tasks spread over the threads.
///
/// # Safety
/// As [`conv`]; `sl` the slots of [`slots::slots`].
unsafe fn depthwise_blocks(
    t: N16,
    p: &ConvParams,
    b: u64,
    io: Io,
    scratch: *mut f32,
    sl: &slots::Slots,
) {
    let mult = p.m / p.group.max(1);
    let (hw, ohw) = ((p.h * p.w) as usize, (p.oh * p.ow) as usize);
    let kk = (p.kh * p.kw) as usize;
    let nblk = p.group.div_ceil(b.max(1)) as usize;
    spread(p, sl, p.n as usize * nblk, scratch, |i, slot, threads| {
        let (img, ch0) = (i / nblk, (i % nblk) * b as usize);
        // A shorter last block (at least 2 channels, [`dw_block`]).
        let b = b.min(p.group - ch0 as u64);
        let q = ConvParams {
            n: 1,
            c: b,
            m: b * mult,
            group: b,
            packed_a: 0,
            tile: 0,
            threads,
            ..*p
        };
        let (bx, by) = (b as usize * hw, (b * mult) as usize * ohw);
        let o0 = ch0 * mult as usize;
        let (x, y, bias) = (io.x.get().cast_const(), io.y.get(), io.bias.get());
        // SAFETY: channel block `ch0..ch0+b` of image `img` lies in `x` and `y` (this task's
        // alone); its weights and bias are rows `o0..` of the OIHW weights and of the bias;
        // this thread's slot holds one block ([`slots::slots`]).
        unsafe {
            {
                let src = std::slice::from_raw_parts(x.add((img * p.c as usize + ch0) * hw), bx);
                widen(t, src, std::slice::from_raw_parts_mut(slot, bx));
            }
            let sy = slot.add(sl.xin);
            let bq = if p.has_bias != 0 { bias.add(o0) } else { bias };
            let w = io.w.get().add(o0 * kk);
            arenac_conv2d(&q, slot, w, bq, sy, slot.add(sl.xin + sl.yout));
            let dst = y.add((img * p.m as usize + o0) * ohw);
            narrow(
                t,
                std::slice::from_raw_parts(sy, by),
                std::slice::from_raw_parts_mut(dst, by),
            );
        }
    });
}

/// Widens rows `lo..lo + hb` of a plane of `h` rows of `wd` values into `dst` (`hb * wd`
/// floats): the rows inside `0..h` in one run (they are contiguous in both), zeros for the
/// rows above and below it.
///
/// # Safety
/// `plane` readable for `h * wd` values, `dst` writable for `hb * wd` floats, disjoint.
unsafe fn widen_rows(
    t: N16,
    plane: *const u16,
    h: usize,
    wd: usize,
    lo: i64,
    hb: usize,
    dst: *mut f32,
) {
    let first = lo.clamp(0, h as i64) as usize;
    let end = (lo + hb as i64).clamp(0, h as i64) as usize;
    let above = (first as i64 - lo).clamp(0, hb as i64) as usize;
    let inside = end.saturating_sub(first).min(hb - above);
    // SAFETY: `above + inside <= hb` rows of `dst`; rows `first..end` lie in the plane.
    unsafe {
        std::slice::from_raw_parts_mut(dst, above * wd).fill(0.0);
        if inside > 0 {
            widen(
                t,
                std::slice::from_raw_parts(plane.add(first * wd), inside * wd),
                std::slice::from_raw_parts_mut(dst.add(above * wd), inside * wd),
            );
        }
        let done = above + inside;
        std::slice::from_raw_parts_mut(dst.add(done * wd), (hb - done) * wd).fill(0.0);
    }
}
