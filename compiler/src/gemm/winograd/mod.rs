//! Winograd F(4x4, 3x3) for 3 x 3 convolutions at stride 1 (dilation 1, one group, any
//! pads): each 4 x 4 output tile costs 36 multiplies per (output, input) channel pair instead
//! of 144, and the 36 products of a block of tiles are plain GEMMs on the micro-kernels of
//! [`super`] ([`super::sgemm_core`]).
//!
//! One run of [`run`]:
//! 1. the transformed weights `U_p = (G g Gᵀ)_p` for each of the 36 positions `p`, each an
//!    `M x C` matrix packed for the selected micro-kernel (the layout of
//!    [`super::pack_a_all`]): either precomputed at compile time into the weights region
//!    ([`WINOGRAD_U_PACKED`], [`transform_weights`]: constant f32 weights whose matrices take
//!    at most [`PRECOMPUTE_MAX`] bytes, [`mark`]; the weights grow by 3x that Conv's), or
//!    computed from the OIHW weights as given into the shared head of the scratch at every
//!    run ([`WINOGRAD_PACKED`]), the output channels cut among the threads;
//! 2. *units* (image, block of [`Blocking::t`] tiles, range of [`MB`]-row blocks of output
//!    channels) go to the threads, each with its own slot of the scratch: the block's input
//!    patches are transformed into 36 packed B matrices `V_p` (`C x t`, zero columns past the
//!    plane), then per row block the 36 products `O_p = U_p V_p` and the output transform
//!    `Aᵀ O A` with a fused residual ([`ConvParams::accumulate`]: `y`'s values at the
//!    positions about to be stored, added to the transformed tile), the bias and the fused
//!    activation ([`super::act::bias_act`]), stored clipped at the plane's right and bottom
//!    edges (`unit.rs`). A run of one unit (a 16-bit
//!    staged band) has one slot, which its threads share ([`shared_unit`]).
//!
//! Every output element goes through the same transforms and the same micro-kernel chain
//! (row blocks start at multiples of [`MB`], the tile blocks depend on the geometry only)
//! whatever the unit or thread: results are bit-identical at every thread count. The error
//! is that of F(4x4, 3x3) in f32: the tests bound it against the f64 reference
//! (`tests.rs`).
//!
//! Which convolutions take this path: [`applies`] (the geometry, and where it was measured
//! faster than the direct kernels); the planner gives it its scratch only where that does not
//! raise the arena's peak (`analysis/liveness/winograd.rs`), and the code generator runs it
//! where the planned scratch holds [`scratch_bytes`] ([`chosen`]).

mod input;
mod transform;
mod unit;
mod weights;

pub use weights::transform_weights;
pub(crate) use weights::{transform_channels, transform_per_run};

pub(crate) use input::In16;
use unit::{Part, Unit, unit_dispatch};

use super::conv::ConvParams;
use super::split::SyncPtr;
use super::{AView, BView, NR, packed_a_len, selected_kernel};

/// The `packed_a` mark of a convolution run by [`run`]: weights as given (OIHW), transformed
/// per run into the scratch.
pub(crate) const WINOGRAD_PACKED: u64 = 4;

/// The `packed_a` mark of a convolution run by [`run`] with the 36 transformed weight
/// matrices precomputed ([`transform_weights`], [`weights_floats`] floats): no scratch head.
pub(crate) const WINOGRAD_U_PACKED: u64 = 5;

/// Whether a `packed_a` mark is one of [`run`]'s.
pub(crate) fn marks(packed_a: u64) -> bool {
    packed_a == WINOGRAD_PACKED || packed_a == WINOGRAD_U_PACKED
}

/// Most bytes of transformed weights ([`weights_floats`]) precomputed into the weights
/// region for one Conv: 2.5 MiB takes every 3 x 3 Conv up to 128 -> 128 channels (ResNet's
/// layer1/layer2, VGG's first two blocks, SqueezeNet's expand convs; the region grows by 3x
/// those Convs' f32 weights), not 256 -> 256 (9.4 MB, VGG-19's 3 x 3 weights would grow by
/// hundreds of MB); those keep the per-run transform into the scratch. The floor of the cap:
/// Convs that would keep Winograd on patch windows take a cap relative to the model's weights
/// (`analysis/liveness/winograd.rs`, `precomputed`).
pub const PRECOMPUTE_MAX: usize = 5 << 19;

