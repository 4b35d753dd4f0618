//! 3-d convolution (`[N, C, D, H, W]` input, `[M, C/group, KD, KH, KW]` weights), f32: a
//! precompiled kernel run through `crate::codegen::host` (1-d and 2-d convolutions take
//! [`super::conv`]).
//!
//! im2col by output depth slice: for each image, group and output depth `od`, the output
//! plane (`OH * OW` pixels) is cut into tiles of [`Conv3d::tile`] pixels; a tile's im2col panel
//! (`K = C/group * KD * KH * KW` rows, one column per output pixel) is written straight in the
//! packed-B layout of [`super::arenac_sgemm`] (16-wide column panels, zero for padding taps and
//! past the tile), then one `M/group x tile x K` product writes the output tile (rows at the
//! output's channel stride), and the epilogue adds the bias and applies the fused activation
//! ([`super::act::bias_act`]) on it while it is in cache.
//!
//! Threads take whole tiles (each with its own panel and A-packing slot in the scratch, the
//! product run on that thread): every output element is computed by the same sequence of
//! operations at any thread count, so results are bit-identical across threads. No
//! allocation: the geometry and the scratch layout are fixed when compiling.

use super::act::{Activation, bias_act};
use super::lowp::{LowpA, WeightType, lowp_a_bytes, pack_a_lowp};
use super::split::{SyncPtr, sgemm_split};
use super::{AView, BView, NR, a_scratch_slot, packed_a_len, packed_b_len, selected_kernel};

/// Bytes of im2col panel a thread's tile aims at (the tile is at least one 16-column panel).
const PANEL_BYTES: usize = 1 << 20;

/// Index of column `j` of row `row` in a packed panel of `k` rows.
#[inline]
fn at(k: usize, row: usize, j: usize) -> usize {
    (j / NR * k + row) * NR + j % NR
}

/// Writes `vals` into row `row` from column `j` on (split at the 16-column panel edges).
#[inline]
fn put(panel: &mut [f32], k: usize, row: usize, mut j: usize, mut vals: &[f32]) {
    while !vals.is_empty() {
        let n = (NR - j % NR).min(vals.len());
        let d = at(k, row, j);
        // An element loop, not `copy_from_slice`: runs are at most 16 floats, short for a
        // `memmove` call.
        for (o, v) in panel[d..d + n].iter_mut().zip(&vals[..n]) {
            *o = *v;
        }
        (j, vals) = (j + n, &vals[n..]);
    }
}

/// Zeroes `len` columns of row `row` from column `j` on.
#[inline]
fn zero(panel: &mut [f32], k: usize, row: usize, mut j: usize, mut len: usize) {
    while len > 0 {
        let n = (NR - j % NR).min(len);
        let d = at(k, row, j);
        panel[d..d + n].fill(0.0);
        (j, len) = (j + n, len - n);
    }
}

/// One 3-d convolution geometry (sizes in elements).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Conv3d {
    /// Batch.
    pub n: usize,
    /// Input channels (all groups).
    pub c: usize,
    /// Output channels (all groups).
    pub m: usize,
    /// Channel groups.
    pub groups: usize,
    /// Input spatial dims `[D, H, W]`.
    pub input: [usize; 3],
    /// Output spatial dims.
    pub output: [usize; 3],
    /// Kernel spatial dims.
    pub kernel: [usize; 3],
    /// Strides.
    pub strides: [usize; 3],
    /// Dilations.
    pub dilations: [usize; 3],
    /// Pads at the beginning of each spatial dim (the end pads are implied by the shapes).
    pub pad_begin: [usize; 3],
    /// A bias input is given.
    pub has_bias: bool,
    /// The fused activation applied after the bias.
    pub act: Activation,
    /// Threads the kernel may use (scratch slots).
    pub threads: usize,
    /// The weights come packed for the GEMM core, group by group ([`Conv3d::pack_weights`]);
    /// else row-major as ONNX stores them (run-time weights), packed per product.
    pub packed_a: bool,
    /// The type packed weights are stored in (f32, or a reduced type widened by the core).
    pub wtype: WeightType,
}

