//! Max/AveragePool on 16-bit data: a block of whole planes widened into f32 scratch, pooled by
//! [`crate::gemm::pool::arenac_pool2d`] into the rest of the scratch, narrowed into the output.

use super::{N16, narrow, widen};
use crate::gemm::pool::{PoolParams, arenac_pool2d};

/// Planes per block for `p`: as many as fit [`block_budget`] bytes of f32 staging (input and
/// output planes), at least one.
pub fn block_planes(p: &PoolParams) -> usize {
    let per = (p.h * p.w + p.oh * p.ow).saturating_mul(4).max(1) as usize;
    (block_budget(p) / per).clamp(1, (p.planes as usize).max(1))
}

/// The staging budget of a pooling: 1/32 of its 16-bit input and output, between 16 KiB and
/// [`super::STAGE_BYTES`] (small against the arena's peak, large enough to amortize a call).
fn block_budget(p: &PoolParams) -> usize {
    let bytes16 = (p.planes * (p.h * p.w + p.oh * p.ow)).saturating_mul(2) as usize;
    (bytes16 / 32).clamp(16 << 10, super::STAGE_BYTES)
}

/// Whether [`pool`] may write its output over its input: when an output plane is no larger
/// than an input plane, block `k`'s output ends before block `k + 1`'s input starts.
pub fn in_place_ok(p: &PoolParams) -> bool {
    p.oh * p.ow <= p.h * p.w
}

/// Scratch bytes [`pool`] uses for `p`: one block of input planes, then one of output
/// planes, in f32 (each part rounded up to 64 bytes).
pub fn scratch_bytes(p: &PoolParams) -> usize {
    let (xin, yout) = parts(p);
    (xin + yout) * 4
}

/// Floats of the two scratch parts.
fn parts(p: &PoolParams) -> (usize, usize) {
    let b = block_planes(p);
    let up = |f: u64| (f as usize).saturating_mul(b).next_multiple_of(16);
    (up(p.h * p.w), up(p.oh * p.ow))
}

/// `y = pool(x)` on 16-bit data, block by block.
///
/// # Safety
/// `p` valid for [`arenac_pool2d`]; `x` readable for `planes*h*w` values, `y` writable for
/// `planes*oh*ow` values, not overlapping `x` — or `y == x` when [`in_place_ok`] holds (a
/// block's output planes land over input planes already read); `scratch` writable for [`scratch_bytes`]
/// bytes, 4-aligned, overlapping neither.
pub unsafe fn pool(t: N16, p: &PoolParams, x: *const u16, y: *mut u16, scratch: *mut f32) {
    let (xin, _) = parts(p);
    let block = block_planes(p);
    let (hw, ohw) = ((p.h * p.w) as usize, (p.oh * p.ow) as usize);
    let planes = p.planes as usize;
    let mut at = 0;
    while at < planes {
        let b = block.min(planes - at);
        let q = PoolParams {
            planes: b as u64,
            ..*p
        };
        // SAFETY: the ranges lie inside `x`, `y` and the scratch by the contract; the scratch
        // parts are disjoint ([`parts`]).
        unsafe {
            {
                let xs = std::slice::from_raw_parts(x.add(at * hw), b * hw);
                let sx = std::slice::from_raw_parts_mut(scratch, b * hw);
                widen(t, xs, sx);
            }
            let sy = scratch.add(xin);
            arenac_pool2d(&q, scratch, sy);
            let ys = std::slice::from_raw_parts_mut(y.add(at * ohw), b * ohw);
            narrow(t, std::slice::from_raw_parts(sy, b * ohw), ys);
        }
        at += b;
    }
}
