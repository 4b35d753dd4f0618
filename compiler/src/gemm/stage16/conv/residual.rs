//! A fused residual on a 16-bit Conv (`ConvParams::accumulate`, `crate::ops::ConvAttrs::sum`):
//! the output holds the residual `r` on entry and the Conv computes
//! `y = act(conv(x, w) + r + bias)`, `r` widened and added in f32 as the f32 kernel adds it,
//! rounded once on the store. The unstaged kernels read `r` themselves
//! (`crate::gemm::pw_small::run16`'s tile epilogue, `crate::gemm::conv::act16::run16`'s f32
//! tile); the staged paths (row bands, pointwise runs, Winograd bands) widen the band of `y`
//! into the band's f32 output ([`widen_out`]) before running the f32 kernel with
//! `accumulate` on it, so the bits before the rounding are the f32 fused kernel's on the
//! widened values.

use super::super::split::{Shared, for_each_spread};
use super::super::{N16, widen};
use crate::gemm::conv::ConvParams;

/// Whether a 16-bit Conv of `c` input channels and `group` groups may take a fused residual:
/// every path its group-1 lowering may take adds it, but the unstaged row kernel of first
/// layers (`crate::gemm::direct::act16::run16`, at most `MAX_C` input channels), which
/// this rule keeps out whatever the CPU. The fusion rule (`crate::analysis::fuse::residual`)
/// and the lowering (`crate::codegen::lower::act16`) ask the same.
pub fn residual_ok(c: usize, group: usize) -> bool {
    group <= 1 && c as u64 > crate::gemm::direct::act16::MAX_C
}

/// Whether [`super::conv`] runs `p` with its fused residual: [`residual_ok`] for its
/// geometry, `p.accumulate` set.
pub fn fused(p: &ConvParams) -> bool {
    p.accumulate != 0 && residual_ok(p.c as usize, p.group as usize)
}

/// `planes` runs of `run` 16-bit values (`src`, runs `src_stride` apart) widened into
/// `planes` rows of `dst_stride >= run` floats (`dst`), zero past `run`: the residual of a
/// band (a run of output rows or pixels of each output channel) in the band's f32 output,
/// spread as the staged paths' narrowing is.
///
/// # Safety
/// `src` readable for the runs, `dst` writable for `planes * dst_stride` floats, disjoint.
pub(super) unsafe fn widen_out(
    t: N16,
    (src, src_stride): (*const u16, usize),
    (dst, dst_stride): (*mut f32, usize),
    planes: usize,
    run: usize,
) {
    let (s, d) = (Shared::of(src), Shared(dst));
    for_each_spread(planes, planes * run, |ch| {
        // SAFETY: run `ch < planes` of both (the contract).
        unsafe {
            let from = std::slice::from_raw_parts(s.get().add(ch * src_stride), run);
            let to = std::slice::from_raw_parts_mut(d.get().add(ch * dst_stride), dst_stride);
            widen(t, from, &mut to[..run]);
            to[run..].fill(0.0);
        }
    });
}
