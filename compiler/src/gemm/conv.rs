//! 2-d convolution, called from JIT code through one entry point, [`arenac_conv2d`].
//!
//! Three paths, chosen from the geometry:
//! - depthwise (`C/group == 1`, `group > 1`, any channel multiplier): [`super::depthwise`],
//!   a direct kernel vectorized along the output width;
//! - pointwise (`1 x 1` kernel, stride 1, no padding): the input of one image and group is
//!   already the `K x pixels` B matrix; it is fed to the GEMM core unpacked (no im2col);
//! - direct (no groups, AVX-512; stride 1 with wide output rows, or a "same" stride-1 conv
//!   over its flattened plane: [`super::direct_flat`]): [`super::direct`], no im2col;
//! - otherwise im2col: for each image and group, the output pixels are cut into tiles of at
//!   most [`ConvParams::tile_pixels`] ([`IM2COL_TILE`] unless the planner chose a
//!   smaller tile, [`conv2d_tile_for_scratch`]); each tile's im2col panel
//!   (`K = C/group * kh * kw` rows, one column per output pixel) is written straight in the packed-B layout of
//!   [`super::arenac_sgemm`] (16-wide column panels, zero for padding taps and past the tile;
//!   runs of one output row are contiguous copies at stride 1), then one `M/group x tile x K`
//!   product writes the output tile.
//!
//! Every path ends with the same epilogue on data still in cache: the per-channel bias and an
//! optional fused activation ([`Activation`]: Relu, Clip, LeakyRelu, Sigmoid, SiLU, Tanh,
//! HardSigmoid, HardSwish; [`super::act::bias_act`]).

pub use super::act::Activation;

/// The pointwise path on 16-bit planes (`--activations f16|bf16`), unstaged.
pub(crate) mod act16;
/// The scratch a whole f32 Conv is planned with by the kernel it will run.
mod plan;
use super::split::{MIN_TASK_MACS, SyncPtr};
use super::{IM2COL_TILE, NR, packed_b_len};
pub use plan::{conv2d_plan_bytes, conv2d_tile_for_plan, f32_reads_no_scratch, reads_no_scratch};

/// Geometry of one 2-d convolution (all sizes in elements; NCHW input, OIHW weights).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConvParams {
    /// Batch size.
    pub n: u64,
    /// Input channels (all groups).
    pub c: u64,
    /// Input height.
    pub h: u64,
    /// Input width.
    pub w: u64,
    /// Output channels (all groups).
    pub m: u64,
    /// Groups (divides `c` and `m`).
    pub group: u64,
    /// Kernel height.
    pub kh: u64,
    /// Kernel width.
    pub kw: u64,
    /// Vertical stride.
    pub stride_h: u64,
    /// Horizontal stride.
    pub stride_w: u64,
    /// Top padding.
    pub pad_t: u64,
    /// Left padding.
    pub pad_l: u64,
    /// Vertical dilation.
    pub dil_h: u64,
    /// Horizontal dilation.
    pub dil_w: u64,
    /// Output height.
    pub oh: u64,
    /// Output width.
    pub ow: u64,
    /// Non-zero when a bias (`m` floats) is given.
    pub has_bias: u64,
    /// Fused activation kind (see [`Activation::encode`]).
    pub act: u64,
    /// First activation parameter (f32 bits).
    pub act_a: u64,
    /// Second activation parameter (f32 bits).
    pub act_b: u64,
    /// Non-zero when the weights (not depthwise) come packed by [`prepare_weights`]: per
    /// group, `packed_a_len(M/group, K)` floats in the selected GEMM kernel's A layout (1),
    /// or in the direct path's layout (2, [`ConvParams::is_direct`]: one group).
    pub packed_a: u64,
    /// Output pixels per im2col tile; 0 means [`IM2COL_TILE`]. The planner may choose a
    /// smaller tile (a smaller scratch) at a memory peak: [`conv2d_tile_for_scratch`].
    pub tile: u64,
    /// Threads the scratch has slots for (0 counts as 1): the planner's thread count.
    pub threads: u64,
    /// The weights' storage type ([`super::lowp::WeightType::code`]; 0: f32) for the paths
    /// that read reduced weights in their own layout ([`super::lowp::conv`]: Winograd, the
    /// direct kernels and the small-plane pointwise kernel); the GEMM path marks reduced
    /// weights in `packed_a` instead.
    pub wtype: u64,
    /// Non-zero when the conv adds a residual (a Conv whose `Add` was fused into it,
    /// `ConvAttrs::sum`): on entry `y` holds the residual `r` (the code generator copies it
    /// there when `r` lives elsewhere; usually `y` is planned in place on `r`), and every path
    /// computes `y = act(conv(x) + bias + r)`, reading each element of `y` before writing it.
    pub accumulate: u64,
}