/// Floats of the 36 transformed weight matrices of `p` (selected kernel's packing).
pub fn weights_floats(p: &ConvParams) -> usize {
    POS * u_len(p)
}

/// Floats of one transformed weight matrix (a multiple of 16).
fn u_len(p: &ConvParams) -> usize {
    packed_a_len(p.m as usize, p.c as usize).next_multiple_of(16)
}

/// `p`'s Winograd mark: [`WINOGRAD_U_PACKED`] when `precomputable` (constant weights the
/// lowering stores as f32) and the transformed weights take at most [`PRECOMPUTE_MAX`] bytes,
/// else [`WINOGRAD_PACKED`].
pub fn mark(p: &mut ConvParams, precomputable: bool) {
    mark_within(p, precomputable, PRECOMPUTE_MAX);
}

/// [`mark`] with the per-Conv cap `cap` (bytes of transformed weights) given: the planner
/// chooses the precomputed Convs under its own caps (`analysis/liveness/winograd.rs`
/// `precomputed`) and both it and the lowering mark a chosen Conv with no cap.
pub fn mark_within(p: &mut ConvParams, precomputable: bool, cap: usize) {
    p.packed_a = if precomputable && weights_floats(p).saturating_mul(4) <= cap {
        WINOGRAD_U_PACKED
    } else {
        WINOGRAD_PACKED
    };
}

/// Transform positions (6 x 6).
const POS: usize = 36;

/// Output channels per block of the 36 products (a multiple of every micro-kernel's `MR`:
/// blocks start at the same rows whatever the split).
pub(crate) const MB: usize = 48;

/// Smaller row blocks [`block_sizes`] offers after one panel of tiles at [`MB`] rows, for
/// scratch that cannot hold that (a stage run patch by patch: 64 channels at 16 tiles take
/// 252 KiB at 48 rows, 171 KiB at 12). Multiples of every micro-kernel's `MR` too, so each
/// output row is in the same micro-panel, and each element the same product, whatever the
/// block: bit-identical to [`MB`].
const SMALL_ROWS: [usize; 2] = [24, 12];

/// Bit of the `tile` field from which a row block other than [`MB`] is stored
/// ([`block_sizes`]): `tile = tiles | rows << ROWS_SHIFT`.
const ROWS_SHIFT: u32 = 32;

/// Bytes of one thread's slot (V and O of a block) the tile block aims at: the L2 of one
/// core.
const SLOT_BUDGET: usize = 1 << 20;

/// Most tiles per block.
const MAX_T: usize = 128;

/// `ARENAC_WINOGRAD`: `0` never, `1` wherever the geometry fits (and the planner's peak rule
/// is ignored: for benchmarks), unset: [`wins`].
fn mode() -> Option<bool> {
    static MODE: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    *MODE.get_or_init(|| std::env::var("ARENAC_WINOGRAD").ok().map(|v| v != "0"))
}

/// Whether `ARENAC_WINOGRAD=1` forces this path wherever it computes.
pub fn forced() -> bool {
    mode() == Some(true)
}

/// Whether [`run`] computes `p`: a 3 x 3 kernel at stride 1 and dilation 1, one group,
/// non-empty sizes small enough that every index fits comfortably.
pub fn geometry_fits(p: &ConvParams) -> bool {
    let small = |v: u64| v > 0 && v < (1 << 20);
    p.kh == 3
        && p.kw == 3
        && p.stride_h == 1
        && p.stride_w == 1
        && p.dil_h == 1
        && p.dil_w == 1
        && p.group <= 1
        && [p.n, p.c, p.m, p.h, p.w, p.oh, p.ow].into_iter().all(small)
        && p.pad_t < 8
        && p.pad_l < 8
        && p.c.saturating_mul(p.m).saturating_mul(POS as u64) < (1 << 31)
        && p.h.saturating_mul(p.w) < (1 << 31)
        && p.oh.saturating_mul(p.ow) < (1 << 31)
}

