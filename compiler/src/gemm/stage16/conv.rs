//! Conv on 16-bit data: the output computed in bands of whole output rows. For each image
//! and band, the input rows the band reads (all channels) are widened into f32 scratch, the
//! band runs as a convolution of its own through [`crate::gemm::conv::arenac_conv2d`] (any
//! path: im2col, pointwise, direct, depthwise; bias and fused activation in its epilogue)
//! into f32 scratch, then narrowed into the output rows. A band's geometry: the input rows
//! `[lo, hi)` it reads, top padding what lies above `lo`, bottom padding implied (rows past
//! `hi` read as zero, as past `h`).

use super::{N16, narrow, widen};
use crate::gemm::conv::{ConvParams, arenac_conv2d, conv2d_scratch_bytes, mark_packed};

/// The geometry of the band of output rows `[r0, r1)` of one image of `p`: its params
/// (`n = 1`) and the first input row it reads.
pub fn band(p: &ConvParams, r0: u64, r1: u64) -> (ConvParams, u64) {
    let start = (r0 * p.stride_h) as i64 - p.pad_t as i64;
    let end = ((r1.max(r0 + 1) - 1) * p.stride_h + (p.kh.max(1) - 1) * p.dil_h + 1) as i64
        - p.pad_t as i64;
    let h = p.h.max(1) as i64;
    let lo = start.clamp(0, h - 1);
    let hi = end.min(h).max(lo + 1);
    let q = ConvParams {
        n: 1,
        h: (hi - lo) as u64,
        pad_t: (lo - start) as u64,
        oh: r1 - r0,
        ..*p
    };
    (q, lo as u64)
}

/// The staging budget of `p` in bytes: 1/48 of the node's 16-bit input and output, between
/// 16 KiB and [`super::STAGE_BYTES`] — small against the arena's peak (a Conv is often at it).
fn budget(p: &ConvParams) -> u64 {
    let bytes16 = (p.n * (p.c * p.h * p.w + p.m * p.oh * p.ow)).saturating_mul(2);
    (bytes16 / 48).clamp(16 << 10, super::STAGE_BYTES as u64)
}

/// The im2col tile of band `q` of `p`: the largest whose scratch fits the staging budget (the
/// smallest tile when none does); irrelevant for the paths without a tile.
fn band_tile(p: &ConvParams, q: &ConvParams) -> u64 {
    crate::gemm::conv::conv2d_tile_for_scratch(q, budget(p) as usize)
        .unwrap_or(crate::gemm::conv::CONV_MIN_TILE) as u64
}

/// Output rows per band: as many as fit the staging budget ([`budget`]), at least one; all
/// rows when the bands would not share one packed-weights layout.
pub fn band_rows(p: &ConvParams) -> u64 {
    let oh = p.oh.max(1);
    if !uniform(p, oh) {
        return oh;
    }
    let budget = budget(p);
    let per_row = (p.m * p.ow + p.c * p.stride_h * p.w)
        .saturating_mul(4)
        .max(1);
    let rows = (budget / per_row).clamp(1, oh);
    if uniform(p, rows) { rows } else { oh }
}

/// The distinct band geometries of `p` at `rows` rows per band (first, a middle one, last).
fn bands(p: &ConvParams, rows: u64) -> Vec<ConvParams> {
    let oh = p.oh.max(1);
    let mut r0s = vec![0];
    if rows < oh {
        r0s.push(rows);
        r0s.push((oh - 1) / rows * rows);
    }
    r0s.into_iter()
        .map(|r0| band(p, r0, (r0 + rows).min(oh)).0)
        .collect()
}

/// Whether every band at `rows` rows takes the packed-weights layout of the first.
fn uniform(p: &ConvParams, rows: u64) -> bool {
    let marks: Vec<u64> = bands(p, rows)
        .into_iter()
        .map(|mut q| {
            mark_packed(&mut q);
            q.packed_a
        })
        .collect();
    marks.windows(2).all(|w| w[0] == w[1])
}