impl Conv3d {
    /// The geometry of a Conv with these shapes and attributes, or `None` when they are not
    /// those of a consistent 3-d convolution (`pads` as `[begin.., end..]`).
    #[allow(clippy::too_many_arguments)]
    pub fn from_shapes(
        x: &[usize],
        y: &[usize],
        w: &[usize],
        kernel: &[usize],
        strides: &[usize],
        dilations: &[usize],
        pads: &[usize],
        groups: usize,
    ) -> Option<Conv3d> {
        let three = |v: &[usize]| -> Option<[usize; 3]> { v.try_into().ok() };
        let (&[n, c, ..], &[yn, m, ..]) = (x, y) else {
            return None;
        };
        let groups = groups.max(1);
        let p = Conv3d {
            n,
            c,
            m,
            groups,
            input: three(x.get(2..)?)?,
            output: three(y.get(2..)?)?,
            kernel: three(kernel)?,
            strides: three(strides)?,
            dilations: three(dilations)?,
            pad_begin: three(pads.get(..3)?)?,
            has_bias: false,
            act: Activation::None,
            threads: 1,
            packed_a: false,
            wtype: WeightType::F32,
        };
        let k_ok = w.len() == 5 && w[0] == m && w[1] * groups == c && w[2..] == p.kernel;
        let fits = |d: usize| -> Option<()> {
            let span = p.kernel[d].checked_sub(1)?.checked_mul(p.dilations[d])? + 1;
            let padded = p.input[d] + pads.get(3 + d)? + p.pad_begin[d];
            let out = padded.checked_sub(span)?.checked_div(p.strides[d])? + 1;
            (out == p.output[d]).then_some(())
        };
        let shape_ok = (0..3).all(|d| fits(d).is_some());
        (yn == n && c % groups == 0 && m % groups == 0 && k_ok && shape_ok && p.kernel_len() > 0)
            .then_some(p)
    }

    /// Taps of one output channel: `C/group * KD * KH * KW` (the GEMM's K).
    pub fn kernel_len(&self) -> usize {
        self.c / self.groups * self.kernel.iter().product::<usize>()
    }

    /// Output pixels per tile: whole pairs of 16-column panels filling about [`PANEL_BYTES`]
    /// (at least one panel), at most the output plane (rounded up to a panel).
    pub fn tile(&self) -> usize {
        let plane = self.output[1] * self.output[2];
        // Pairs of panels: the widest micro-kernel takes 32 columns.
        let fit = (PANEL_BYTES / 4 / self.kernel_len().max(1)) / (2 * NR) * (2 * NR);
        fit.max(NR).min(plane.next_multiple_of(NR)).max(NR)
    }

    /// Floats of one packed im2col panel (a multiple of 16: slots stay 64-byte aligned).
    fn panel_floats(&self) -> usize {
        packed_b_len(self.kernel_len(), self.tile()).next_multiple_of(16)
    }

    /// Floats of one A-packing slot: none with packed weights.
    fn a_slot_floats(&self) -> usize {
        if self.packed_a {
            0
        } else {
            a_scratch_slot(self.m / self.groups, self.kernel_len())
        }
    }

    /// Scratch bytes: one packed panel and one A-packing slot per thread (panels first).
    pub fn scratch_bytes(&self) -> usize {
        (self.panel_floats().saturating_add(self.a_slot_floats()))
            .saturating_mul(self.threads.max(1))
            .saturating_mul(4)
    }

    /// Bytes of one group's packed weights (a multiple of 64 when reduced).
    fn group_bytes(&self) -> usize {
        let (mg, k) = (self.m / self.groups, self.kernel_len());
        if self.wtype.is_reduced() {
            lowp_a_bytes(self.wtype, mg, k).next_multiple_of(64)
        } else {
            packed_a_len(mg, k) * 4
        }
    }

    /// Bytes of the weights as the kernel reads them: packed per group (`packed_a`), or
    /// `M * K` f32.
    pub fn weights_bytes(&self) -> usize {
        if self.packed_a {
            self.groups * self.group_bytes()
        } else {
            self.m * self.kernel_len() * 4
        }
    }

    /// Packs f32 ONNX weights (`M x K` row-major) group by group for the selected GEMM kernel
    /// into `out` ([`Conv3d::weights_bytes`] / 4 floats with `packed_a` and f32 `wtype`).
    ///
    /// # Panics
    /// If `w` holds fewer than `M * K` floats or `out` fewer than the packed length (caller
    /// bugs: the code generator sizes both from checked types).
    pub fn pack_weights(&self, w: &[f32], out: &mut [f32]) {
        let (mg, k) = (self.m / self.groups, self.kernel_len());
        let len = packed_a_len(mg, k);
        for g in 0..self.groups {
            super::pack_a_all(
                mg,
                k,
                &w[g * mg * k..][..mg * k],
                k,
                &mut out[g * len..][..len],
            );
        }
    }