impl ConvParams {
    /// The struct as bytes (for the weights region).
    pub fn to_bytes(&self) -> Vec<u8> {
        [
            self.n,
            self.c,
            self.h,
            self.w,
            self.m,
            self.group,
            self.kh,
            self.kw,
            self.stride_h,
            self.stride_w,
            self.pad_t,
            self.pad_l,
            self.dil_h,
            self.dil_w,
            self.oh,
            self.ow,
            self.has_bias,
            self.act,
            self.act_a,
            self.act_b,
            self.packed_a,
            self.tile,
            self.threads,
            self.wtype,
            self.accumulate,
        ]
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect()
    }

    /// The fused activation ([`Activation::encode`]'s fields).
    pub fn activation(&self) -> Activation {
        Activation::decode(self.act, self.act_a, self.act_b)
    }

    /// Rows of one group's im2col matrix: `C/group * kh * kw`.
    pub fn k(&self) -> usize {
        (self.c / self.group.max(1) * self.kh * self.kw) as usize
    }

    /// Output pixels per im2col tile ([`ConvParams::tile`], [`IM2COL_TILE`] when 0).
    pub fn tile_pixels(&self) -> usize {
        if self.tile == 0 {
            IM2COL_TILE
        } else {
            self.tile as usize
        }
    }

    /// Floats of the panel part of the scratch (rounded up to 64 bytes).
    pub fn panel_floats(&self) -> usize {
        let tile = ((self.oh * self.ow) as usize).min(self.tile_pixels());
        packed_b_len(self.k(), tile).next_multiple_of(16)
    }

    /// The geometry of a 1-d (as height 1) or 2-d convolution from its `[N, C, spatial..]`
    /// input and output shapes and attributes (`pads` as ONNX orders them, begins first); the
    /// activation, bias and `packed_a` fields are left 0. None for other ranks.
    pub fn from_shapes(
        x: &[usize],
        y: &[usize],
        kernel: &[usize],
        strides: &[usize],
        dilations: &[usize],
        pads: &[usize],
        group: usize,
    ) -> Option<ConvParams> {
        let d = kernel.len();
        if !(1..=2).contains(&d) || x.len() != d + 2 || y.len() != d + 2 {
            return None;
        }
        // Dim i of the 2-d geometry (1-d: height 1 with a 1-tap window).
        let two = |v: &[usize], fill: usize, i: usize| -> u64 {
            let j = if d == 1 { i.checked_sub(1) } else { Some(i) };
            j.and_then(|j| v.get(j).copied()).unwrap_or(fill) as u64
        };
        Some(ConvParams {
            n: x[0] as u64,
            c: x[1] as u64,
            h: two(&x[2..], 1, 0),
            w: two(&x[2..], 1, 1),
            m: y[1] as u64,
            group: group.max(1) as u64,
            kh: two(kernel, 1, 0),
            kw: two(kernel, 1, 1),
            stride_h: two(strides, 1, 0),
            stride_w: two(strides, 1, 1),
            pad_t: two(pads, 0, 0),
            pad_l: two(pads, 0, 1),
            dil_h: two(dilations, 1, 0),
            dil_w: two(dilations, 1, 1),
            oh: two(&y[2..], 1, 0),
            ow: two(&y[2..], 1, 1),
            ..ConvParams::default()
        })
    }

    /// Whether [`prepare_weights`] packs the weights for the GEMM core (every path but
    /// depthwise, which reads them as they are).
    pub fn packs_a(&self) -> bool {
        !self.is_depthwise()
    }

    /// Whether the depthwise path runs: one input channel per group, several groups.
    pub fn is_depthwise(&self) -> bool {
        self.group > 1 && self.c == self.group
    }

    /// Whether the direct path runs ([`super::direct`]: AVX-512, constant weights, no
    /// groups; whole groups of 64 output channels with `K >= 64` at any stride, or stride 1
    /// with rows of at least 14 output pixels or a "same" plane); with f32 weights it reads
    /// no scratch, and a whole Conv's plans none ([`conv2d_plan_bytes`]).
    pub fn is_direct(&self) -> bool {
        super::direct::applies(self)
    }

