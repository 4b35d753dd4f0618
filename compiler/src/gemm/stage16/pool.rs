//! Max/AveragePool on 16-bit data: a block of whole planes widened into f32 scratch, pooled by
//! [`crate::gemm::pool::arenac_pool2d`] into the rest of the scratch, narrowed into the output;
//! a MaxPool plane without NaN straight on the 16-bit values ([`max`]).

pub mod gap;
pub mod max;

use super::{N16, narrow, widen};
use crate::gemm::pool::{PoolParams, arenac_pool2d};

/// Planes per block for `p`: as many as fit [`block_budget`] bytes of f32 staging (input and
/// output planes), at least one; one where [`max`] runs (in place or not), which stages only a
/// plane holding a NaN.
pub fn block_planes(p: &PoolParams) -> usize {
    if max::fits(p, true) {
        return 1;
    }
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
    let planes = p.planes as usize;
    let in_place = std::ptr::eq(x, y);
    if max::fits(p, in_place) {
        if !in_place && spread_max(p) {
            // SAFETY: the caller's contract, out of place.
            unsafe { max_spread(t, p, x, y, scratch) };
            return;
        }
        let mut from = 0;
        // SAFETY: the caller's contract; `fits` checked (in place too); a plane the 16-bit
        // kernel stops at (a NaN) is staged alone, before any later plane is written.
        while let Some(c) = unsafe { max::planes(t, p, x, y, from, planes) } {
            // SAFETY: plane `c` by the contract; one plane fits the scratch.
            unsafe { staged(t, p, c, 1, x, y, scratch) };
            from = c + 1;
        }
        return;
    }
    let block = block_planes(p);
    let mut at = 0;
    while at < planes {
        let b = block.min(planes - at);
        // SAFETY: the caller's contract; `b <= block_planes(p)` planes fit the scratch.
        unsafe { staged(t, p, at, b, x, y, scratch) };
        at += b;
    }
}

/// Whether [`max_spread`] runs an out-of-place MaxPool [`max`] computes: more than one
/// plane, a pool of several threads, and `ARENAC_DIR16_POOL` not `0` (one thread, for
/// comparisons).
fn spread_max(p: &PoolParams) -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("ARENAC_DIR16_POOL").map_or(true, |v| v != "0"))
        && p.planes > 1
        && crate::par::threads() > 1
}

/// [`max::planes`] out of place over runs of planes spread over the current pool (each
/// plane computed as on one thread: the same bits at every thread count), as the f32 pool
/// spreads them; the planes holding a NaN, which the runs skip, staged one by one after.
///
/// # Safety
/// [`pool`]'s contract, `y` not overlapping `x`; [`max::fits`] out of place.
unsafe fn max_spread(t: N16, p: &PoolParams, x: *const u16, y: *mut u16, scratch: *mut f32) {
    use crate::gemm::split::SyncPtr;
    use std::sync::atomic::{AtomicBool, Ordering};
    let planes = p.planes as usize;
    let work = planes.saturating_mul((p.oh * p.ow * p.kh * p.kw) as usize);
    let width = crate::par::width(crate::par::cost::gemm_ns(work), crate::par::threads());
    let runs = (work / crate::gemm::split::MIN_TASK_MACS)
        .min(width * 4)
        .clamp(1, planes.max(1));
    let nan = AtomicBool::new(false);
    let (xs, ys) = (SyncPtr(x.cast_mut()), SyncPtr(y));
    crate::par::for_each(runs, width, |run, _| {
        let (mut from, to) = (planes * run / runs, planes * (run + 1) / runs);
        // SAFETY: planes `from..to` of `x` and `y` by the contract, this run's alone (out of
        // place); a plane holding a NaN is skipped, nothing of it written.
        while let Some(c) = unsafe { max::planes(t, p, xs.get().cast_const(), ys.get(), from, to) }
        {
            nan.store(true, Ordering::Relaxed);
            from = c + 1;
        }
    });
    if nan.load(Ordering::Relaxed) {
        let hw = (p.h * p.w) as usize;
        for c in 0..planes {
            // SAFETY: plane `c` of `x` by the contract; one plane fits the scratch.
            unsafe {
                if max::has_nan(t, std::slice::from_raw_parts(x.add(c * hw), hw)) {
                    staged(t, p, c, 1, x, y, scratch);
                }
            }
        }
    }
}