    /// Packs ONNX weights (`w(i)` is element `i` of `M x K` row-major) group by group in the
    /// reduced [`Conv3d::wtype`] into `out` ([`Conv3d::weights_bytes`]); `done(e)` once every
    /// element below `e` has been read (as [`pack_a_lowp`]).
    ///
    /// # Panics
    /// If `out` is shorter than [`Conv3d::weights_bytes`] (a caller bug).
    pub fn pack_weights_lowp(
        &self,
        w: &dyn Fn(usize) -> f32,
        out: &mut [u8],
        done: &mut dyn FnMut(usize),
    ) {
        let (mg, k) = (self.m / self.groups, self.kernel_len());
        let piece = self.group_bytes();
        for g in 0..self.groups {
            let first = g * mg * k;
            let dst = &mut out[g * piece..][..piece];
            pack_a_lowp(self.wtype, mg, k, |i| w(first + i), dst, &mut |e| {
                done(first + e)
            });
        }
    }

    /// Elements of X and Y.
    pub fn lens(&self) -> [usize; 2] {
        let p = |v: &[usize; 3]| v.iter().product::<usize>();
        [
            self.n * self.c * p(&self.input),
            self.n * self.m * p(&self.output),
        ]
    }

    /// Writes the packed im2col panel of output pixels `j0..j0 + cols` of depth slice `od`, image
    /// `img`, group `g` into `panel` (`packed_b_len(K, tile)` floats).
    fn im2col(
        &self,
        x: &[f32],
        (img, g, od): (usize, usize, usize),
        j0: usize,
        cols: usize,
        panel: &mut [f32],
    ) {
        let [d_in, h_in, w_in] = self.input;
        let [_, _, ow] = self.output;
        let [kd, kh, kw] = self.kernel;
        let [sd, sh, sw] = self.strides;
        let [dd, dh, dw] = self.dilations;
        let [pd, ph, pw] = self.pad_begin;
        let k = self.kernel_len();
        let cg = self.c / self.groups;
        let panels = cols.div_ceil(NR);
        let plane = h_in * w_in;
        let mut row = 0;
        for ci in 0..cg {
            let chan = &x[((img * self.c + g * cg + ci) * d_in) * plane..][..d_in * plane];
            for a in 0..kd {
                let id = (od * sd + a * dd).checked_sub(pd).filter(|&i| i < d_in);
                for b in 0..kh {
                    for e in 0..kw {
                        let Some(id) = id else {
                            zero(panel, k, row, 0, panels * NR);
                            row += 1;
                            continue;
                        };
                        let src = &chan[id * plane..][..plane];
                        // Output columns whose input column is inside the row: [lo, hi).
                        let off = e * dw;
                        let lo = pw.saturating_sub(off).div_ceil(sw).min(ow);
                        let hi = (w_in + pw).saturating_sub(off).div_ceil(sw).clamp(lo, ow);
                        let (mut j, mut y) = (0, j0 / ow);
                        let mut x0 = j0 % ow;
                        while j < cols {
                            let run = (ow - x0).min(cols - j);
                            let ih = (y * sh + b * dh).checked_sub(ph).filter(|&i| i < h_in);
                            match ih {
                                None => zero(panel, k, row, j, run),
                                Some(ih) => {
                                    let (a0, a1) = (lo.clamp(x0, x0 + run), hi.clamp(x0, x0 + run));
                                    zero(panel, k, row, j, a0 - x0);
                                    let line = &src[ih * w_in..][..w_in];
                                    let first = (a0 * sw + off).wrapping_sub(pw);
                                    if a1 > a0 && sw == 1 {
                                        put(
                                            panel,
                                            k,
                                            row,
                                            j + a0 - x0,
                                            &line[first..first + a1 - a0],
                                        );
                                    } else {
                                        for (t, q) in (a0..a1).enumerate() {
                                            panel[at(k, row, j + a0 - x0 + t)] =
                                                line[first + (q - a0) * sw];
                                        }
                                    }
                                    zero(panel, k, row, j + a1 - x0, x0 + run - a1);
                                }
                            }
                            (j, x0, y) = (j + run, 0, y + 1);
                        }
                        zero(panel, k, row, cols, panels * NR - cols);
                        row += 1;
                    }
                }
            }
        }
    }