    /// Whether the small-plane pointwise path runs ([`super::pw_small`]: constant weights,
    /// no groups, planes of at most 64 pixels, or 256 with 256+ input channels when 16-pixel
    /// panels would waste more than 5%, AVX-512 or AVX2); it reads no scratch, and a whole
    /// Conv's plans none with f32 weights ([`conv2d_plan_bytes`]).
    pub fn is_pointwise_small(&self) -> bool {
        super::pw_small::applies(self)
    }

    /// Whether the pointwise path runs: a `1 x 1` kernel at stride 1 without padding, so the
    /// input planes are the GEMM's B as they are.
    pub fn is_pointwise(&self) -> bool {
        self.kh == 1
            && self.kw == 1
            && self.stride_h == 1
            && self.stride_w == 1
            && self.pad_t == 0
            && self.pad_l == 0
            && self.oh == self.h
            && self.ow == self.w
    }
}

/// The weights (`M x C/group x kh x kw`, OIHW) as [`arenac_conv2d`] reads them best, written
/// into `out` ([`prepared_len`] floats, e.g. straight into the weights region): packed once
/// per group for the GEMM kernel selected in this process (sets `p.packed_a`), or as they
/// are for the depthwise path. The code generator calls this at compile time.
pub fn prepare_weights(p: &mut ConvParams, w: &[f32], out: &mut [f32]) {
    mark_packed(p);
    if p.packed_a == 0 {
        let n = w.len().min(out.len());
        out[..n].copy_from_slice(&w[..n]);
        return;
    }
    let (g, k) = (p.group.max(1) as usize, p.k());
    let mg = p.m as usize / g;
    let len = super::packed_a_len(mg, k);
    if p.packed_a == super::direct::DIRECT_PACKED {
        // One group; the same length as the GEMM kernel's packing (MR = 12 on AVX-512).
        super::direct::pack(p, &w[..mg * k], &mut out[..len]);
        return;
    }
    if p.packed_a == super::pw_small::PW_SMALL_PACKED {
        let len = super::pw_small::packed_len(p);
        super::pw_small::pack(p, &w[..mg * k], &mut out[..len]);
        return;
    }
    for gi in 0..g {
        let src = &w[gi * mg * k..(gi + 1) * mg * k];
        super::pack_a_all(mg, k, src, k, &mut out[gi * len..(gi + 1) * len]);
    }
}

/// The layout [`prepare_weights`] writes for `p` (marked), as the weights region keys its
/// stored copies: the marking alone does not say it, the direct kernels pack in one of two
/// layouts by the geometry (channels-in-lanes groups or 12-row panels,
/// `direct::block_rows`), so two Convs on one weight tensor with different planes may need
/// two copies.
pub fn packing_name(p: &ConvParams) -> String {
    let direct = if p.packed_a == super::direct::DIRECT_PACKED {
        format!(" block={}", super::direct::block_rows(p))
    } else {
        String::new()
    };
    format!(
        "m={} k={} group={} packed={}{direct}",
        p.m,
        p.k(),
        p.group,
        p.packed_a
    )
}

/// Sets `p.packed_a` to the layout [`prepare_weights`] writes for constant weights: 0 (as they
/// are: the depthwise path), 1 (packed for the GEMM kernel) or the direct path's packing.
pub fn mark_packed(p: &mut ConvParams) {
    if !p.packs_a() {
        p.packed_a = 0;
        return;
    }
    p.packed_a = 1;
    if p.is_direct() {
        p.packed_a = super::direct::DIRECT_PACKED;
    } else if p.is_pointwise_small() {
        p.packed_a = super::pw_small::PW_SMALL_PACKED;
    }
}

/// Floats [`prepare_weights`] writes for `p`.
pub fn prepared_len(p: &ConvParams) -> usize {
    let (g, k) = (p.group.max(1) as usize, p.k());
    if !p.packs_a() {
        return (p.m as usize).saturating_mul(k);
    }
    if p.packed_a == super::pw_small::PW_SMALL_PACKED {
        return super::pw_small::packed_len(p);
    }
    super::packed_a_len(p.m as usize / g, k).saturating_mul(g)
}