/// Whether this path is faster than the direct kernels for `p`: at least [`MIN_TILES`] 4 x 4
/// output tiles over the batch, or [`MIN_TILES_PRECOMPUTED`] when the transformed weights are
/// precomputed ([`WINOGRAD_U_PACKED`]: `p` marked by [`mark`] first). A per-run transform
/// costs about as many stores per (output, input) channel pair as the 36 products make
/// multiply-adds per tile column, so few tiles do not repay it. Measured with
/// `examples/conv_bench.rs` (GFLOP/s of the direct conv's flops by thread CPU time, AVX-512,
/// direct vs Winograd, per-run transform): 64@56x56 112 vs 187, 128@28x28 117 vs 195,
/// 32->128@27x27 108 vs 153, 16->64@55x55 98 vs 172, but 256@14x14 (16 tiles) 120 vs 109 and
/// 64->256@13x13 119 vs 97. Precomputed, one full panel of 16 tiles repays it: SqueezeNet
/// 1.1's 3 x 3 Convs patched 4x4 (14 x 14 patch planes) and at 13 x 13, 4.06 ms direct vs
/// 2.70-3.02 ms Winograd (`ARENAC_WINOGRAD=1`, per-kernel profile, 2026-11-27).
pub fn wins(p: &ConvParams) -> bool {
    let tiles = p.oh.div_ceil(4) * p.ow.div_ceil(4);
    let min = if p.packed_a == WINOGRAD_U_PACKED {
        MIN_TILES_PRECOMPUTED
    } else {
        MIN_TILES
    };
    p.n.saturating_mul(tiles) >= min
}

/// Fewest tiles (over the batch) [`wins`] takes with the per-run transform.
const MIN_TILES: u64 = 40;

/// Fewest tiles (over the batch) [`wins`] takes with precomputed transformed weights: one
/// packed panel ([`NR`]); below it the panel's zero columns waste the saving.
const MIN_TILES_PRECOMPUTED: u64 = 16;

/// Whether `p` may run here ([`geometry_fits`], [`wins`] or `ARENAC_WINOGRAD=1`, and not
/// `ARENAC_WINOGRAD=0`).
pub fn applies(p: &ConvParams) -> bool {
    match mode() {
        Some(false) => false,
        Some(true) => geometry_fits(p),
        None => geometry_fits(p) && wins(p),
    }
}

/// The tile blocks (most tiles per block, multiples of [`NR`]) [`run`] may use for `p`,
/// largest scratch first: the default (V and O of a block in about one L2, [`SLOT_BUDGET`])
/// down to one panel, then one panel with fewer output channels per row block
/// ([`SMALL_ROWS`], stored in the high bits). The planner takes the largest whose scratch
/// keeps the peak.
pub fn block_sizes(p: &ConvParams) -> impl Iterator<Item = usize> {
    let m = p.m as usize;
    (NR..=default_block(p)).rev().step_by(NR).chain(
        SMALL_ROWS
            .into_iter()
            .filter(move |&r| r < m.min(MB))
            .map(|r| NR | (r << ROWS_SHIFT)),
    )
}

/// Output channels per row block of `p` (the `tile` field's high part, [`MB`] when 0).
fn row_block(p: &ConvParams) -> usize {
    match ((p.tile & !SHARED) >> ROWS_SHIFT) as usize {
        0 => MB,
        r => r,
    }
}

/// The largest of [`block_sizes`] whose [`scratch_bytes`] is at most `planned` (`None`: not
/// even one panel's).
pub fn block_for_scratch(p: &ConvParams, planned: usize) -> Option<usize> {
    block_sizes(p).find(|&t| scratch_bytes(&with_block(p, t)) <= planned)
}

/// `p` with tile blocks of at most `t` tiles (a value of [`block_sizes`]: the `tile` field,
/// as [`run`] reads it).
pub fn with_block(p: &ConvParams, t: usize) -> ConvParams {
    ConvParams {
        tile: t as u64 | (p.tile & SHARED),
        ..*p
    }
}

