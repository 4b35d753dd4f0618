//! Reduced conv weights for the kernels that read f32 weights in a layout of their own
//! rather than the GEMM core's packed A: Winograd (OIHW, transformed at every run) and the
//! direct kernels ([`super::super::direct`]'s packing). The f32 kernels run unchanged on
//! weights widened block by block as they consume them.
//!
//! Contract (the code generator, [`super::super::conv::arenac_conv2d`] and these kernels
//! rely on it):
//! - the weights (one group: Winograd and the direct kernels have none) are stored in
//!   [`WeightType`] `t` at the element positions of the f32 layout ([`Layout`]: OIHW, or the
//!   direct packing, [`super::super::direct::packed_index`]), then, for int8 only, at the next
//!   64-byte boundary after [`layout_elems`] elements, one f32 scale per output channel (the
//!   same `max |w| / 127` as [`super::pack_a_lowp`]); an element widens to `q * scale`;
//! - they take [`super::conv_lowp_bytes`] bytes in the weights region, the size of the GEMM
//!   layout (OIHW and the direct packing never need more; where the small-plane pointwise
//!   kernel runs, the larger of the GEMM layout and [`Layout::PwSmall`], whose panels round
//!   the output channels up to 16): the region and the prediction `arenac plan` shows do
//!   not depend on the path the planner picks;
//! - [`super::super::conv::ConvParams::wtype`] holds `t`'s code; Winograd widens one row's run
//!   of input channels (at most [`WINO_CI`] x 9 floats, on the stack) as its per-run
//!   transform reads it, so its scratch holds the same f32 transformed weights as with f32
//!   weights; the direct kernels widen one block of output channels (a group of 64 for the
//!   channels-in-lanes kernel, a 12-channel panel otherwise) into their thread's slot of the
//!   scratch ([`direct_slot_floats`], inside what the planner gives the im2col path) once
//!   per task, never the whole layer (the 16-bit staged bands: once per block of output
//!   channels for all bands, `crate::gemm::stage16`'s `conv/blocks.rs`); the small-plane pointwise kernel
//!   ([`super::super::pw_small`]) widens each step's row of its one or two panels in
//!   registers (int8: the accumulated sums times the channel's scale, before the bias);
//! - widening is exact (f16/bf16) or `q as f32 * scale` (int8): the kernels compute on the
//!   very f32 values an f32 model with those weights would hold, so their outputs equal the
//!   f32 kernels' on the widened weights bit for bit (the pointwise kernel with int8 weights:
//!   within rounding, as it scales the sum `sum q x` rather than each weight).

use super::super::conv::ConvParams;
use super::{NR, WeightType, Widener, i8_scale, store};

/// Where the f32 kernel reads its weights from, hence where the reduced ones are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// OIHW as given (Winograd: element `r * k + s`).
    Oihw,
    /// The direct kernels' packing ([`super::super::direct::packed_index`]).
    Direct,
    /// The small-plane pointwise kernel's `W^T` as 16-wide B panels ([`pw_index`]: panel
    /// `r / 16`, row `s`, lane `r % 16`; the output channels rounded up to whole panels).
    PwSmall,
}

/// Whether `p` (marked by [`super::super::conv::mark_packed`]) runs the small-plane pointwise
/// kernel, which reads reduced weights in [`Layout::PwSmall`].
pub fn is_pw_small(p: &ConvParams) -> bool {
    p.packed_a == super::super::pw_small::PW_SMALL_PACKED
}

/// Position of weight (`r`, `s`) (output channel, input channel) in [`Layout::PwSmall`] with
/// `k` input channels: [`super::super::pack_b`]'s layout of `W^T`.
pub(crate) fn pw_index(k: usize, r: usize, s: usize) -> usize {
    ((r / NR) * k + s) * NR + r % NR
}

/// Input channels Winograd widens at a time per output channel.
pub(crate) const WINO_CI: usize = 16;

/// Elements of the layout (before the int8 scales).
pub fn layout_elems(p: &ConvParams, layout: Layout) -> usize {
    match layout {
        Layout::Oihw => (p.m as usize).saturating_mul(p.k()),
        Layout::Direct => super::super::direct::packed_elems(p),
        Layout::PwSmall => super::super::packed_b_len(p.k(), p.m as usize),
    }
}

/// Byte offset of the int8 scales (one f32 per output channel) from the weights' start.
pub(crate) fn scales_at(p: &ConvParams, t: WeightType, layout: Layout) -> usize {
    layout_elems(p, layout)
        .saturating_mul(t.bytes())
        .next_multiple_of(64)
}

/// Rows (output channels) of the layout: `m`, or `m` rounded up to whole panels of the
/// direct packing (padding rows: zero weights, zero scales).
fn layout_rows(p: &ConvParams, layout: Layout) -> usize {
    layout_elems(p, layout) / p.k().max(1)
}

/// Bytes the layout needs in `t` (elements, then int8 scales for [`layout_rows`]).
pub fn layout_bytes(p: &ConvParams, t: WeightType, layout: Layout) -> usize {
    let elems = layout_elems(p, layout).saturating_mul(t.bytes());
    if t == WeightType::I8 {
        scales_at(p, t, layout).saturating_add(layout_rows(p, layout).saturating_mul(4))
    } else {
        elems
    }
}

/// Bytes the weights take in the region: [`super::conv_lowp_bytes`] (the GEMM layout's
/// size, what `arenac plan` predicts), or more if `layout` ever needed it.
pub fn region_bytes(p: &ConvParams, t: WeightType, layout: Layout) -> usize {
    super::conv_lowp_bytes(p, t).max(layout_bytes(p, t, layout))
}