/// The two parts of [`arenac_conv2d`]'s scratch, in floats: the panel (an im2col tile, or the
/// pointwise path's copy of a last partial 16-column panel; rounded up to 64 bytes) and, after
/// it, the GEMM core's A scratch (none when the weights come packed). Depthwise needs none.
fn scratch_parts(p: &ConvParams) -> (usize, usize) {
    if p.is_depthwise() {
        return (0, 0);
    }
    let k = p.k();
    let panel = if p.is_pointwise() {
        // Tiles are multiples of NR (every tile [`conv2d_tiles`] offers is) except a last one
        // of pixels % NR.
        if ((p.oh * p.ow) as usize).is_multiple_of(NR) {
            0
        } else {
            k.saturating_mul(NR).next_multiple_of(16)
        }
    } else {
        p.panel_floats()
    };
    let a = if p.packed_a != 0 {
        0
    } else {
        super::a_scratch_floats((p.m / p.group.max(1)) as usize, k).next_multiple_of(16)
    };
    (panel, a)
}

// The `packed_a` tags of the kernel paths with weights in a layout of their own: distinct,
// or one path's weights would be read by another's kernel.
const _: () = assert!(
    super::direct::DIRECT_PACKED != super::pw_small::PW_SMALL_PACKED
        && super::direct::DIRECT_PACKED != super::winograd::WINOGRAD_PACKED
        && super::pw_small::PW_SMALL_PACKED != super::winograd::WINOGRAD_PACKED
        && super::direct::DIRECT_PACKED > 1
        && super::pw_small::PW_SMALL_PACKED > 1
        && super::winograd::WINOGRAD_PACKED > 1
        && super::winograd::WINOGRAD_U_PACKED > 1
        && super::winograd::WINOGRAD_U_PACKED != super::direct::DIRECT_PACKED
        && super::winograd::WINOGRAD_U_PACKED != super::pw_small::PW_SMALL_PACKED
        && super::winograd::WINOGRAD_U_PACKED != super::winograd::WINOGRAD_PACKED
);

/// Scratch bytes [`arenac_conv2d`] needs for `p` (with `packed_a` as [`prepare_weights`] will
/// set it: see [`ConvParams::packs_a`]). The planner (`crate::ops::Op::scratch_bytes`) and
/// the code generator both size the scratch by this function.
pub fn conv2d_scratch_bytes(p: &ConvParams) -> usize {
    if super::winograd::marks(p.packed_a) {
        return super::winograd::scratch_bytes(p);
    }
    if p.packed_a == super::direct::DIRECT_PACKED && p.wtype != 0 {
        return super::lowp::conv::direct_scratch_bytes(p);
    }
    let (panel, a) = scratch_parts(p);
    panel
        .saturating_add(a)
        .saturating_mul(4)
        .saturating_mul(p.threads.max(1) as usize)
}

/// Floats of an im2col panel from which the threads of a split product build it together.
const PAR_PANEL_FLOATS: usize = 32 * 1024;

/// The smallest im2col tile the planner may choose (output pixels).
pub const CONV_MIN_TILE: usize = 64;

/// The im2col tiles (output pixels) [`arenac_conv2d`] may run `p` with, largest first:
/// [`IM2COL_TILE`] down to [`CONV_MIN_TILE`] in steps of 32 (multiples of [`NR`], so every
/// tile but a last partial one fills whole packed panels). Only [`IM2COL_TILE`] for the
/// depthwise and pointwise paths, whose scratch does not depend on the tile.
pub fn conv2d_tiles(p: &ConvParams) -> impl Iterator<Item = usize> {
    let min = if p.is_depthwise() || p.is_pointwise() {
        IM2COL_TILE
    } else {
        CONV_MIN_TILE
    };
    (min..=IM2COL_TILE).rev().step_by(32)
}

/// The largest tile of [`conv2d_tiles`] whose [`conv2d_scratch_bytes`] is at most `bytes`
/// (`None` when even the smallest needs more). The planner sizes a Conv's scratch by
/// [`conv2d_scratch_bytes`] at the tile it chooses; the code generator runs the kernel with the
/// tile this function gives for the bytes planned, so the kernel never writes past its
/// scratch.
pub fn conv2d_tile_for_scratch(p: &ConvParams, bytes: usize) -> Option<usize> {
    conv2d_tiles(p).find(|&t| {
        conv2d_scratch_bytes(&ConvParams {
            tile: t as u64,
            ..*p
        }) <= bytes
    })
}

