//! MaxPool straight on 16-bit data, no f32 staging: f16 and bf16 are both sign-magnitude, so
//! `key(b) = b ^ ((b >> 15) & 0x7fff)` (as `i16`) orders every non-NaN value as the float
//! order does (`-0` just below `+0`), and the max of the keys is the key of the max. The max
//! of widened values is one of the values, so narrowing it back is exact: the result equals
//! the staged path's bit for bit, but for the sign of a zero max in a window holding both
//! zeros. A plane holding a NaN is left to the staged path (it propagates NaN as the
//! reference does); a window of padding only gives what the staged path gives (`f32::MIN`
//! narrowed).

use super::super::{N16, narrow};
use crate::gemm::pool::{POOL_MAX, PoolParams, in_place_lag};

/// Keys per row buffer: the columns one output row's windows span, and the output row.
const ROW: usize = 4096;

/// The key of a window with no tap inside the input (`0xffff`'s key: a NaN, never a value's).
const EMPTY: i16 = i16::MIN;

/// The order-preserving key of a 16-bit float's bits (its own inverse).
#[inline(always)]
fn key(b: u16) -> i16 {
    let s = b as i16;
    s ^ ((s >> 15) & 0x7fff)
}

/// Whether [`plane`] runs `p` (`in_place`: `y == x`): a MaxPool whose rows fit the row
/// buffers and, in place, whose output row `i` may be written as soon as it is computed
/// ([`in_place_lag`] 0).
pub fn fits(p: &PoolParams, in_place: bool) -> bool {
    let span =
        p.ow.saturating_sub(1)
            .saturating_mul(p.sw.max(1))
            .saturating_add(p.kw.saturating_sub(1).saturating_mul(p.dw.max(1)))
            .saturating_add(1);
    p.kind == POOL_MAX
        && p.kh > 0
        && p.kw > 0
        && p.ow > 0
        && span <= ROW as u64
        && (!in_place || in_place_lag(p) == Some(0))
}

/// Whether a plane's bits hold a NaN (an exponent of all ones and a nonzero mantissa).
#[inline(always)]
pub(super) fn has_nan(t: N16, x: &[u16]) -> bool {
    let inf = match t {
        N16::F16 => 0x7c00u16,
        N16::Bf16 => 0x7f80,
    };
    x.chunks(1024)
        .any(|c| c.iter().fold(0u16, |a, &b| a.max(b & 0x7fff)) > inf)
}

/// The staged path's output for a window of padding only: `f32::MIN` narrowed.
fn empty_bits(t: N16) -> u16 {
    let mut b = [0u16; 1];
    narrow(t, &[f32::MIN], &mut b);
    b[0]
}

/// MaxPool of planes `from..to` of `p`: plane `c` of `x` (`h*w` values each) into plane `c`
/// of `y` (`oh*ow`), a row at a time: the window rows' keys maxed into a row buffer (padding
/// columns [`EMPTY`]), the horizontal window maxed from it, the row written back as bits
/// once computed. Stops at the first plane holding a NaN, returning its index (nothing of it
/// written); None when all ran.
///
/// # Safety
/// [`fits`] holds for `p`; `x` readable for `planes*h*w` values and `y` writable for
/// `planes*oh*ow`, either disjoint or (in place, `fits(p, true)`) `y == x`.
pub unsafe fn planes(
    t: N16,
    p: &PoolParams,
    x: *const u16,
    y: *mut u16,
    from: usize,
    to: usize,
) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512bw") {
            // SAFETY: the CPU has AVX-512BW; the caller's contract, passed on.
            return unsafe { x86::planes_avx512(t, p, x, y, from, to) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2; the caller's contract, passed on.
            return unsafe { x86::planes_avx2(t, p, x, y, from, to) };
        }
    }
    // SAFETY: the caller's contract, passed on.
    unsafe { planes_any(t, p, x, y, from, to) }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{N16, PoolParams, planes_any};

    /// [`planes_any`] compiled for AVX2.
    ///
    /// # Safety
    /// The CPU has AVX2; [`super::planes`]'s contract.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn planes_avx2(
        t: N16,
        p: &PoolParams,
        x: *const u16,
        y: *mut u16,
        from: usize,
        to: usize,
    ) -> Option<usize> {
        // SAFETY: the caller's contract.
        unsafe { planes_any(t, p, x, y, from, to) }
    }

    /// [`planes_any`] compiled for AVX-512BW.
    ///
    /// # Safety
    /// The CPU has AVX-512BW; [`super::planes`]'s contract.
    #[target_feature(enable = "avx512f,avx512bw,avx2")]
    pub(super) unsafe fn planes_avx512(
        t: N16,
        p: &PoolParams,
        x: *const u16,
        y: *mut u16,
        from: usize,
        to: usize,
    ) -> Option<usize> {
        // SAFETY: the caller's contract.
        unsafe { planes_any(t, p, x, y, from, to) }
    }
}