/// A bit of `ConvParams::tile`: the run's units go one after the other, each shared by the
/// threads ([`shared_unit`]), in one slot (a 16-bit staged band at several threads where
/// a slot per thread would raise the arena: `crate::gemm::stage16::conv`'s `ONE_SLOT`
/// budgets). The same bits as the units run whole.
pub(crate) const SHARED: u64 = 1 << 48;

/// Whether `p`'s units share one slot ([`SHARED`]).
fn shared(p: &ConvParams) -> bool {
    p.tile & SHARED != 0
}

/// Most tiles per block by default: V (36 x c x t) and O (36 x MB x t) within
/// [`SLOT_BUDGET`], at least 32 tiles.
fn default_block(p: &ConvParams) -> usize {
    let fit = SLOT_BUDGET / (4 * POS * (p.c as usize + MB));
    (fit / NR * NR).clamp(2 * NR, MAX_T)
}

/// How the tiles of one image are cut into blocks.
#[derive(Clone, Copy, Debug)]
struct Blocking {
    /// Tiles per row of the plane.
    tw: usize,
    /// Tiles of one image.
    tiles: usize,
    /// Tiles per block (a multiple of [`NR`]).
    t: usize,
    /// Blocks per image.
    blocks: usize,
}

fn blocking(p: &ConvParams) -> Blocking {
    let (oh, ow) = (p.oh as usize, p.ow as usize);
    let tw = ow.div_ceil(4);
    let tiles = oh.div_ceil(4) * tw;
    // The planned block (`tile`), else the default.
    let t_max = match (p.tile & ((1 << ROWS_SHIFT) - 1)) as usize {
        0 => default_block(p),
        t => t.next_multiple_of(NR).clamp(NR, MAX_T),
    };
    let blocks = tiles.div_ceil(t_max).max(1);
    let t = tiles.div_ceil(blocks).next_multiple_of(NR);
    Blocking {
        tw,
        tiles,
        t,
        blocks,
    }
}

/// Rows of the slot's O part: one row block.
fn o_rows(p: &ConvParams) -> usize {
    row_block(p).min(p.m as usize)
}

/// Floats of one transformed weight matrix, of the scratch's shared head (the 36 matrices,
/// none when precomputed) and of one thread's slot.
fn parts(p: &ConvParams) -> (usize, usize, usize) {
    let c = p.c as usize;
    let u_one = u_len(p);
    let b = blocking(p);
    let slot = POS * (c * b.t + o_rows(p) * b.t);
    let head = if p.packed_a == WINOGRAD_U_PACKED {
        0
    } else {
        POS * u_one
    };
    (u_one, head, slot)
}

/// Scratch bytes [`run`] needs for `p` (tile blocks of at most `p.tile` tiles, 0: the
/// default): the transformed weights unless precomputed, then one slot per thread, or one
/// slot when the run is one unit ([`units`]: its threads share it).
pub fn scratch_bytes(p: &ConvParams) -> usize {
    let (_, head, slot) = parts(p);
    let slots = if units(p) <= 1 || shared(p) {
        1
    } else {
        p.threads.max(1) as usize
    };
    slot.saturating_mul(slots)
        .saturating_add(head)
        .saturating_mul(4)
}

/// Ranges of row blocks each (image, tile block) of [`run`] is cut into on `width` threads:
/// one when the `per` (image, tile block) pairs keep the threads busy, else up to
/// `mblocks`.
fn row_parts(per: usize, mblocks: usize, width: usize) -> usize {
    if width <= 1 || per >= 2 * width {
        1
    } else {
        mblocks.min((2 * width).div_ceil(per)).max(1)
    }
}

/// Units [`run`] cuts `p` into at `p.threads` threads ((image, tile block) pairs times ranges
/// of row blocks): one unit (one tile block of one row block: a 16-bit staged band of one
/// tile block, `crate::gemm::stage16::conv`) runs in one slot, its threads sharing it
/// ([`shared_unit`]), so [`scratch_bytes`] is that at one thread.
pub fn units(p: &ConvParams) -> usize {
    let per = p.n as usize * blocking(p).blocks;
    let mblocks = (p.m as usize).div_ceil(row_block(p));
    per * row_parts(per, mblocks, p.threads.max(1) as usize)
}

