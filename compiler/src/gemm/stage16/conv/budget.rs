//! The staging budgets of a staged Conv: the configurations the planner may give it, each
//! a budget of bytes ([`super::band_rows`] and the other paths cut by it) whose two lowest
//! bits, never significant to those cuts (every size compared with a budget is a multiple
//! of 4 bytes), say how its scratch slots are laid out ([`ONE_SLOT`], [`F32_DIRECT`]). The
//! planner plans one of their sizes; the lowering reads the configuration back from the
//! planned bytes ([`config_for_scratch_for`]: the first in [`budgets_for`]'s order that
//! fits), so whatever it reads back fits the scratch planned.

use super::{
    ConvParams, marked, other_runs, pw_direct, scratch_bytes_at, shared_layout, slots, unmarked,
};
use crate::gemm::direct::DIRECT_PACKED;

/// The smallest staging budget of `p` in bytes, the one the planner starts from: 1/48 of the
/// node's 16-bit input and output, between 16 KiB and [`super::super::STAGE_BYTES`] — small
/// against the arena's peak (a Conv is often at it). Where the step is below the peak the
/// planner grows it ([`budgets`], `crate::analysis::liveness::tiles`): larger bands, fewer
/// re-packs. A multiple of 4: the two lowest bits are the layout's.
fn min_budget(p: &ConvParams) -> u64 {
    let bytes16 = (p.n * (p.c * p.h * p.w + p.m * p.oh * p.ow)).saturating_mul(2);
    (bytes16 / 48).clamp(16 << 10, super::super::STAGE_BYTES as u64) & !(ONE_SLOT | F32_DIRECT)
}

/// The lowest bit of a staging budget, set on the budgets [`budgets`] adds at several
/// threads: the node's tasks share one scratch slot, run one after the other, each inner
/// kernel on the node's threads ([`slots::slots`]), where one slot per thread would raise
/// the arena's peak (a 2-thread VGG-19's `features.2`: 901,120 bytes of two slots, 524,288
/// of one).
pub const ONE_SLOT: u64 = 1;

/// The second bit of a staging budget, set by [`budgets_for`] with f32 weights (at any
/// thread count: f32 plans give these Convs no scratch either) where every band runs the
/// direct kernels ([`direct_bands`]): those read the
/// weights packed at compile time and no scratch, so the slots plan no inner part (with
/// weights stored reduced the bands may take the GEMM path, which needs it). A 2-thread
/// ResNet-50's `layer2.0.conv2`: 643,072 bytes of two slots, 200,704 so; at 1 thread its
/// f16 arena 0.547 -> 0.522 of the f32 one.
pub const F32_DIRECT: u64 = 2;

/// Whether every band of `p` at `budget` runs the direct kernels on f32 weights (row bands
/// sharing the direct packing; not Winograd, depthwise or pointwise runs).
pub(super) fn direct_bands(p: &ConvParams, budget: u64) -> bool {
    let other = other_runs(p, budget) || pw_direct(p) || p.is_depthwise();
    p.wtype == 0
        && crate::gemm::lowp::conv_weight_type(p).is_none()
        && !other
        && shared_layout(p, super::band_rows(p, budget)).is_some_and(|(a, _)| a == DIRECT_PACKED)
}

/// [`budgets_for`] without knowing the weights are f32 (no [`F32_DIRECT`] budgets).
pub fn budgets(p: &ConvParams) -> Vec<u64> {
    budgets_for(p, false)
}

/// The staging budgets worth planning for `p`, in the order the planner prefers them:
/// powers of two from the f32 size of one image's input and output (one band: the whole
/// convolution) down to [`min_budget`] (with `f32_weights`, the weights
/// known to stay f32, each with [`F32_DIRECT`] set where [`direct_bands`] holds: the same
/// kernels, less scratch); at several threads then the same budgets with [`ONE_SLOT`] set
/// where they plan more than one slot.
pub fn budgets_for(p: &ConvParams, f32_weights: bool) -> Vec<u64> {
    let min = min_budget(p);
    let whole = ((p.c * p.h * p.w + p.m * p.oh * p.ow).saturating_mul(4)).max(min);
    let mut out = Vec::new();
    let mut b = whole.next_power_of_two();
    while b > min {
        out.push(b);
        b /= 2;
    }
    out.push(min);
    if f32_weights {
        for b in &mut out {
            if direct_bands(p, *b) {
                *b |= F32_DIRECT;
            }
        }
    }
    if p.threads >= 2 {
        // Winograd bands keep one slot of tasks; with `ONE_SLOT` their inner runs share one
        // Winograd slot too (where that plans less).
        let shared = |b: u64| {
            super::wino_bands(p, b).is_some()
                && scratch_bytes_at(p, b | ONE_SLOT) < scratch_bytes_at(p, b)
        };
        let one: Vec<u64> = out
            .iter()
            .filter(|&&b| slots::slots(p, b).count > 1 || shared(b))
            .map(|&b| b | ONE_SLOT)
            .collect();
        out.extend(one);
    }
    out
}