    /// Runs the convolution: `y = act(conv(x, w) + bias)`, `w` the weights' bytes as
    /// [`Conv3d::weights_bytes`] describes them.
    ///
    /// # Panics
    /// If a slice is shorter than [`Conv3d::lens`] (`w` than [`Conv3d::weights_bytes`], `bias`
    /// than M when given, `scratch`
    /// than [`Conv3d::scratch_bytes`]): caller bugs, the code generator sizes them from checked
    /// types.
    pub fn run(
        &self,
        x: &[f32],
        w: &[u8],
        bias: Option<&[f32]>,
        y: &mut [f32],
        scratch: &mut [f32],
    ) {
        let [xl, yl] = self.lens();
        let (x, w, y) = (&x[..xl], &w[..self.weights_bytes()], &mut y[..yl]);
        // f32 weights are read as floats: the region and the arena align them to 64 bytes.
        assert!(self.wtype.is_reduced() || w.as_ptr().cast::<f32>().is_aligned());
        let bias = bias.map(|b| &b[..self.m]);
        let k = self.kernel_len();
        let mg = self.m / self.groups;
        let [od_n, oh, ow] = self.output;
        let plane = oh * ow;
        let tile = self.tile();
        let tiles = plane.div_ceil(tile);
        let tasks = self.n * self.groups * od_n * tiles;
        let slots = self.threads.max(1);
        let (pf, af) = (self.panel_floats(), self.a_slot_floats());
        let scratch = &mut scratch[..(pf + af) * slots];
        // Threads take whole tiles when there are enough of them (each tile's product on its
        // thread); otherwise the tiles run in turn and each product uses the threads.
        let macs = mg * k * tile;
        let wide = crate::par::width(crate::par::cost::gemm_ns(macs.saturating_mul(tasks)), slots);
        let (width, gemm_slots) = if tasks >= wide { (wide, 1) } else { (1, slots) };
        let (yp, sp) = (SyncPtr(y.as_mut_ptr()), SyncPtr(scratch.as_mut_ptr()));
        let kernel = selected_kernel();
        crate::par::for_each(tasks, width, |task, thread| {
            let (rest, t) = (task / tiles, task % tiles);
            let (rest, od) = (rest / od_n, rest % od_n);
            let (img, g) = (rest / self.groups, rest % self.groups);
            let j0 = t * tile;
            let cols = tile.min(plane - j0);
            // SAFETY: `thread < width <= slots`: panel `thread` and A slot `thread` (or, with
            // one task at a time, all A slots) belong to this task alone.
            let panel = unsafe { std::slice::from_raw_parts_mut(sp.get().add(thread * pf), pf) };
            self.im2col(x, (img, g, od), j0, cols, panel);
            let a_slots = sp.get().wrapping_add(slots * pf + thread * af);
            let a = match (self.packed_a, self.wtype.is_reduced()) {
                (true, true) => AView::Lowp(LowpA::new(
                    w[g * self.group_bytes()..].as_ptr(),
                    self.wtype,
                    mg,
                    k,
                )),
                (true, false) => {
                    AView::packed(w[g * self.group_bytes()..].as_ptr().cast::<f32>(), mg)
                }
                (false, _) => AView::Rows(w[g * mg * k * 4..].as_ptr().cast::<f32>(), k),
            };
            let ld = od_n * plane;
            let c0 = ((img * self.m + g * mg) * od_n + od) * plane + j0;
            let epilogue = |rows: std::ops::Range<usize>, cs: std::ops::Range<usize>| {
                if bias.is_none() && self.act == Activation::None {
                    return;
                }
                for r in rows {
                    // SAFETY: a block of this task's tile, handed to one thread by the core.
                    let row = unsafe {
                        std::slice::from_raw_parts_mut(
                            yp.get().add(c0 + r * ld + cs.start),
                            cs.len(),
                        )
                    };
                    bias_act(row, bias.map_or(0.0, |b| b[g * mg + r]), self.act);
                }
            };
            // SAFETY: A is group g's rows of W (packed or K floats each); the panel is packed
            // for (K, cols); C is the tile's `mg` rows of `cols` floats at stride `ld`, inside
            // Y and written by this task alone; `gemm_slots` A-packing slots of `af` floats
            // from `a_slots` (unused with packed A).
            unsafe {
                sgemm_split(
                    kernel,
                    (mg, cols, k),
                    a,
                    BView::packed(panel.as_ptr(), k, cols),
                    (yp.get().add(c0), ld),
                    false,
                    (a_slots, af, gemm_slots),
                    &epilogue,
                );
            }
        });
    }
}

#[cfg(test)]
mod tests;