/// The instruction set the transforms are compiled for: the selected GEMM kernel's.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Isa {
    Avx512,
    Avx2,
    Portable,
}

fn isa() -> Isa {
    let name = selected_kernel().name;
    if cfg!(target_arch = "x86_64") && name.starts_with("avx512") {
        Isa::Avx512
    } else if cfg!(target_arch = "x86_64") && name.starts_with("avx2") {
        Isa::Avx2
    } else {
        Isa::Portable
    }
}

/// `y = act(conv(x, w) + bias)` for `p` ([`applies`]), spread over the current pool; with
/// `p.accumulate`, `y = act(conv(x, w) + bias + y)`.
///
/// # Safety
/// That of [`super::conv::arenac_conv2d`] with `w` the OIHW weights (`m * c * 9` floats, or
/// stored reduced as `p.wtype` says), or with [`WINOGRAD_U_PACKED`] the [`weights_floats`]
/// floats [`transform_weights`] wrote for this `p` and the selected kernel, and `scratch`
/// writable for [`scratch_bytes`] bytes.
pub(crate) unsafe fn run(
    p: &ConvParams,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    y: *mut f32,
    scratch: *mut f32,
) {
    // SAFETY: the contract.
    unsafe { run_from(p, (x, None), w, bias, y, scratch) }
}

/// [`run`] on a 16-bit input `x` ([`In16`]: an image's band of rows read in place, widened
/// by the input transform's loads, the rows outside [`In16::rows`] read as zeros), `p` the
/// band's geometry (`n` 1, `h` the rows the band reads, `pad_t` 0): every output the f32
/// run's on the widened band, bit for bit (the staged Winograd bands,
/// `crate::gemm::stage16::conv`, without widening the band's input into their scratch).
///
/// # Safety
/// As [`run`] with `x` replaced by `x16` (its rows [`In16::rows`] of every channel
/// readable).
pub(crate) unsafe fn run16(
    p: &ConvParams,
    x16: In16,
    w: *const f32,
    bias: *const f32,
    y: *mut f32,
    scratch: *mut f32,
) {
    // SAFETY: the contract.
    unsafe { run_from(p, (std::ptr::null(), Some(x16)), w, bias, y, scratch) }
}

/// [`run`] on `x` (f32) or, where given, the 16-bit input.
///
/// # Safety
/// That of [`run`] or [`run16`].
unsafe fn run_from(
    p: &ConvParams,
    (x, x16): (*const f32, Option<In16>),
    w: *const f32,
    bias: *const f32,
    y: *mut f32,
    scratch: *mut f32,
) {
    let m = p.m as usize;
    let (u_one, head, slot) = parts(p);
    let width = (p.threads.max(1) as usize).min(crate::par::threads());
    let isa = isa();
    let (xs, ws, bs, ys, ss) = (
        SyncPtr(x.cast_mut()),
        SyncPtr(w.cast_mut()),
        SyncPtr(bias.cast_mut()),
        SyncPtr(y),
        SyncPtr(scratch),
    );
    // 1. The weights, whole micro-panels of rows (at most L) per task; reduced ones
    // (`p.wtype`) widened as they are read. Precomputed: read where they are.
    let uw = if p.packed_a == WINOGRAD_U_PACKED {
        SyncPtr(ws.get())
    } else {
        // SAFETY: the head of the scratch holds the 36 matrices (`parts`); the weights as
        // the contract says.
        unsafe { transform_per_run(p, w, scratch) };
        SyncPtr(ss.get())
    };
    // 2. The units.
    let b = blocking(p);
    let per = p.n as usize * b.blocks;
    let mblocks = m.div_ceil(row_block(p));
    let mparts = row_parts(per, mblocks, width);
    if width > 1 && shared(p) && per * mparts > 1 {
        // One slot (after the head): each (image, tile block) shared by the threads, all of
        // its row blocks.
        for ib in 0..per {
            let unit = Unit {
                img: ib / b.blocks,
                block: ib % b.blocks,
                mblocks: 0..mblocks,
                x16,
            };
            let ptrs = [xs, uw, bs, ys, SyncPtr(ss.get().wrapping_add(head))];
            // SAFETY: the contract; the units one after the other in the one slot.
            unsafe { shared_unit(isa, p, &b, ptrs, u_one, unit) };
        }
        return;
    }
    if per * mparts == 1 && width > 1 {
        // SAFETY: the contract; one unit (one image, one tile block, one row block: a
        // second would make `row_parts` cut it), slot 0 after the head, U as above.
        unsafe {
            shared_unit(
                isa,
                p,
                &b,
                [xs, uw, bs, ys, SyncPtr(ss.get().wrapping_add(head))],
                u_one,
                Unit {
                    img: 0,
                    block: 0,
                    mblocks: 0..1,
                    x16,
                },
            )
        };
        return;
    }
    crate::par::for_each(per * mparts, width, |u, t| {
        let (ib, mp) = (u / mparts, u % mparts);
        let unit = Unit {
            img: ib / b.blocks,
            block: ib % b.blocks,
            mblocks: mblocks * mp / mparts..mblocks * (mp + 1) / mparts,
            x16,
        };
        let slot_ptr = ss.get().wrapping_add(head + t * slot);
        // SAFETY: thread t < width owns slot t (the planner sized `threads` slots, width is
        // at most that); the unit writes only its tiles of its output channels; `uw` holds
        // the transformed weights (precomputed, or step 1 finished before this loop).
        unsafe {
            unit_dispatch(
                isa,
                p,
                &b,
                &unit,
                (xs.get(), uw.get(), bs.get(), ys.get(), slot_ptr),
                u_one,
                Part::Whole,
            )
        };
    });
}

