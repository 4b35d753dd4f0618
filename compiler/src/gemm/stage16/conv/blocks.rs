//! Row bands of a staged Conv with reduced weights on the channels-in-lanes direct kernel
//! (`crate::gemm::direct::cl`, [`super::reduced_direct`]) taken block by block of output
//! channels: a task widens one block's weights (and int8 scales) into its thread's slot
//! once, then walks its (image, band) items: each band's input rows widened, the block's
//! channels convolved by the f32 kernel on the widened weights (a Conv of its own of the
//! block's channels in the kernel's layout for them, which sums each output as the whole
//! Conv's kernel does), narrowed. The band order ([`super::staged`]) widens every group of
//! the weights again in every band (the direct kernel's per-task widening: ResNet-50's
//! layer1 3x3 in 14 bands widened its weights 14 times), and its slot of a whole 64-channel
//! group did not fit the scratch planned for the f32 bands at ResNet-50's first 3x3/s2 and
//! 1x1/s2 (one-row bands: the reduced GEMM path instead, widening all the weights 28 times).
//! Here the input rows are widened once per block instead, blocks of 64, 32 or 16 channels
//! (whichever fits the scratch planned for the f32 bands, [`plan`]), taken where that
//! widens fewer values or the band order's slots do not fit.

use super::super::split::{Shared, for_each_spread, task_width, widen_spread};
use super::super::{N16, narrow};
use super::{Io, band, band_rows, bands, residual, slots, widen_rows};
use crate::gemm::conv::{ConvParams, mark_packed};
use crate::gemm::direct::DIRECT_PACKED;
use crate::gemm::lowp::conv::{Layout, Reduced};

/// Output channels of a group of the channels-in-lanes packing
/// (`crate::gemm::direct::block_rows`).
const GROUP: usize = 64;

/// The block order of a staged Conv ([`plan`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Blocks {
    /// Output rows per band ([`band_rows`]).
    pub rows: u64,
    /// Output channels per block (64, 32 or 16; the last block may be shorter).
    pub b: usize,
    /// Blocks.
    pub groups: usize,
    /// Runs each block's (image, band) items are cut into (one task each).
    pub chunks: usize,
    /// Floats of a slot's input rows, output rows, widened weights.
    pub xin: usize,
    pub yout: usize,
    pub wts: usize,
    /// Slots (one per thread the tasks spread over).
    pub count: usize,
}

impl Blocks {
    /// Floats of one slot.
    pub fn slot(&self) -> usize {
        self.xin + self.yout + self.wts
    }

    /// Floats of all slots.
    pub fn floats(&self) -> usize {
        self.slot() * self.count
    }
}

/// The block order for `p` (weights stored reduced: `p.wtype`) at `budget`, when its row
/// bands all run the channels-in-lanes kernel with f32 weights and either the band order's
/// slots (one 64-channel group of widened weights each) do not fit the scratch the f32
/// bands plan at `budget`, or the block order widens fewer values (weights counted twice:
/// int8 widens and then scales). Its slots fit that scratch: the blocks are the widest
/// (64, 32 or 16 channels) that do. `None`: the band order (or, when neither fits, no
/// direct bands: `super::reduced_direct`).
pub(super) fn plan(p: &ConvParams, budget: u64) -> Option<Blocks> {
    if p.wtype == 0 || p.group > 1 || !(p.m as usize).is_multiple_of(16) || p.m == 0 {
        return None;
    }
    let f = ConvParams { wtype: 0, ..*p };
    if super::other_runs(&f, budget) {
        return None;
    }
    let rows = band_rows(&f, budget);
    let cl = bands(&f, rows).all(|mut q| {
        mark_packed(&mut q);
        q.packed_a == DIRECT_PACKED && crate::gemm::direct::block_rows(&q) == GROUP
    });
    if !cl {
        return None;
    }
    let sl = slots::slots(&f, budget);
    let avail = sl.floats() / sl.count.max(1);
    let (m, k, ow) = (p.m as usize, p.k(), p.ow as usize);
    let up = |f: usize| f.next_multiple_of(16);
    let fits = |b: usize| sl.xin + up(b * rows as usize * ow) + up(b * k) <= avail;
    let b = [GROUP, 32, 16].into_iter().find(|&b| b <= m && fits(b))?;
    let groups = m.div_ceil(b);
    let oh = p.oh.max(1);
    let items = p.n as usize * oh.div_ceil(rows.max(1)) as usize;
    let count = sl.count.max(1);
    let chunks = if count < 2 || groups.is_multiple_of(count) {
        1
    } else {
        count.min(items)
    };
    let q = band(p, 0, rows.min(oh)).0;
    let input = (q.c * q.h * q.w) as usize;
    let weights = m * k;
    // Values widened: per item the input and all weights, or per block and item the input
    // and per task the block's weights.
    let old = items * (input + 2 * weights);
    let new = groups * items * input + chunks * 2 * weights;
    let banded = slots::slots(p, budget).floats() <= sl.floats();
    (!banded || new < old).then_some(Blocks {
        rows,
        b,
        groups,
        chunks,
        xin: sl.xin,
        yout: up(b * rows as usize * ow),
        wts: up(b * k),
        count,
    })
}