/// [`planes`]'s body, inlined into each feature level.
///
/// # Safety
/// [`planes`]'s contract.
#[inline(always)]
unsafe fn planes_any(
    t: N16,
    p: &PoolParams,
    x: *const u16,
    y: *mut u16,
    from: usize,
    to: usize,
) -> Option<usize> {
    let u = |v: u64| v as usize;
    let (h, w, oh, ow) = (u(p.h), u(p.w), u(p.oh), u(p.ow));
    let (kh, kw, pt, pl) = (u(p.kh), u(p.kw), u(p.pt), u(p.pl));
    let (sh, sw, dh, dw) = (
        u(p.sh).max(1),
        u(p.sw).max(1),
        u(p.dh).max(1),
        u(p.dw).max(1),
    );
    let empty = empty_bits(t);
    let len = (ow - 1) * sw + (kw - 1) * dw + 1;
    // Buffer column j is input column j - pl; columns jlo..jhi are inside the row.
    let jlo = pl.min(len);
    let jhi = (pl + w).min(len).max(jlo);
    let mut buf = [EMPTY; ROW];
    let mut out = [0i16; ROW];
    for c in from..to.min(u(p.planes)) {
        // SAFETY: plane `c` of `x` and `y` by the contract.
        let (x, y) = unsafe { (x.add(c * h * w), y.add(c * oh * ow)) };
        {
            // SAFETY: `x` readable for `h*w` values; dropped before any write.
            let xs = unsafe { std::slice::from_raw_parts(x, h * w) };
            if has_nan(t, xs) {
                return Some(c);
            }
        }
        for oy in 0..oh {
            let (ky0, ky1) = crate::gemm::pool::valid_taps(oy, sh, kh, dh, pt, h);
            let orow = &mut out[..ow];
            if ky0 >= ky1 {
                orow.fill(EMPTY);
            } else {
                {
                    let b = &mut buf[..len];
                    b[..jlo].fill(EMPTY);
                    b[jhi..].fill(EMPTY);
                    let mid = &mut b[jlo..jhi];
                    for ky in ky0..ky1 {
                        let iy = oy * sh + ky * dh - pt;
                        // SAFETY: row `iy < h` of the plane, columns `jlo - pl..jhi - pl`
                        // inside `0..w`; dropped before the row is written.
                        let src = unsafe {
                            std::slice::from_raw_parts(x.add(iy * w + jlo - pl), jhi - jlo)
                        };
                        if ky == ky0 {
                            mid.iter_mut().zip(src).for_each(|(d, &v)| *d = key(v));
                        } else {
                            mid.iter_mut()
                                .zip(src)
                                .for_each(|(d, &v)| *d = (*d).max(key(v)));
                        }
                    }
                }
                horizontal(&buf[..len], sw, kw, dw, orow);
            }
            // SAFETY: row `oy` of the output plane; in place, `fits` (lag 0) keeps it off
            // every input value a later row (or plane) reads.
            let dst = unsafe { std::slice::from_raw_parts_mut(y.add(oy * ow), ow) };
            for (d, &k) in dst.iter_mut().zip(orow.iter()) {
                *d = if k == EMPTY {
                    empty
                } else {
                    key(k as u16) as u16
                };
            }
        }
    }
    None
}