/// The one unit of a run ([`units`] 1: image 0, tile block 0, its one row block) on up to
/// `p.threads` threads of the current pool ([`crate::par::width`] of its products' cost),
/// all in the one slot `slot`, in three passes: the input transform by ranges of input
/// channels (rows of every `V_p`), the 36 products by ranges of positions (each `O_p`
/// whole), the output transform by ranges of output channels (rows of `O` and planes of
/// `y`). Every part writes only its own rows or matrices and reads what the passes before
/// it finished, and each computes them as [`Part::Whole`] does: the same bits.
///
/// # Safety
/// That of [`unit_body`] for this unit and `slot`.
unsafe fn shared_unit(
    isa: Isa,
    p: &ConvParams,
    b: &Blocking,
    [x, u, bias, y, slot]: [SyncPtr<f32>; 5],
    u_one: usize,
    unit: Unit,
) {
    let (c, rows) = (p.c as usize, o_rows(p));
    let cols = b.t.min(b.tiles).next_multiple_of(NR);
    let macs = POS * rows.next_multiple_of(selected_kernel().mr) * c * cols;
    let width = crate::par::width(
        crate::par::cost::gemm_ns(macs),
        (p.threads.max(1) as usize).min(crate::par::threads()),
    );
    // A pass over `n` items in ranges, a few per thread (a late thread's share is taken by
    // the others).
    let cut = |un: &Unit, n: usize, part: fn(std::ops::Range<usize>) -> Part| {
        let tasks = n.min(PIECES_PER_THREAD * width).max(1);
        crate::par::for_each(tasks, width, |k, _| {
            let r = n * k / tasks..n * (k + 1) / tasks;
            // SAFETY: the caller's contract; this part writes only its range's rows of V,
            // matrices of O or output channels, and reads what the finished passes wrote.
            unsafe {
                unit_dispatch(
                    isa,
                    p,
                    b,
                    un,
                    (x.get(), u.get(), bias.get(), y.get(), slot.get()),
                    u_one,
                    part(r),
                )
            };
        });
    };
    cut(&unit, c, Part::Input);
    // Each row block as `Part::Whole` computes it after the input transform.
    let (m, rb) = (p.m as usize, row_block(p));
    for mb in unit.mblocks.clone() {
        let one = Unit {
            mblocks: mb..mb + 1,
            ..unit
        };
        cut(&one, POS, Part::Products);
        cut(&one, rb.min(m - mb * rb), Part::Output);
    }
}

/// Pieces per thread of each pass of [`shared_unit`].
const PIECES_PER_THREAD: usize = 4;

#[cfg(test)]
pub(crate) mod tests;
