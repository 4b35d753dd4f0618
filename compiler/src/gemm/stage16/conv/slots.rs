//! The scratch slots of a staged Conv at several threads: its tasks (the images' row bands,
//! pixel runs, channel blocks, depthwise bands, Winograd bands) go to the threads, each
//! running its task in the slot of its thread with the inner f32 kernel on one thread. Slot
//! 0 is the single-thread layout ([`super::staged_parts`]: input rows, output rows, the inner
//! kernel's scratch at the node's threads, Winograd's per-run head last), so a node whose
//! tasks run one after the other (one task, one thread) uses it as before; slots 1.. hold
//! the input and output rows and the inner kernel's scratch at one thread.

use super::{
    ConvParams, DW_LANES, band, band_rows, band_tile, dw_bands, dw_block, pw_pixels, staged_parts,
    wino_bands,
};
use crate::gemm::conv::{conv2d_scratch_bytes, mark_packed};
use crate::gemm::stage16::split::slot_count;

/// Floats of a staged Conv's scratch parts per slot, and its slot count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Slots {
    /// Input rows of a task.
    pub xin: usize,
    /// Output rows of a task.
    pub yout: usize,
    /// Slot 0's inner part: the inner kernel's scratch at the node's threads (and a
    /// Winograd head after it).
    pub inner0: usize,
    /// The inner part of slots 1..: the inner kernel's scratch at one thread.
    pub inner1: usize,
    /// Slots planned (1, or the node's threads).
    pub count: usize,
}

impl Slots {
    /// Floats of slot 0.
    fn slot0(&self) -> usize {
        self.xin + self.yout + self.inner0
    }

    /// Floats of each slot after slot 0.
    fn slot1(&self) -> usize {
        self.xin + self.yout + self.inner1
    }

    /// The first float of slot `t`.
    pub fn base(&self, t: usize) -> usize {
        if t == 0 {
            0
        } else {
            self.slot0() + (t - 1) * self.slot1()
        }
    }

    /// Floats of every slot.
    pub fn floats(&self) -> usize {
        self.slot0() + self.count.saturating_sub(1) * self.slot1()
    }
}

/// Tasks of the staged `p` at `budget` (per Winograd pass): images times bands, blocks or
/// runs of the path [`super::staged`] takes.
pub(super) fn tasks(p: &ConvParams, budget: u64) -> usize {
    let n = p.n as usize;
    let oh = p.oh.max(1);
    if let Some(b) = wino_bands(p, budget) {
        return n * oh.div_ceil(b.rows.max(1)) as usize;
    }
    if let Some(rows) = dw_bands(p, budget) {
        return n * (p.group / DW_LANES * oh.div_ceil(rows.max(1))) as usize;
    }
    if let Some(b) = dw_block(p, budget) {
        return n * p.group.div_ceil(b.max(1)) as usize;
    }
    if let Some(npix) = pw_pixels(p, budget) {
        return n * (p.h * p.w).max(1).div_ceil(npix.max(1)) as usize;
    }
    n * oh.div_ceil(band_rows(p, budget).max(1)) as usize
}

/// The slots of the staged `p` at `budget`.
pub(super) fn slots(p: &ConvParams, budget: u64) -> Slots {
    let (xin, yout, inner0) = staged_parts(p, budget);
    // Winograd bands keep one slot: the inner Winograd run spreads its tile blocks over the
    // threads already, and a second slot of its scratch (and input rows) made the planner
    // drop Winograd for the direct kernels at 2 threads (ResNet-18: 6 of 7 staged
    // Winograd convs, +10% time).
    // A budget with [`super::ONE_SLOT`] set plans one slot (the planner's choice where
    // more would raise the peak).
    let count = if wino_bands(p, budget).is_some() || budget & super::ONE_SLOT != 0 {
        1
    } else {
        slot_count(tasks(p, budget), p.threads.max(1) as usize)
    };
    // The depthwise and pointwise paths' inner kernels need no scratch.
    let inner1 = if count < 2
        || dw_bands(p, budget).is_some()
        || dw_block(p, budget).is_some()
        || pw_pixels(p, budget).is_some()
    {
        0
    } else {
        row_inner(p, band_rows(p, budget), budget, 1)
    };
    // Slot 0 also runs a task at one thread: its inner part holds either.
    let inner0 = inner0.max(inner1);
    Slots {
        xin,
        yout,
        inner0,
        inner1,
        count,
    }
}

/// Floats of the inner kernel's scratch of the bands of `p` at `rows` rows when a band runs
/// at `threads` threads (packed as at the node's threads: the weights' layout).
pub(super) fn row_inner(p: &ConvParams, rows: u64, budget: u64, threads: u64) -> usize {
    if budget & super::F32_DIRECT != 0 {
        // The direct kernels on f32 weights use no scratch.
        return 0;
    }
    let oh = p.oh.max(1);
    let r0s = [0, rows, (oh - 1) / rows.max(1) * rows];
    let count = if rows < oh { 3 } else { 1 };
    r0s.into_iter()
        .take(count)
        .map(|r0| {
            let mut q = band(p, r0, (r0 + rows).min(oh)).0;
            mark_packed(&mut q);
            q.threads = threads;
            q.tile = band_tile(&q, budget);
            conv2d_scratch_bytes(&q).div_ceil(4).next_multiple_of(16)
        })
        .max()
        .unwrap_or(0)
}

/// Estimated single-thread time of the whole of `p`, ns (its multiply-adds).
pub(super) fn cost_ns(p: &ConvParams) -> u64 {
    let k = (p.c / p.group.max(1)) * p.kh.max(1) * p.kw.max(1);
    let macs = p.n * p.m * p.oh.max(1) * p.ow.max(1) * k;
    crate::par::cost::gemm_ns(usize::try_from(macs).unwrap_or(usize::MAX))
}

/// Slots [`super::staged`] plans for `p` at `budget` (tests: whether the tasks spread).
#[cfg(test)]
pub(in crate::gemm::stage16) fn count(p: &ConvParams, budget: u64) -> usize {
    slots(p, budget).count
}