/// `y = act(conv(x, w) + bias)`, spread over the current pool ([`crate::par`]).
///
/// Work is cut into *units*: one image, one group, one tile of output pixels ([`tiling`]).
/// With enough units (or a plane cut into one balanced tile per thread), whole units go to
/// the threads, each with its own slot of the scratch (panel and A scratch); otherwise (fewer
/// pixels than output channels: ResNet's last stages) units run one after the other, the
/// threads build each unit's im2col panel together (by K rows) and split its product
/// ([`super::split::sgemm_split`]). Either way every output element is computed as in a
/// single-threaded run: results are bit-identical at every thread count.
///
/// # Safety
/// `p` points to a valid [`ConvParams`] whose output size matches its input geometry and whose
/// `tile` is 0 or one of [`conv2d_tiles`]; `x` is
/// readable for `n*c*h*w` floats, `w` for `m * c/group * kh * kw` (or, with `packed_a`, for
/// what [`prepare_weights`] returned in this process), `bias` for `m` when
/// `has_bias != 0`; `y` writable for `n*m*oh*ow` floats; `scratch` writable for
/// [`conv2d_scratch_bytes`] bytes; `y` and `scratch` overlap nothing else.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn arenac_conv2d(
    p: *const ConvParams,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    y: *mut f32,
    scratch: *mut f32,
) {
    // SAFETY: valid by the contract.
    let p = unsafe { *p };
    if p.is_depthwise() {
        // The fuse rule never sets `accumulate` on a depthwise conv (group > 1: the residual
        // stays a separate Add); `depthwise::run` does not read `y`.
        // SAFETY: the contract of `depthwise::run` is this function's, less the scratch.
        unsafe { super::depthwise::run(&p, x, w, bias, y) };
        return;
    }
    if super::winograd::marks(p.packed_a) {
        // SAFETY: the contract of `winograd::run` is this function's; the code generator
        // marks a conv so only with OIHW weights (or the precomputed transformed ones) and
        // the scratch `conv2d_scratch_bytes` gives.
        unsafe { super::winograd::run(&p, x, w, bias, y, scratch) };
        return;
    }
    if p.packed_a == super::direct::DIRECT_PACKED {
        // Reduced weights (`p.wtype`) are widened block by block into the scratch slots.
        let lowp = super::lowp::conv::Reduced::of(&p, w, super::lowp::conv::Layout::Direct)
            .map(|r| (r, scratch));
        // SAFETY: the contract of `direct::run` is this function's; the weights were packed
        // for it by `prepare_weights` (f32) or `lowp::conv::pack` (reduced, with the scratch
        // `conv2d_scratch_bytes` gives), in this process, where AVX-512 was selected
        // (`is_direct`).
        unsafe { super::direct::run(&p, x, w, bias, y, lowp) };
        return;
    }
    if p.packed_a == super::pw_small::PW_SMALL_PACKED {
        // Reduced weights (`p.wtype`) are widened in registers as the tiles read them.
        let lowp = super::lowp::conv::Reduced::of(&p, w, super::lowp::conv::Layout::PwSmall);
        // SAFETY: the contract of `pw_small::run` is this function's, less the scratch; the
        // weights were packed for it by `prepare_weights` (f32) or `lowp::conv::pack` in
        // `Layout::PwSmall` (reduced) in this process.
        unsafe { super::pw_small::run(&p, x, w, bias, y, lowp) };
        return;
    }
    let (panel, a_floats) = scratch_parts(&p);
    let slot = panel + a_floats;
    let width = (p.threads.max(1) as usize).min(crate::par::threads());
    let (tile_px, per_thread) = tiling(&p, width);
    let tiles = ((p.oh * p.ow) as usize).div_ceil(tile_px);
    let units = p.n as usize * p.group.max(1) as usize * tiles;
    let (x, w, bias, y, scratch) = (
        SyncPtr(x.cast_mut()),
        SyncPtr(w.cast_mut()),
        SyncPtr(bias.cast_mut()),
        SyncPtr(y),
        SyncPtr(scratch),
    );
    if per_thread {
        crate::par::for_each(units, width, |u, t| {
            // SAFETY: the contract; unit u writes only its own tile of y, thread t < width
            // uses only its own scratch slot (the planner sized `threads` slots); tile_px is
            // at most the planned tile (`tiling`).
            unsafe {
                conv_unit(
                    &p,
                    (x.get(), w.get(), bias.get(), y.get()),
                    (u, tiles, tile_px),
                    scratch.get().wrapping_add(t * slot),
                    None,
                )
            };
        });
    } else {
        for u in 0..units {
            // SAFETY: the contract; one unit at a time, its product split over `width`
            // threads with slot-strided A scratch.
            unsafe {
                conv_unit(
                    &p,
                    (x.get(), w.get(), bias.get(), y.get()),
                    (u, tiles, tile_px),
                    scratch.get(),
                    Some((slot, width)),
                )
            };
        }
    }
}