/// `out[o] = max over kx of b[o*sw + kx*dw]`, strides 1 and 2 as their own loops (so they
/// vectorize).
#[inline(always)]
fn horizontal(b: &[i16], sw: usize, kw: usize, dw: usize, out: &mut [i16]) {
    let n = out.len();
    match sw {
        1 => {
            out.copy_from_slice(&b[..n]);
            for kx in 1..kw {
                let s = &b[kx * dw..kx * dw + n];
                out.iter_mut().zip(s).for_each(|(d, &v)| *d = (*d).max(v));
            }
        }
        2 if dw == 1 && kw == 2 => {
            // Window o: the pair (b[2o], b[2o+1]).
            for (d, p) in out.iter_mut().zip(b[..2 * n].chunks_exact(2)) {
                *d = p[0].max(p[1]);
            }
        }
        2 if dw == 1 && kw == 3 => {
            // Window o: the pair (b[2o], b[2o+1]) and b[2o+2], the second of the pair
            // (b[2o+1], b[2o+2]); b holds 2n + 1 keys.
            let (a, c) = (&b[..2 * n], &b[1..2 * n + 1]);
            for ((d, p), q) in out.iter_mut().zip(a.chunks_exact(2)).zip(c.chunks_exact(2)) {
                *d = p[0].max(q[0]).max(q[1]);
            }
        }
        _ => {
            for (o, d) in out.iter_mut().enumerate() {
                *d = (0..kw).map(|kx| b[o * sw + kx * dw]).fold(EMPTY, i16::max);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::{N16, narrow};
    use super::super::{pool, pool as pool_fn, scratch_bytes, staged};
    use super::{fits, planes};
    use crate::gemm::pool::{POOL_MAX, PoolParams};

    fn params(
        planes: u64,
        hw: (u64, u64),
        k: (u64, u64),
        s: u64,
        pad: u64,
        d: u64,
        ceil: bool,
    ) -> PoolParams {
        let (h, w) = hw;
        let out = |n: u64, k: u64| {
            let span = (k - 1) * d + 1;
            let num = n + 2 * pad - span;
            (if ceil { num.div_ceil(s) } else { num / s }) + 1
        };
        let (oh, ow) = (out(h, k.0), out(w, k.1));
        // Ceil mode: the bottom/right pads cover the last window.
        let end = |n: u64, o: u64, k: u64| ((o - 1) * s + (k - 1) * d + 1).saturating_sub(n + pad);
        PoolParams {
            planes,
            h,
            w,
            oh,
            ow,
            kh: k.0,
            kw: k.1,
            sh: s,
            sw: s,
            pt: pad,
            pl: pad,
            dh: d,
            dw: d,
            pb: end(h, oh, k.0),
            pr: end(w, ow, k.1),
            kind: POOL_MAX,
        }
    }

    /// 16-bit values of mixed signs with zeros of both signs and infinities.
    fn data(t: N16, n: usize, seed: &mut u32) -> Vec<u16> {
        let f: Vec<f32> = (0..n)
            .map(|i| {
                *seed ^= *seed << 13;
                *seed ^= *seed >> 17;
                *seed ^= *seed << 5;
                match *seed % 29 {
                    0 => 0.0,
                    1 => -0.0,
                    2 if i % 3 == 0 => f32::INFINITY,
                    3 if i % 3 == 0 => f32::NEG_INFINITY,
                    _ => (*seed % 40001) as f32 / 1000.0 - 20.0,
                }
            })
            .collect();
        let mut x = vec![0u16; n];
        narrow(t, &f, &mut x);
        x
    }

    /// Staged (widen, f32 pool, narrow) over all planes: the reference.
    fn reference(t: N16, p: &PoolParams, x: &[u16]) -> Vec<u16> {
        let mut y = vec![0u16; (p.planes * p.oh * p.ow) as usize];
        let mut s = vec![0f32; scratch_bytes(p) / 4 + 16];
        for c in 0..p.planes as usize {
            // SAFETY: buffers sized for `p`; one plane per call fits any scratch.
            unsafe { staged(t, p, c, 1, x.as_ptr(), y.as_mut_ptr(), s.as_mut_ptr()) };
        }
        y
    }

    /// Same bits, but a zero's sign (the max of `-0` and `+0` is either).
    fn same(t: N16, a: &[u16], b: &[u16], what: &str) {
        assert_eq!(a.len(), b.len(), "{what}");
        for (i, (&u, &v)) in a.iter().zip(b).enumerate() {
            let zero = |b: u16| b & 0x7fff == 0;
            assert!(
                u == v || (zero(u) && zero(v)),
                "{t:?} {what} at {i}: {u:#06x} vs {v:#06x}"
            );
        }
    }

    /// The 16-bit MaxPool against the staged path narrowed, over strides 1-3, kernels 1-4 x
    /// 1-3, pads, dilations, floor and ceil modes, odd and even sizes, f16 and bf16, out of
    /// place and (where allowed) in place; a plane holding a NaN goes the staged way (same
    /// bits, NaN included).
    #[test]
    fn max_pool_16_matches_the_staged_path() {
        let mut seed = 2463534242u32;
        let (mut ran, mut nans) = (0, 0);
        for t in [N16::F16, N16::Bf16] {
            for (hw, k, s, pad, d, ceil) in [
                ((13, 17), (3, 3), 2, 1, 1, false),
                ((111, 111), (3, 3), 2, 0, 1, true),
                ((28, 28), (2, 2), 2, 0, 1, false),
                ((9, 10), (3, 3), 1, 1, 1, false),
                ((11, 8), (4, 2), 3, 1, 1, true),
                ((12, 12), (3, 3), 2, 1, 2, false),
                ((5, 7), (1, 3), 1, 0, 1, false),
                ((8, 9), (3, 1), 2, 1, 1, true),
            ] {
                let p = params(3, hw, k, s, pad, d, ceil);
                assert!(fits(&p, false), "{p:?}");
                let n = (p.planes * p.h * p.w) as usize;
                let mut x = data(t, n, &mut seed);
                let want = reference(t, &p, &x);
                let mut y = vec![0u16; want.len()];
                let mut sc = vec![0f32; scratch_bytes(&p) / 4 + 16];
                // SAFETY: buffers sized for `p`.
                unsafe { pool(t, &p, x.as_ptr(), y.as_mut_ptr(), sc.as_mut_ptr()) };
                same(t, &y, &want, &format!("{p:?}"));
                if fits(&p, true) {
                    let mut z = x.clone();
                    // SAFETY: in place, `fits(p, true)`.
                    unsafe { pool(t, &p, z.as_ptr(), z.as_mut_ptr(), sc.as_mut_ptr()) };
                    same(t, &z[..want.len()], &want, &format!("in place {p:?}"));
                    ran += 1;
                }
                // A NaN in plane 1: that plane staged (NaN out), the others 16-bit.
                x[(p.h * p.w) as usize + 3] = match t {
                    N16::F16 => 0x7e00,
                    N16::Bf16 => 0x7fc0,
                };
                let want = reference(t, &p, &x);
                // SAFETY: as above.
                unsafe { pool(t, &p, x.as_ptr(), y.as_mut_ptr(), sc.as_mut_ptr()) };
                same(t, &y, &want, &format!("NaN {p:?}"));
                let plane1 = &y[(p.oh * p.ow) as usize..2 * (p.oh * p.ow) as usize];
                let nan = |b: &u16| match t {
                    N16::F16 => b & 0x7fff > 0x7c00,
                    N16::Bf16 => b & 0x7fff > 0x7f80,
                };
                nans += usize::from(plane1.iter().any(nan));
                // The kernel alone stops at plane 1 (plane 0 written).
                // SAFETY: `x`, `y` sized for `p`, out of place.
                let stop = unsafe { planes(t, &p, x.as_ptr(), y.as_mut_ptr(), 0, 3) };
                assert_eq!(stop, Some(1), "{p:?}");
            }
        }
        assert!(ran >= 4, "in place ran {ran} times");
        // Most geometries have a window over the NaN (dilated and strided ones may skip it).
        assert!(nans >= 12, "a NaN reached the output {nans} times");
    }

    /// Out of place over an eager 2-thread pool (runs of planes spread, `super::max_spread`):
    /// the staged path's bits, planes holding a NaN (first, inner, last) staged after the
    /// runs, for f16 and bf16, 2x2 and 3x3 windows, strides 2 and 1, ceil mode.
    #[test]
    fn max_pool_16_spread_over_two_threads_matches_the_staged_path() {
        let pool = crate::par::Pool::new(2).expect("threads");
        pool.set_eager(true);
        let mut seed = 88172645u32;
        let mut jobs = 0;
        for t in [N16::F16, N16::Bf16] {
            for (hw, k, s, pad, ceil) in [
                ((96, 96), (2, 2), 2, 0, false),
                ((65, 63), (3, 3), 2, 1, true),
                ((40, 44), (3, 3), 1, 1, false),
            ] {
                let p = params(24, hw, k, s, pad, 1, ceil);
                let n = (p.planes * p.h * p.w) as usize;
                let mut x = data(t, n, &mut seed);
                let hw = (p.h * p.w) as usize;
                for c in [0, 11, 23] {
                    x[c * hw + 7] = match t {
                        N16::F16 => 0x7e00,
                        N16::Bf16 => 0x7fc0,
                    };
                }
                let want = reference(t, &p, &x);
                let mut y = vec![0u16; want.len()];
                let mut sc = vec![0f32; scratch_bytes(&p) / 4 + 16];
                let before = pool.jobs();
                crate::par::with_pool(Some(&pool), || {
                    // SAFETY: buffers sized for `p`, out of place.
                    unsafe { pool_fn(t, &p, x.as_ptr(), y.as_mut_ptr(), sc.as_mut_ptr()) }
                });
                jobs += pool.jobs() - before;
                same(t, &y, &want, &format!("2 threads {p:?}"));
            }
        }
        assert!(jobs > 0, "no pooling spread over the pool");
    }
}