/// Widens the weights of output channels `o0 .. o0 + bb` (within one group of the
/// channels-in-lanes packing, multiples of 16) from `r` (packed for `m x k`) into `dst` in
/// the kernel's packing for `bb` channels: per K step the block's `bb` weights side by side.
///
/// # Safety
/// `r` holds `m x k` weights in the direct layout; `dst` writable for `bb * k` floats.
unsafe fn widen_block(r: &Reduced, (m, k): (usize, usize), o0: usize, bb: usize, dst: *mut f32) {
    let (g, j0) = (o0 / GROUP, o0 % GROUP / 16);
    let nbg = (m / 16 - g * 4).min(4);
    let base = g * GROUP * k;
    // SAFETY: group g's `16 nbg k` elements and channels `o0 .. o0 + bb` exist; `dst`
    // holds `bb k` floats (the contract).
    unsafe {
        if bb == 16 * nbg {
            // The whole group: one run.
            r.widen(base, bb * k, dst, (o0, bb));
            return;
        }
        for s in 0..k {
            r.widen(base + (s * nbg + j0) * 16, bb, dst.add(s * bb), (o0, bb));
        }
    }
}

/// The bands of `p` in the block order `b` ([`plan`]).
///
/// # Safety
/// As [`super::staged`] with reduced weights in the direct layout (`p.wtype`, `w` packed by
/// `crate::gemm::lowp::conv::pack` for `packed`), `scratch` writable for `b.floats()`
/// floats.
pub(super) unsafe fn run(t: N16, p: &ConvParams, b: &Blocks, io: Io, scratch: *mut f32) {
    let Some(r) = Reduced::of(p, io.w.get(), Layout::Direct) else {
        return;
    };
    let (c, h, wd, m, oh, ow) = (
        p.c as usize,
        p.h as usize,
        p.w as usize,
        p.m as usize,
        p.oh as usize,
        p.ow as usize,
    );
    let (k, rows, chunks) = (p.k(), b.rows, b.chunks);
    let nb = p.oh.max(1).div_ceil(rows.max(1)) as usize;
    let items = p.n as usize * nb;
    let tasks = b.groups * chunks;
    let width = task_width(tasks, b.count, slots::cost_ns(p));
    let threads = if width > 1 { 1 } else { p.threads };
    let s = Shared(scratch);
    crate::par::for_each(tasks, width, |task, th| {
        let (gi, ch) = (task / chunks, task % chunks);
        let o0 = gi * b.b;
        let bb = b.b.min(m - o0);
        let sx = s.get().wrapping_add(th * b.slot());
        let sy = sx.wrapping_add(b.xin);
        let wv = sy.wrapping_add(b.yout);
        // SAFETY: the block's weights exist (`p.m` a multiple of 16, blocks within groups);
        // the slot of thread th < width <= count holds `bb k` floats after its rows.
        unsafe { widen_block(&r, (m, k), o0, bb, wv) };
        let bias = io.bias.get().cast_const();
        let bq = if p.has_bias != 0 {
            bias.wrapping_add(o0)
        } else {
            bias
        };
        for i in items * ch / chunks..items * (ch + 1) / chunks {
            let (img, r0) = (i / nb, (i % nb) as u64 * rows);
            let r1 = (r0 + rows).min(p.oh);
            let (mut q, lo) = band(p, r0, r1);
            q.m = bb as u64;
            q.wtype = 0;
            q.packed_a = DIRECT_PACKED;
            q.threads = threads;
            let (hb, ob) = (q.h as usize, (r1 - r0) as usize);
            let (x, y) = (io.x.get().cast_const(), io.y.get());
            // SAFETY: every range lies in `x`, `y` (rows r0..r1 of channels o0..o0 + bb of
            // image img: this task's alone) or the disjoint parts of this thread's slot
            // (input rows, output rows, widened weights) by the contract and [`plan`].
            unsafe {
                if lo == 0 && hb == h {
                    let n = c * h * wd;
                    let src = std::slice::from_raw_parts(x.add(img * n), n);
                    widen_spread(t, src, std::slice::from_raw_parts_mut(sx, n));
                } else {
                    let (xs, ss) = (Shared::of(x), Shared(sx));
                    for_each_spread(c, c * hb * wd, |cc| {
                        let plane = xs.get().add((img * c + cc) * h * wd);
                        widen_rows(t, plane, h, wd, lo, hb, ss.get().add(cc * hb * wd));
                    });
                }
                let yb = y.add((img * m + o0) * oh * ow + r0 as usize * ow);
                if p.accumulate != 0 {
                    residual::widen_out(t, (yb, oh * ow), (sy, ob * ow), bb, ob * ow);
                }
                // The f32 channels-in-lanes kernel (every band takes it: [`plan`]) on the
                // widened block, no scratch.
                crate::gemm::direct::run_cl(&q, sx, wv, bq, sy);
                let (ys, ss) = (Shared(yb), Shared(sy));
                for_each_spread(bb, bb * ob * ow, |mo| {
                    let dst = std::slice::from_raw_parts_mut(ys.get().add(mo * oh * ow), ob * ow);
                    let src = std::slice::from_raw_parts(ss.get().add(mo * ob * ow), ob * ow);
                    narrow(t, src, dst);
                });
            }
        }
    });
}