/// `p` as the weights are prepared for (the first band's layout: `packed_a` as
/// [`mark_packed`] sets it for that band), for `crate::gemm::conv::prepare_weights`.
pub fn weights_params(p: &ConvParams) -> ConvParams {
    let mut q = band(p, 0, band_rows(p).min(p.oh.max(1))).0;
    mark_packed(&mut q);
    ConvParams { n: p.n, ..q }
}

/// Floats of the scratch parts: input rows, output rows, the inner kernel's scratch.
fn parts(p: &ConvParams) -> (usize, usize, usize) {
    let rows = band_rows(p);
    let bs = bands(p, rows);
    let up = |f: u64| (f as usize).next_multiple_of(16);
    let xin = bs.iter().map(|q| up(q.c * q.h * q.w)).max().unwrap_or(0);
    let yout = up(p.m * rows * p.ow);
    let inner = bs
        .iter()
        .map(|q| {
            let mut q = *q;
            mark_packed(&mut q);
            q.tile = band_tile(p, &q);
            conv2d_scratch_bytes(&q).div_ceil(4).next_multiple_of(16)
        })
        .max()
        .unwrap_or(0);
    (xin, yout, inner)
}

/// Scratch bytes [`conv`] uses for `p` (constant weights, `threads` set).
pub fn scratch_bytes(p: &ConvParams) -> usize {
    let (a, b, c) = parts(p);
    (a + b + c) * 4
}

/// `y = act(conv(x, w) + bias)` on 16-bit `x` and `y`, band by band.
///
/// # Safety
/// `p` describes the whole node (constant weights prepared by
/// `crate::gemm::conv::prepare_weights` for [`weights_params`]); `x` readable for
/// `n*c*h*w` values, `y` writable for `n*m*oh*ow`, `w`/`bias` as [`arenac_conv2d`] reads them;
/// `scratch` writable for [`scratch_bytes`] bytes, 64-aligned; `y` and `scratch` overlap
/// nothing else.
pub unsafe fn conv(
    t: N16,
    p: &ConvParams,
    x: *const u16,
    w: *const f32,
    bias: *const f32,
    y: *mut u16,
    scratch: *mut f32,
) {
    let (xin, yout, _) = parts(p);
    let rows = band_rows(p);
    let packed = weights_params(p).packed_a;
    let (c, h, wd, m, oh, ow) = (
        p.c as usize,
        p.h as usize,
        p.w as usize,
        p.m as usize,
        p.oh as usize,
        p.ow as usize,
    );
    for img in 0..p.n as usize {
        let mut r0 = 0;
        while r0 < p.oh {
            let r1 = (r0 + rows).min(p.oh);
            let (mut q, lo) = band(p, r0, r1);
            q.packed_a = packed;
            q.tile = band_tile(p, &q);
            let (hb, ob) = (q.h as usize, (r1 - r0) as usize);
            // SAFETY: every range lies in `x`, `y` or the scratch's disjoint parts by the
            // contract and [`parts`] (sized for the largest band).
            unsafe {
                let sx = scratch;
                for ch in 0..c {
                    let src = x.add(((img * c + ch) * h + lo as usize) * wd);
                    let src = std::slice::from_raw_parts(src, hb * wd);
                    let dst = std::slice::from_raw_parts_mut(sx.add(ch * hb * wd), hb * wd);
                    widen(t, src, dst);
                }
                let sy = scratch.add(xin);
                let inner = scratch.add(xin + yout);
                arenac_conv2d(&q, sx, w, bias, sy, inner);
                for mo in 0..m {
                    let dst = y.add(((img * m + mo) * oh + r0 as usize) * ow);
                    let dst = std::slice::from_raw_parts_mut(dst, ob * ow);
                    let src = std::slice::from_raw_parts(sy.add(mo * ob * ow), ob * ow);
                    narrow(t, src, dst);
                }
            }
            r0 = r1;
        }
    }
}