/// Packs the `m x k` weights of `p` (one group; `w(i)` is element `i = row * k + col`,
/// OIHW) in `t` at their `layout` positions into `out` ([`region_bytes`], zeroed), with the
/// int8 scales. Reads the source row by row (each row's scale first) and calls `done(e)`
/// once every source element below `e` has been read, so its pages can go.
pub fn pack(
    p: &ConvParams,
    t: WeightType,
    layout: Layout,
    w: impl Fn(usize) -> f32,
    out: &mut [u8],
    done: &mut dyn FnMut(usize),
) {
    let (m, k) = (p.m as usize, p.k());
    if m == 0 || k == 0 || p.group > 1 || out.len() < layout_bytes(p, t, layout) {
        return;
    }
    let at = scales_at(p, t, layout);
    let direct = super::super::direct::packed_index(p);
    for r in 0..m {
        let scale = if t == WeightType::I8 {
            i8_scale((0..k).fold(0.0f32, |x, c| x.max(w(r * k + c).abs())))
        } else {
            0.0
        };
        for s in 0..k {
            let i = match layout {
                Layout::Oihw => r * k + s,
                Layout::Direct => direct(r, s),
                Layout::PwSmall => pw_index(k, r, s),
            };
            store(t, out, i, w(r * k + s), scale);
        }
        if t == WeightType::I8 {
            out[at + r * 4..at + r * 4 + 4].copy_from_slice(&scale.to_le_bytes());
        }
        if (r + 1) % 16 == 0 || r + 1 == m {
            done((r + 1) * k);
        }
    }
}

/// Reduced weights as a kernel reads them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reduced {
    /// Start of the elements.
    pub(crate) base: *const u8,
    /// Element type (never f32).
    pub(crate) t: WeightType,
    /// One scale per output channel (int8), else null.
    pub(crate) scales: *const f32,
}

// SAFETY: read-only views of the weights region, shared by the threads of one run.
unsafe impl Send for Reduced {}
// SAFETY: as above.
unsafe impl Sync for Reduced {}

impl Reduced {
    /// The view of `p`'s weights at `w` in `layout`, when `p.wtype` is a reduced type.
    pub(crate) fn of(p: &ConvParams, w: *const f32, layout: Layout) -> Option<Reduced> {
        let t = WeightType::from_code(p.wtype).filter(|t| t.is_reduced())?;
        let base = w.cast::<u8>();
        let scales = if t == WeightType::I8 {
            base.wrapping_add(scales_at(p, t, layout)).cast::<f32>()
        } else {
            std::ptr::null()
        };
        Some(Reduced { base, t, scales })
    }

    /// The view of the rows (output channels) from `r0` on of weights with `k` elements per
    /// row in [`Layout::Oihw`]: row `r` of the result is row `r0 + r` of `self`, with its
    /// scale (a pass over some of the output channels, as the staged Winograd bands run).
    pub(crate) fn rows_from(self, r0: usize, k: usize) -> Reduced {
        Reduced {
            base: self.base.wrapping_add(r0 * k * self.t.bytes()),
            t: self.t,
            scales: if self.scales.is_null() {
                self.scales
            } else {
                self.scales.wrapping_add(r0)
            },
        }
    }

    /// Widens elements `first .. first + n` into `dst`; with int8, element `first + i` is
    /// scaled by the scale of channel `ch0 + i % period` (`n` a multiple of `period`).
    ///
    /// # Safety
    /// The elements exist; `dst` writable for `n` floats; with int8, channels `ch0 ..
    /// ch0 + period` exist.
    pub(crate) unsafe fn widen(
        &self,
        first: usize,
        n: usize,
        dst: *mut f32,
        (ch0, period): (usize, usize),
    ) {
        #[cfg(target_arch = "x86_64")]
        if self.t == WeightType::I8
            && !self.scales.is_null()
            && matches!(Widener::best(), Widener::Avx512)
            && (period == 1 || (period.is_multiple_of(16) && n.is_multiple_of(period)))
        {
            // One pass (the widening, then the same multiply per element).
            // SAFETY: the caller's contract; AVX-512F (the best widener).
            unsafe {
                super::x86::widen_i8_scaled_avx512(
                    self.base.add(first),
                    n,
                    dst,
                    self.scales.add(ch0),
                    period,
                )
            };
            return;
        }
        // SAFETY: the caller's contract.
        unsafe {
            Widener::best().widen(self.t, self.base.add(first * self.t.bytes()), n, dst, None);
            if !self.scales.is_null() && period > 0 {
                let s = std::slice::from_raw_parts(self.scales.add(ch0), period);
                let d = std::slice::from_raw_parts_mut(dst, n);
                if let [sc] = s {
                    // One channel (Winograd's runs of a row): one scale for all, vectorized
                    // (runs of one element cost a loop trip each).
                    d.iter_mut().for_each(|x| *x *= sc);
                    return;
                }
                for run in d.chunks_exact_mut(period) {
                    for (x, &sc) in run.iter_mut().zip(s) {
                        *x *= sc;
                    }
                }
            }
        }
    }
}

/// Floats of one thread's slot of the direct kernels' reduced path: the widest block of
/// output channels they read (64 channels in lanes, else a 12-channel panel) times `K`,
/// rounded up to 64 bytes.
pub fn direct_slot_floats(p: &ConvParams) -> usize {
    super::super::direct::block_rows(p)
        .saturating_mul(p.k())
        .next_multiple_of(16)
}

/// Scratch bytes of the direct kernels with reduced weights: one slot per thread.
pub fn direct_scratch_bytes(p: &ConvParams) -> usize {
    direct_slot_floats(p)
        .saturating_mul(4)
        .saturating_mul(p.threads.max(1) as usize)
}

#[cfg(test)]
#[path = "conv_tests.rs"]
mod tests;