/// Planes `at..at + b` of [`pool`] staged through f32 scratch.
///
/// # Safety
/// [`pool`]'s contract; `b <= block_planes(p)`.
unsafe fn staged(
    t: N16,
    p: &PoolParams,
    at: usize,
    b: usize,
    x: *const u16,
    y: *mut u16,
    scratch: *mut f32,
) {
    let (xin, _) = parts(p);
    let (hw, ohw) = ((p.h * p.w) as usize, (p.oh * p.ow) as usize);
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
}

/// Whether [`sum64_16`] runs here (AVX-512, as the conversions: [`super::convert::isa`]).
pub(super) fn sums16() -> bool {
    #[cfg(target_arch = "x86_64")]
    if super::convert::isa() == super::convert::Isa::Avx512 {
        return true;
    }
    false
}

/// `super::sum64` of `v` widened, read straight from the 16-bit values: the 64 running sums
/// in four 16-lane vectors (lane `l` of vector `q` is sum `16q + l`), folded into 8 in the
/// same order, the tail widened on the stack; the same adds in the same order, so the same
/// bits. Where [`sums16`] is false: `sum64` of `v` widened on the stack (its first
/// [`super::CHUNK`] values: callers pass chunks of at most that many).
pub(super) fn sum64_16(t: N16, v: &[u16]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if sums16() {
        // SAFETY: the CPU has AVX-512F (`sums16`).
        return unsafe { x86::sum64_16_avx512(t, v) };
    }
    let mut buf = [0f32; super::CHUNK];
    let v = v.get(..super::CHUNK).unwrap_or(v);
    widen(t, v, &mut buf[..v.len()]);
    super::sum64(&buf[..v.len()])
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::super::convert::x86::load16;
    use super::{N16, widen};
    use std::arch::x86_64::*;

    /// [`super::sum64_16`] on AVX-512.
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn sum64_16_avx512(t: N16, v: &[u16]) -> f64 {
        let n64 = v.len() / 64 * 64;
        let mut acc8 = [0f32; 8];
        if n64 > 0 {
            let p = v.as_ptr();
            let mut acc = [_mm512_setzero_ps(); 4];
            let mut i = 0;
            while i < n64 {
                for (q, a) in acc.iter_mut().enumerate() {
                    // SAFETY: values `i + 16q..i + 16q + 16` lie inside the first `n64`.
                    *a = _mm512_add_ps(*a, unsafe { load16(t, p.add(i + 16 * q)) });
                }
                i += 64;
            }
            let mut sums = [0f32; 64];
            for (q, a) in acc.iter().enumerate() {
                // SAFETY: `sums` holds 64 floats.
                unsafe { _mm512_storeu_ps(sums.as_mut_ptr().add(16 * q), *a) };
            }
            for c in sums.chunks_exact(8) {
                for (a, &e) in acc8.iter_mut().zip(c) {
                    *a += e;
                }
            }
        }
        let rest = v.get(n64..).unwrap_or_default();
        let mut buf = [0f32; 64];
        let buf = &mut buf[..rest.len().min(64)];
        widen(t, rest, buf);
        super::super::sum_tail(acc8, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{N16, narrow, sum64, widen};
    use super::sum64_16;

    /// The sums read from 16-bit values against `sum64` of the widened values, bit for bit,
    /// at lengths around each boundary (groups of 64 and 8, tails), values of mixed signs
    /// and magnitudes.
    #[test]
    fn sums_from_16_bit_match_the_widened_sums() {
        let mut s = 12345u32;
        for t in [N16::F16, N16::Bf16] {
            for len in [0usize, 1, 7, 8, 9, 63, 64, 65, 127, 128, 200, 999, 1024] {
                let f: Vec<f32> = (0..len)
                    .map(|i| {
                        s ^= s << 13;
                        s ^= s >> 17;
                        s ^= s << 5;
                        let v = (s % 20001) as f32 / 1000.0 - 10.0;
                        if i % 17 == 0 { v * 300.0 } else { v }
                    })
                    .collect();
                let mut x = vec![0u16; len];
                narrow(t, &f, &mut x);
                let mut w = vec![0f32; len];
                widen(t, &x, &mut w);
                assert_eq!(
                    sum64_16(t, &x).to_bits(),
                    sum64(&w).to_bits(),
                    "{t:?} {len}"
                );
            }
        }
    }
}