/// How [`arenac_conv2d`] cuts `p`'s output pixels on `width` threads: the tile (output
/// pixels, at most the planned [`ConvParams::tile_pixels`]) and whether whole units (image,
/// group, tile) go to the threads, each with its own scratch slot (`true`), or the units run
/// one after the other with each product split over the threads (`false`).
///
/// One thread: the planned tile. Several: units go to threads when there are at least two per
/// thread, or when the plane has at least as many pixels as the group has output channels
/// (its A is not the larger operand, so each thread reading all of A costs less than building
/// the panel on one thread); then the pixels are cut into a multiple of `width` tiles if
/// needed, and the tiles are balanced (equal counts of 16-column panels, the last one
/// shorter). Each output element is computed the same way whatever its tile (the same
/// micro-kernel chain over the same K blocks), so the tiling does not change results.
fn tiling(p: &ConvParams, width: usize) -> (usize, bool) {
    let pixels = ((p.oh * p.ow) as usize).max(1);
    let tile_max = p.tile_pixels().min(pixels).max(1);
    if width <= 1 {
        return (tile_max, false);
    }
    let per = (p.n * p.group.max(1)) as usize;
    let mg = (p.m / p.group.max(1)) as usize;
    let mut tiles = pixels.div_ceil(tile_max);
    if per.saturating_mul(tiles) < 2 * width && pixels >= mg {
        // Cut finer: a multiple of `width` units.
        let units = per.saturating_mul(tiles).next_multiple_of(width);
        tiles = units.div_ceil(per).max(tiles);
    }
    let panels = pixels.div_ceil(NR);
    let tile = (panels.div_ceil(tiles.max(1)) * NR).min(tile_max);
    let units = per.saturating_mul(pixels.div_ceil(tile));
    let unit_macs = mg.saturating_mul(p.k()).saturating_mul(tile);
    let balanced = units >= 2 * width || (units >= width && units.is_multiple_of(width));
    if balanced && unit_macs >= MIN_TASK_MACS {
        (tile, true)
    } else {
        (tile_max, false)
    }
}