/// The budget the planner starts from: [`min_budget`] at one thread, at several the one of
/// [`budgets`] with the smallest scratch (the last of those tied).
fn last_budget(p: &ConvParams, f32_weights: bool) -> u64 {
    if p.threads < 2 {
        return min_budget(p);
    }
    budgets_for(p, f32_weights)
        .into_iter()
        .rev()
        .min_by_key(|&b| scratch_bytes_at(p, b))
        .unwrap_or_else(|| min_budget(p))
}

/// The first of [`budgets`] whose [`scratch_bytes_at`] fits `bytes` (the smallest when none
/// does): how the lowering reads back the budget the planner chose.
pub fn budget_for_scratch(p: &ConvParams, bytes: usize) -> u64 {
    budget_for_scratch_for(p, bytes, false)
}

/// [`budget_for_scratch`] among [`budgets_for`] `f32_weights`.
fn budget_for_scratch_for(p: &ConvParams, bytes: usize, f32_weights: bool) -> u64 {
    budgets_for(p, f32_weights)
        .into_iter()
        .find(|&b| scratch_bytes_at(p, b) <= bytes)
        .unwrap_or_else(|| last_budget(p, f32_weights))
}

/// [`config_for_scratch_for`] without knowing the weights are f32.
pub fn config_for_scratch(p: &ConvParams, bytes: usize) -> (ConvParams, u64) {
    config_for_scratch_for(p, bytes, false)
}

/// The params and budget `bytes` of planned scratch run `p` at: for a [`marked`] `p`, the
/// first budget of [`budgets_for`] whose scratch (Winograd bands where
/// [`super::wino_bands`] takes them) fits, else [`unmarked`] `p` at [`budget_for_scratch`]
/// (the planner plans an unmarked scratch first, [`scratch_sizes_for`]). `f32_weights`: the
/// weights stay f32.
pub fn config_for_scratch_for(
    p: &ConvParams,
    bytes: usize,
    f32_weights: bool,
) -> (ConvParams, u64) {
    if marked(p)
        && let Some(b) = budgets_for(p, f32_weights)
            .into_iter()
            .find(|&b| scratch_bytes_at(p, b) <= bytes)
    {
        return (*p, b);
    }
    let q = unmarked(p);
    (q, budget_for_scratch_for(&q, bytes, f32_weights))
}

/// [`scratch_sizes_for`] without knowing the weights are f32.
pub fn scratch_sizes(p: &ConvParams) -> Vec<usize> {
    scratch_sizes_for(p, false)
}

/// The scratch sizes the planner may give `p`, in the order it tries them: a [`marked`]
/// `p`'s at each of [`budgets_for`] (Winograd bands where they run), then (and for an
/// unmarked one only) the unmarked sizes. [`config_for_scratch_for`] reads any of them
/// back.
pub fn scratch_sizes_for(p: &ConvParams, f32_weights: bool) -> Vec<usize> {
    sizes_where(p, f32_weights, |_| true)
}

/// The sizes of [`scratch_sizes_for`] the planner lowers a peak to: with f32 weights not
/// the [`ONE_SLOT`] ones (their tasks run one after the other: ResNet-50's
/// `layer2.0.conv2` took 1.8x its time), which [`F32_DIRECT`] makes needless on the
/// benchmark models; with weights stored reduced all.
pub fn peak_sizes(p: &ConvParams, f32_weights: bool) -> Vec<usize> {
    sizes_where(p, f32_weights, |b| !f32_weights || b & ONE_SLOT == 0)
}

/// [`scratch_sizes_for`] at the budgets `keep` holds for.
fn sizes_where(p: &ConvParams, f32_weights: bool, keep: impl Fn(u64) -> bool) -> Vec<usize> {
    let q = unmarked(p);
    let mut out = Vec::new();
    if marked(p) {
        out.extend(
            budgets_for(p, f32_weights)
                .into_iter()
                .filter(|&b| keep(b))
                .map(|b| scratch_bytes_at(p, b)),
        );
    }
    out.extend(
        budgets_for(&q, f32_weights)
            .into_iter()
            .filter(|&b| keep(b))
            .map(|b| scratch_bytes_at(&q, b)),
    );
    out
}

/// Scratch bytes [`super::conv`] uses for `p` (constant weights, `threads` set) at the
/// smallest budget without knowing the weights are f32 (at several threads one slot at
/// [`min_budget`]).
pub fn scratch_bytes(p: &ConvParams) -> usize {
    scratch_bytes_at(p, last_budget(p, false))
}