/// One unit of [`arenac_conv2d`]: image, group and pixel tile `u`, with its panel at
/// `scratch` and its A scratch after the panel. `split`: spread the unit's product over
/// `width` threads whose A scratches are `slot` floats apart; `None`: compute it here.
///
/// # Safety
/// That of [`arenac_conv2d`] for the operands; `scratch` writable for one slot (panel + A
/// scratch), or `width` slots with `split`; nothing else writes this unit's output tile.
unsafe fn conv_unit(
    p: &ConvParams,
    (x, w, bias, y): (*mut f32, *mut f32, *mut f32, *mut f32),
    (u, tiles, tile_px): (usize, usize, usize),
    scratch: *mut f32,
    split: Option<(usize, usize)>,
) {
    let act = p.activation();
    let us = |v: u64| v as usize;
    let (g, ch, cg) = (us(p.group.max(1)), us(p.c), us(p.c / p.group.max(1)));
    let (mg, h, wd) = (us(p.m / p.group.max(1)), us(p.h), us(p.w));
    let pixels = us(p.oh) * us(p.ow);
    let k = p.k();
    let (img, gi, ti) = (u / (g * tiles), (u / tiles) % g, u % tiles);
    let t0 = ti * tile_px;
    let tile = tile_px.min(pixels - t0);
    // Input planes of image img, group gi; output channels gi*mg.. of image img.
    let xg = x.cast_const().wrapping_add((img * ch + gi * cg) * h * wd);
    let yg = y.wrapping_add((img * us(p.m) + gi * mg) * pixels);
    let a = if let Some(a) = super::lowp::conv_a_view(p, w.cast_const(), gi) {
        a
    } else if p.packed_a != 0 {
        // Group gi's packed block (prepare_weights' layout, same kernel).
        super::AView::packed(
            w.cast_const().wrapping_add(gi * super::packed_a_len(mg, k)),
            mg,
        )
    } else {
        // W of group gi is mg x k row-major inside the m * k weights.
        super::AView::Rows(w.cast_const().wrapping_add(gi * mg * k), k)
    };
    let (panel, _) = scratch_parts(p);
    let a_scratch = scratch.wrapping_add(panel);
    let b = if p.is_pointwise() {
        // SAFETY: B is the cg (= k) input planes of `pixels` floats from xg, of which
        // columns t0..t0+tile are used (row stride `pixels`); a last partial panel (only
        // when pixels % NR != 0, tiles being multiples of NR otherwise) is copied into the
        // panel scratch, which then holds k * NR floats (scratch_parts).
        unsafe { super::rowmajor_b(k, tile, xg.wrapping_add(t0), pixels, scratch) }
    } else {
        // SAFETY: packed_b_len(k, tile) <= panel_floats (the panel part of scratch_parts),
        // writable by the contract and disjoint from x; the input planes of this group lie
        // at xg.
        match split {
            Some((_, width)) if width > 1 && k * tile >= PAR_PANEL_FLOATS => {
                // Built by the threads together: `width` ranges of K rows.
                let (xs, out) = (SyncPtr(xg.cast_mut()), SyncPtr(scratch));
                crate::par::for_each(width, width, |c, _| {
                    let rows = k * c / width..k * (c + 1) / width;
                    // SAFETY: as below; the row ranges are disjoint.
                    unsafe { im2col_panel(p, xs.get(), t0, tile, out.get(), rows) };
                });
            }
            // SAFETY: as above, all rows on this thread.
            _ => unsafe { im2col_panel(p, xg, t0, tile, scratch, 0..k) },
        }
        super::BView::packed(scratch, k, tile)
    };
    let c = yg.wrapping_add(t0);
    let (yc, bc) = (SyncPtr(c), SyncPtr(bias));
    let epilogue = |rows: std::ops::Range<usize>, cols: std::ops::Range<usize>| {
        if p.has_bias == 0 && act == Activation::None {
            return;
        }
        for mi in rows {
            let b = if p.has_bias != 0 {
                // SAFETY: channel gi*mg+mi < m of the bias (m floats).
                unsafe { *bc.get().add(gi * mg + mi) }
            } else {
                0.0
            };
            // SAFETY: columns `cols` of output channel row mi of this tile, inside y, written
            // by this block only.
            let row = unsafe {
                std::slice::from_raw_parts_mut(
                    yc.get().wrapping_add(mi * pixels + cols.start),
                    cols.len(),
                )
            };
            super::act::bias_act(row, b, act);
        }
    };
    let kernel = super::selected_kernel();
    match split {
        // SAFETY: W of group gi is mg x k (row-major or packed for this kernel); B as built
        // above; C is mg rows of `tile` floats at stride `pixels` inside y; the A scratch
        // slots follow each panel (unused when A is packed); y overlaps neither weights nor
        // scratch.
        Some((slot, width)) => unsafe {
            super::split::sgemm_split(
                kernel,
                (mg, tile, k),
                a,
                b,
                (c, pixels),
                p.accumulate != 0,
                (a_scratch, slot, width),
                &epilogue,
            )
        },
        None => {
            let acc = p.accumulate != 0;
            // SAFETY: as above, on this thread with its own A scratch.
            unsafe { super::sgemm_core(kernel, mg, tile, k, a, b, c, pixels, acc, a_scratch) };
            epilogue(0..mg, 0..tile);
        }
    }
}

/// Writes rows `rows` (of the `K` rows) of the im2col panel of output pixels `t0..t0+tile`
/// in packed-B layout at `out`; disjoint row ranges write disjoint floats, so threads may
/// build one panel together.
///
/// Row by row of K (tap `(ci, ky, kx)`), the tile's output pixels are walked as segments of
/// one output row each; a segment is one input row read at stride `sw` (zeros where the tap
/// falls in the padding), written in pieces that stop at the 16-column panel boundaries, so
/// the bookkeeping is per segment, not per element.
///
/// # Safety
/// `xg` readable for `C/group` planes of `h*w` floats; `out` writable for
/// `packed_b_len(p.k(), tile)` floats and disjoint from `xg`; `t0 + tile <= oh*ow`;
/// `rows.end <= p.k()`; nothing else reads or writes these rows of the panel meanwhile.
unsafe fn im2col_panel(
    p: &ConvParams,
    xg: *const f32,
    t0: usize,
    tile: usize,
    out: *mut f32,
    rows: std::ops::Range<usize>,
) {
    let u = |v: u64| v as usize;
    let (cg, h, wd) = (u(p.c / p.group.max(1)), u(p.h), u(p.w));
    let (kh, kw, ow) = (u(p.kh).max(1), u(p.kw).max(1), u(p.ow).max(1));
    let (sh, sw, pt, pl) = (
        u(p.stride_h),
        u(p.stride_w),
        p.pad_t as isize,
        p.pad_l as isize,
    );
    let (dh, dw) = (u(p.dil_h), u(p.dil_w));
    let k = p.k();
    if tile == 0 || rows.end > k {
        return;
    }
    // SAFETY: the group's cg input planes, readable by the contract, disjoint from `out`.
    let xs = unsafe { std::slice::from_raw_parts(xg, cg * h * wd) };
    // Columns past the tile in the last panel are zero in every row.
    let cols_last = tile - (tile.div_ceil(NR) - 1) * NR;
    let last = (tile.div_ceil(NR) - 1) * k * NR;
    let (oy0, ox0) = (t0 / ow, t0 % ow);
    let (mut ci, mut ky, mut kx) = (
        rows.start / (kh * kw),
        rows.start / kw % kh,
        rows.start % kw,
    );
    for r in rows {
        if cols_last < NR {
            // SAFETY: row r of the last panel, inside the panel (contract), NR - cols_last
            // floats from column cols_last.
            unsafe { std::ptr::write_bytes(out.add(last + r * NR + cols_last), 0, NR - cols_last) };
        }
        let plane = &xs[ci * h * wd..(ci + 1) * h * wd];
        // Columns j0 + i (i < n) of row r: the floats at out[(j / NR) * k * NR + r * NR
        // + j % NR], written as pieces inside one panel.
        let put = |j0: usize, from: usize, to: usize, src: Option<(&[f32], usize)>| {
            let mut i = from;
            while i < to {
                let j = j0 + i;
                let n = (NR - j % NR).min(to - i);
                let at = (j / NR) * k * NR + r * NR + j % NR;
                // SAFETY: j + n <= tile and r < k: inside the panel of packed_b_len(k, tile)
                // floats, in row r, which only this call writes.
                let d = unsafe { std::slice::from_raw_parts_mut(out.add(at), n) };
                match src {
                    None => d.fill(0.0),
                    Some((row, first)) => {
                        // Element i of the segment is row[first + (i - from) * sw].
                        let s0 = first + (i - from) * sw;
                        if sw == 1 {
                            d.copy_from_slice(&row[s0..s0 + n]);
                        } else {
                            for (t, d) in d.iter_mut().enumerate() {
                                *d = row[s0 + t * sw];
                            }
                        }
                    }
                }
                i += n;
            }
        };
        let (mut j0, mut oy, mut ox) = (0usize, oy0, ox0);
        while j0 < tile {
            let len = (tile - j0).min(ow - ox);
            let iy = (oy * sh + ky * dh) as isize - pt;
            if iy < 0 || iy >= h as isize {
                put(j0, 0, len, None);
            } else {
                let src = &plane[iy as usize * wd..(iy as usize + 1) * wd];
                // Input column of segment element i: ix0 + i * sw; valid ones are lo..hi
                // (found without division: only columns in the padding step).
                let ix0 = (ox * sw + kx * dw) as isize - pl;
                let s = sw as isize;
                let mut lo = 0;
                while lo < len && ix0 + (lo as isize) * s < 0 {
                    lo += 1;
                }
                let mut hi = len;
                while hi > lo && ix0 + (hi as isize - 1) * s >= wd as isize {
                    hi -= 1;
                }
                put(j0, 0, lo, None);
                if hi > lo {
                    let first = (ix0 + lo as isize * s) as usize;
                    put(j0, lo, hi, Some((src, first)));
                }
                put(j0, hi, len, None);
            }
            j0 += len;
            oy += 1;
            ox = 0;
        }
        kx += 1;
        if kx == kw {
            kx = 0;
            ky += 1;
            if ky == kh {
                ky = 0;
                ci += 1;
            }
        }
    }
}
