//! Depthwise convolution with 8 channels in the vector lanes (AVX2+FMA; also the fastest path
//! measured on AVX-512 machines, whose 256-bit FMA rate is the same).
//!
//! One task computes output rows `rows` of a *block* of up to 8 consecutive channels of one
//! image (`C == M == group`). Input rows are transposed, 8 columns at a time, into a ring of
//! `(kh-1)*dh + 1` rows of `wp` pixels x 8 channels on the task's stack, whose padding columns
//! stay zero (written once per task); each input row is transposed once. An output pixel of
//! the 8 channels is then a sum over the taps of one aligned load times one weight vector
//! (the 8 channels' weights of that tap) — no masks, no waste at any width, and stride 2 is
//! only an index step. Eight pixels of a row are computed at once (eight independent
//! accumulators hide the FMA latency), the activation applied in registers, and the 8x8 block
//! transposed back into the 8 output planes. Taps outside the input rows are skipped.
//!
//! The planes may hold 16-bit values instead (`--activations`, [`io`]): input rows widened as
//! they are transposed into the ring, 8 outputs narrowed per store (or f32 rows on the stack,
//! activated by the AVX-512 second pass and then narrowed): the f32 result rounded once.
//!
//! Each output element is one chain `bias + w0*x0 + w1*x1 + ...` over the taps in (`ky`, `kx`)
//! order, whichever pixel group, row band or task computes it: bit-identical at every thread
//! count and every split.

use super::Geom;
use crate::gemm::conv::Activation;

/// Channels per block (the lanes of one AVX2 vector).
pub(super) const BLOCK: usize = 8;
/// Floats of the per-task ring scratch (32 KiB).
const RING: usize = 8 * 1024;
/// Most taps (`kh * kw`) the kernel takes (their weight vectors sit on the stack).
const MAX_TAPS: usize = 64;

mod io;
pub(super) use io::{BF16, F16, F32};
use io::{elem, elem_mut};

/// The ring geometry of one convolution.
#[derive(Clone, Copy)]
pub(super) struct Ring {
    /// Pixels per ring row: every column a tap reads, padding included.
    wp: usize,
    /// Rows of the ring: the input rows one output row reads, or with `whole` every row of
    /// the zero-padded plane.
    rows: usize,
    /// The whole padded plane fits: padded row `pt + iy` holds input row `iy`, and pixels are
    /// taken in flat groups of 8 across row ends.
    whole: bool,
}

impl Ring {
    /// The ring, or None when it does not fit [`RING`] floats, the kernel has more than
    /// [`MAX_TAPS`] taps, or the output is empty.
    pub(super) fn new(g: &Geom) -> Option<Self> {
        let taps = g.kh.checked_mul(g.kw)?;
        if g.oh == 0 || g.ow == 0 || taps == 0 || taps > MAX_TAPS || g.sh == 0 || g.sw == 0 {
            return None;
        }
        // The last column read: (ow - 1) * sw + (kw - 1) * dw, relative to padded column 0.
        let last = (g.ow - 1)
            .checked_mul(g.sw)?
            .checked_add((g.kw - 1).checked_mul(g.dw)?)?;
        let wp = (last + 1).max(g.pl.checked_add(g.w)?);
        let span = (g.kh - 1).checked_mul(g.dh)? + 1;
        let hp = ((g.oh - 1).checked_mul(g.sh)? + span).max(g.pt.checked_add(g.h)?);
        let fits = |rows: usize| Some(rows.checked_mul(wp)?.checked_mul(BLOCK)? <= RING);
        if fits(hp)? {
            return Some(Ring {
                wp,
                rows: hp,
                whole: true,
            });
        }
        fits(span)?.then_some(Ring {
            wp,
            rows: span,
            whole: false,
        })
    }
}

/// One task: output rows `rows` of channels `c0 .. c0 + nc` (`nc <= 8`) of one image.
pub(super) struct Task<'a> {
    /// Input planes of the image (`c * h * w` elements of the run's type from channel 0).
    pub x: *const f32,
    /// Output planes of the image (`m * oh * ow` elements of the run's type from channel 0).
    pub y: *mut f32,
    /// All filters (`m * kh * kw` floats) and biases (`m` floats, or None).
    pub w: &'a [f32],
    pub bias: Option<&'a [f32]>,
    pub c0: usize,
    pub nc: usize,
    pub rows: std::ops::Range<usize>,
}

#[cfg(target_arch = "x86_64")]
pub(super) mod x86 {
    use super::io::x86::{flush, store1, store8};
    use super::{BLOCK, F32, Geom, MAX_TAPS, RING, Ring, Task, elem, elem_mut};
    use crate::gemm::act::x86::{act256, exp256};
    use crate::gemm::conv::Activation;
    use core::arch::x86_64::*;

    mod fill;
    use fill::fill_row;

    /// `1 / d` for `d >= 1` (NaN stays NaN; inf and values above 1e38 give 0): the 12-bit
    /// estimate refined by one Newton step. (A function, not a closure: closures do not
    /// inherit the caller's target features.)
    #[inline(always)]
    fn recip8(d: __m256) -> __m256 {
        // SAFETY: value-only AVX/FMA intrinsics inside AVX2+FMA callers.
        unsafe {
            // min keeps a NaN (its second operand) and caps inf: rcp(1e38) is 0.
            let d = _mm256_min_ps(_mm256_set1_ps(1e38), d);
            let r = _mm256_rcp_ps(d);
            _mm256_fmadd_ps(r, _mm256_fnmadd_ps(d, r, _mm256_set1_ps(1.0)), r)
        }
    }

    /// The activation of 8 values: Sigmoid and SiLU with `1 / (1 + e)` by the 12-bit
    /// reciprocal estimate and one Newton step (a few ulp; a division costs as much as the
    /// 9 taps of a 3x3 filter), the others as [`act256`].
    #[inline(always)]
    fn act8(act: Activation, v: __m256) -> __m256 {
        // SAFETY: value-only AVX/FMA intrinsics inside AVX2+FMA callers.
        unsafe {
            let one = _mm256_set1_ps(1.0);
            match act {
                Activation::Sigmoid | Activation::Silu => {
                    // sigmoid(v) = 1 / (1 + exp(-v)).
                    let e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), v));
                    let r = recip8(_mm256_add_ps(one, e));
                    if matches!(act, Activation::Silu) {
                        _mm256_mul_ps(v, r)
                    } else {
                        r
                    }
                }
                a => act256(a, v),
            }
        }
    }

    /// Transposes 8 vectors of 8 floats (row `i` lane `j` → row `j` lane `i`).
    #[inline(always)]
    fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
        // SAFETY: value-only AVX intrinsics inside AVX2 callers.
        unsafe {
            let t0 = _mm256_unpacklo_ps(r[0], r[1]);
            let t1 = _mm256_unpackhi_ps(r[0], r[1]);
            let t2 = _mm256_unpacklo_ps(r[2], r[3]);
            let t3 = _mm256_unpackhi_ps(r[2], r[3]);
            let t4 = _mm256_unpacklo_ps(r[4], r[5]);
            let t5 = _mm256_unpackhi_ps(r[4], r[5]);
            let t6 = _mm256_unpacklo_ps(r[6], r[7]);
            let t7 = _mm256_unpackhi_ps(r[6], r[7]);
            let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
            let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
            let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
            let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
            let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
            let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
            let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
            let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
            [
                _mm256_permute2f128_ps::<0x20>(s0, s4),
                _mm256_permute2f128_ps::<0x20>(s1, s5),
                _mm256_permute2f128_ps::<0x20>(s2, s6),
                _mm256_permute2f128_ps::<0x20>(s3, s7),
                _mm256_permute2f128_ps::<0x31>(s0, s4),
                _mm256_permute2f128_ps::<0x31>(s1, s5),
                _mm256_permute2f128_ps::<0x31>(s2, s6),
                _mm256_permute2f128_ps::<0x31>(s3, s7),
            ]
        }
    }

    /// A 32-byte aligned stack array of floats.
    #[repr(C, align(32))]
    struct Aligned<const N: usize>([f32; N]);

    /// Runs `tasks` with one ring scratch (zeroed once).
    ///
    /// # Safety
    /// AVX2 and FMA; `ring` is `Ring::new(g)`; for each task, `x` holds the image's `c*h*w`
    /// input floats with `c0 + nc <= c`, `nc` in `1..=8`, `y` its `c*oh*ow` output floats
    /// (overlapping neither `x` nor the weights; no other thread writes rows `rows` of these
    /// channels), `w` at least `c*kh*kw` floats, `bias` (if any) `c` floats, and
    /// `rows.end <= oh`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(in crate::gemm::depthwise) unsafe fn run_tasks<'a, const E: u8>(
        g: &Geom,
        ring: &Ring,
        act: Activation,
        post: Option<Activation>,
        tasks: impl Iterator<Item = Task<'a>>,
    ) {
        let mut store = std::mem::MaybeUninit::<Aligned<RING>>::uninit();
        let len = (ring.rows * ring.wp * BLOCK).min(RING);
        let buf = store.as_mut_ptr().cast::<f32>();
        // SAFETY: the first `len <= RING` floats of `store` are zeroed (padding columns).
        unsafe { std::ptr::write_bytes(buf, 0, len) };
        // 16-bit output with a second-pass activation: the f32 rows, activated and narrowed
        // (8 * ow <= RING floats, or 8 * oh * ow with `whole`: both within the ring's size,
        // `Ring::new`); without one, 8 outputs narrowed in registers per store.
        let mut out = std::mem::MaybeUninit::<Aligned<RING>>::uninit();
        let obuf = out.as_mut_ptr().cast::<f32>();
        let staged = E != F32 && post.is_some();
        if staged {
            // SAFETY: `out` holds RING floats.
            unsafe { std::ptr::write_bytes(obuf, 0, RING) };
        }
        for t in tasks {
            // SAFETY: the caller's contract; `buf` holds `len` floats, 32-byte aligned,
            // `obuf` RING floats.
            unsafe {
                if staged {
                    task::<E, F32>(g, ring, act, post, buf, obuf, &t);
                } else {
                    task::<E, E>(g, ring, act, post, buf, obuf, &t);
                }
            }
            if E != F32 {
                // The activation applied before narrowing (`flush`), or none.
                continue;
            }
            if let Some(post) = post {
                for l in 0..t.nc.min(BLOCK) {
                    // SAFETY: rows `t.rows` of output plane c0 + l, this task's (contract).
                    let ys = unsafe {
                        std::slice::from_raw_parts_mut(
                            t.y.add((t.c0 + l) * g.oh * g.ow + t.rows.start * g.ow),
                            t.rows.len() * g.ow,
                        )
                    };
                    crate::gemm::act::bias_act(ys, 0.0, post);
                }
            }
        }
    }

    /// One task over the zero-padded ring `buf`, reading planes of type `E` and writing
    /// type `O`: `E` itself, or f32 rows in `obuf` (16-bit `E` with a second-pass `post`
    /// activation) activated and narrowed by [`flush`].
    ///
    /// # Safety
    /// As [`run_tasks`].
    #[inline(always)]
    unsafe fn task<const E: u8, const O: u8>(
        g: &Geom,
        ring: &Ring,
        act: Activation,
        post: Option<Activation>,
        buf: *mut f32,
        obuf: *mut f32,
        t: &Task,
    ) {
        let taps = g.kh * g.kw;
        let (hw, ohw) = (g.h * g.w, g.oh * g.ow);
        let nc = t.nc.clamp(1, BLOCK);
        // Channel l's planes; the lanes past nc repeat channel c0 (their results are dropped).
        let ch = |l: usize| t.c0 + if l < nc { l } else { 0 };
        // Weight vectors per tap and the bias vector (lanes = channels).
        let mut wv = Aligned::<{ MAX_TAPS * BLOCK }>([0.0; MAX_TAPS * BLOCK]);
        let mut bv = [0f32; BLOCK];
        let taps = taps.min(MAX_TAPS);
        // Taps 0..k0 by 8x8 transposes of the filters (rows c0 + l, inside `w`).
        let k0 = if t.w.len() >= (t.c0 + nc) * taps {
            taps / 8 * 8
        } else {
            0
        };
        for k in (0..k0).step_by(8) {
            // SAFETY: AVX (the caller's contract); floats ch(l)*taps + k .. + 8 <= (c0 +
            // nc) * taps of `w` (checked above), 8 floats of `wv` per tap.
            unsafe {
                let r =
                    std::array::from_fn(|l| _mm256_loadu_ps(t.w.as_ptr().add(ch(l) * taps + k)));
                for (i, v) in transpose8(r).into_iter().enumerate() {
                    _mm256_store_ps(wv.0.as_mut_ptr().add((k + i) * BLOCK), v);
                }
            }
        }
        for (l, b) in bv.iter_mut().enumerate() {
            let c = ch(l);
            for k in k0..taps {
                wv.0[k * BLOCK + l] = t.w.get(c * taps + k).copied().unwrap_or(0.0);
            }
            *b = t.bias.and_then(|b| b.get(c).copied()).unwrap_or(0.0);
        }
        // SAFETY: pointer arithmetic inside the contract's planes; loads and stores noted.
        unsafe {
            let xs: [*const f32; BLOCK] = std::array::from_fn(|l| elem::<E>(t.x, ch(l) * hw));
            // Values of the image's input before every lane's plane (lanes past nc repeat c0).
            let before = t.c0 * hw;
            // The planes written: the output's, or for 16-bit `E` the f32 rows in `obuf`
            // (the task's outputs with `whole`, else one row), `y0` their first output.
            let yd: [*mut f32; BLOCK] = std::array::from_fn(|l| elem_mut::<E>(t.y, ch(l) * ohw));
            let bias = _mm256_loadu_ps(bv.as_ptr());
            if ring.whole {
                let rows = t.rows.clone();
                if E == O {
                    return whole::<E, O>(
                        g,
                        ring,
                        act,
                        buf,
                        &wv.0,
                        bias,
                        (&xs, before),
                        &yd,
                        0,
                        nc,
                        rows,
                    );
                }
                let len = rows.len() * g.ow;
                let ys: [*mut f32; BLOCK] = std::array::from_fn(|l| obuf.add(l * len));
                let y0 = rows.start * g.ow;
                whole::<E, O>(
                    g,
                    ring,
                    act,
                    buf,
                    &wv.0,
                    bias,
                    (&xs, before),
                    &ys,
                    y0,
                    nc,
                    rows,
                );
                let dst = yd.map(|d| elem_mut::<E>(d, y0));
                // The task's whole planes: channels c0 + l are consecutive planes.
                return flush::<E>(post, obuf, (len, len), &dst, nc, len == ohw);
            }
            // Staged 16-bit output: `rb` rows at a time, from row `r0`.
            let rb = (RING / BLOCK / g.ow.max(1)).max(1);
            let mut r0 = t.rows.start;
            let ys: [*mut f32; BLOCK] = if E == O {
                yd
            } else {
                std::array::from_fn(|l| obuf.add(l * rb * g.ow))
            };
            // (A macro, not a closure: closures do not inherit the target features.)
            macro_rules! row_done {
                ($oy:expr) => {{
                    let oy = $oy;
                    if E != O && (oy + 1 - r0 == rb || oy + 1 == t.rows.end) {
                        let dst = yd.map(|d| elem_mut::<E>(d, r0 * g.ow));
                        let len = (oy + 1 - r0) * g.ow;
                        flush::<E>(post, obuf, (rb * g.ow, len), &dst, nc, false);
                        r0 = oy + 1;
                    }
                }};
            }
            let slot = |iy: usize| buf.add((iy % ring.rows) * ring.wp * BLOCK);
            // Input rows lo..next are in the ring.
            let (mut lo, mut next) = (0usize, 0usize);
            for oy in t.rows.clone() {
                // Output row oy at `ys[l] + oy * ow - y0`.
                let y0 = if E == O { 0 } else { r0 * g.ow };
                let top = (oy * g.sh) as isize - g.pt as isize;
                let iy_of = |ky: usize| top + (ky * g.dh) as isize;
                let ky0 = (0..g.kh).find(|&ky| iy_of(ky) >= 0).unwrap_or(g.kh);
                let ky1 = (ky0..g.kh)
                    .find(|&ky| iy_of(ky) >= g.h as isize)
                    .unwrap_or(g.kh);
                if ky0 >= ky1 {
                    // No input row: bias and activation only.
                    let v = act8(act, bias);
                    let mut lanes = [0f32; BLOCK];
                    _mm256_storeu_ps(lanes.as_mut_ptr(), v);
                    for (l, &yl) in ys.iter().enumerate().take(nc) {
                        // Row oy of output plane c0 + l.
                        for ox in 0..g.ow {
                            store1::<O>(elem_mut::<O>(yl, oy * g.ow - y0 + ox), lanes[l]);
                        }
                    }
                    row_done!(oy);
                    continue;
                }
                // Load input rows iy_of(ky0) ..= iy_of(ky1 - 1) not yet in the ring.
                let (first, last) = (iy_of(ky0) as usize, iy_of(ky1 - 1) as usize);
                let from = if (lo..=next).contains(&first) {
                    next
                } else {
                    first
                };
                for iy in from..=last {
                    fill_row::<E>(g, &xs, before, slot(iy), iy);
                }
                if from == first {
                    lo = first;
                }
                next = last + 1;
                lo = lo.max(next.saturating_sub(ring.rows));
                // (A macro, not a closure: closures do not inherit the target features.)
                macro_rules! group8 {
                    ($ox:expr) => {{
                        let ox = $ox;
                        let acc = pixels::<8>(g, &wv.0, bias, act, ky0..ky1, &iy_of, &slot, ox);
                        let cols = transpose8(acc);
                        for (l, &yl) in ys.iter().enumerate().take(nc) {
                            // Columns ox..ox+8 of row oy of output plane c0 + l.
                            store8::<O>(elem_mut::<O>(yl, oy * g.ow - y0 + ox), cols[l]);
                        }
                    }};
                }
                let mut ox = 0;
                while ox + 8 <= g.ow {
                    group8!(ox);
                    ox += 8;
                }
                if ox < g.ow && g.ow >= 8 {
                    // The row's last 8 columns (some computed again, the same values).
                    group8!(g.ow - 8);
                    ox = g.ow;
                }
                while ox < g.ow {
                    let u = if g.ow - ox >= 4 { 4 } else { 1 };
                    let mut tmp = Aligned::<{ 4 * BLOCK }>([0.0; 4 * BLOCK]);
                    let out = tmp.0.as_mut_ptr();
                    if u == 4 {
                        let acc = pixels::<4>(g, &wv.0, bias, act, ky0..ky1, &iy_of, &slot, ox);
                        for (i, a) in acc.iter().enumerate() {
                            _mm256_store_ps(out.add(i * BLOCK), *a);
                        }
                    } else {
                        let acc = pixels::<1>(g, &wv.0, bias, act, ky0..ky1, &iy_of, &slot, ox);
                        _mm256_store_ps(out, acc[0]);
                    }
                    for (l, &yl) in ys.iter().enumerate().take(nc) {
                        for i in 0..u {
                            // Column ox + i < ow of row oy of output plane c0 + l.
                            let at = elem_mut::<O>(yl, oy * g.ow - y0 + ox + i);
                            store1::<O>(at, tmp.0[i * BLOCK + l]);
                        }
                    }
                    ox += u;
                }
                row_done!(oy);
            }
        }
    }

    /// A task over the whole zero-padded plane in `buf`: input rows `pt + iy`, pixels of
    /// output rows `rows` in flat groups of 8 (4, 1 at the end) across row ends, each pixel a
    /// base address plus the tap's fixed offset; 8 consecutive outputs of each channel stored
    /// at once; output `q` of channel `l` at `ys[l] + q - y0`.
    ///
    /// # Safety
    /// As [`run_tasks`], with `ring.whole`; `xs` planes of type `E`, `ys` of type `O`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn whole<const E: u8, const O: u8>(
        g: &Geom,
        ring: &Ring,
        act: Activation,
        buf: *mut f32,
        wv: &[f32],
        bias: __m256,
        (xs, before): (&[*const f32; BLOCK], usize),
        ys: &[*mut f32; BLOCK],
        y0: usize,
        nc: usize,
        rows: std::ops::Range<usize>,
    ) {
        let (wp, taps) = (ring.wp, g.kh * g.kw);
        if rows.is_empty() {
            return;
        }
        // Padded rows this band reads, and the input rows among them.
        let (p0, p1) = (
            rows.start * g.sh,
            (rows.end - 1) * g.sh + (g.kh - 1) * g.dh + 1,
        );
        let mut off = [0usize; MAX_TAPS];
        for ky in 0..g.kh {
            for kx in 0..g.kw {
                off[ky * g.kw + kx] = (ky * g.dh * wp + kx * g.dw) * BLOCK;
            }
        }
        let off = &off[..taps.min(MAX_TAPS)];
        // SAFETY: padded row pt + iy < rows (Ring::new) for input rows iy < h; every pixel
        // read lies in padded rows < hp and columns < wp; stores noted below.
        unsafe {
            for iy in p0.saturating_sub(g.pt)..p1.saturating_sub(g.pt).min(g.h) {
                fill_row::<E>(g, xs, before, buf.add((g.pt + iy) * wp * BLOCK), iy);
            }
            // (A macro, not a closure: closures do not inherit the target features.)
            macro_rules! group8 {
                ($q:expr, $oy:expr, $ox:expr) => {{
                    let q = $q;
                    let acc = flat::<8>(wv, off, bias, act, bases(g, wp, buf, $oy, $ox));
                    for (l, v) in transpose8(acc).into_iter().enumerate().take(nc) {
                        // Outputs q..q+8 < oh*ow of plane c0 + l.
                        store8::<O>(elem_mut::<O>(ys[l], q - y0), v);
                    }
                }};
            }
            let (start, end) = (rows.start * g.ow, rows.end * g.ow);
            let (mut q, mut oy, mut ox) = (start, rows.start, 0);
            while q + 8 <= end {
                group8!(q, oy, ox);
                q += 8;
                ox += 8;
                while ox >= g.ow {
                    (ox, oy) = (ox - g.ow, oy + 1);
                }
            }
            if q < end && end - start >= 8 {
                // The last 8 outputs of the task (some computed again, the same values).
                let q = end - 8;
                group8!(q, q / g.ow, q % g.ow);
                return;
            }
            while q < end {
                let u = if end - q >= 4 { 4 } else { 1 };
                let mut tmp = Aligned::<{ 4 * BLOCK }>([0.0; 4 * BLOCK]);
                let out = tmp.0.as_mut_ptr();
                let (oy, ox) = (q / g.ow, q % g.ow);
                if u == 4 {
                    let acc = flat::<4>(wv, off, bias, act, bases(g, wp, buf, oy, ox));
                    for (i, a) in acc.iter().enumerate() {
                        _mm256_store_ps(out.add(i * BLOCK), *a);
                    }
                } else {
                    _mm256_store_ps(
                        out,
                        flat::<1>(wv, off, bias, act, bases(g, wp, buf, oy, ox))[0],
                    );
                }
                for (l, &yl) in ys.iter().enumerate().take(nc) {
                    for i in 0..u {
                        // Output q + i < oh*ow of plane c0 + l.
                        store1::<O>(elem_mut::<O>(yl, q - y0 + i), tmp.0[i * BLOCK + l]);
                    }
                }
                q += u;
            }
        }
    }

    /// Base pointers (tap 0) of the `U` flat outputs from output `(oy, ox)` in the whole
    /// padded plane `buf` of `wp` pixels per row.
    #[inline(always)]
    fn bases<const U: usize>(
        g: &Geom,
        wp: usize,
        buf: *const f32,
        oy: usize,
        ox: usize,
    ) -> [*const f32; U] {
        let (mut y, mut x) = (oy, ox);
        std::array::from_fn(|_| {
            let b = buf.wrapping_add((y * g.sh * wp + x * g.sw) * BLOCK);
            x += 1;
            if x == g.ow {
                (x, y) = (0, y + 1);
            }
            b
        })
    }

    /// `U` pixels whose tap `k` lies at `base[u] + off[k]`: activation applied.
    ///
    /// # Safety
    /// AVX2+FMA; every `base[u] + off[k]` is 8 readable, 32-byte aligned floats; `wv` holds
    /// `8 * off.len()` floats.
    #[inline(always)]
    unsafe fn flat<const U: usize>(
        wv: &[f32],
        off: &[usize],
        bias: __m256,
        act: Activation,
        base: [*const f32; U],
    ) -> [__m256; U] {
        // SAFETY: the contract.
        unsafe {
            let mut acc = [bias; U];
            for (k, &o) in off.iter().enumerate() {
                let w = _mm256_load_ps(wv.as_ptr().add(k * BLOCK));
                for (a, b) in acc.iter_mut().zip(base) {
                    *a = _mm256_fmadd_ps(w, _mm256_load_ps(b.add(o)), *a);
                }
            }
            for a in &mut acc {
                *a = act8(act, *a);
            }
            acc
        }
    }

    /// Output pixels `ox .. ox + U` of the row whose input rows are `iy_of(ky)`, for the 8
    /// channels: activation applied.
    ///
    /// # Safety
    /// AVX2+FMA; the input rows `ky` are in the ring; `ox + U <= ow`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn pixels<const U: usize>(
        g: &Geom,
        wv: &[f32],
        bias: __m256,
        act: Activation,
        ky: std::ops::Range<usize>,
        iy_of: &impl Fn(usize) -> isize,
        slot: &impl Fn(usize) -> *mut f32,
        ox: usize,
    ) -> [__m256; U] {
        // SAFETY: tap (ky, kx) of pixel ox + u reads ring pixel (ox + u) * sw + kx * dw
        // < wp of a loaded row (Ring::new), 32-byte aligned (wp * 8 floats per row); the
        // weight vector of tap k sits at wv[8k..8k+8], k < kh*kw <= MAX_TAPS.
        unsafe {
            let mut acc = [bias; U];
            for ky in ky {
                let row = slot(iy_of(ky) as usize) as *const f32;
                for kx in 0..g.kw {
                    let w = _mm256_load_ps(wv.as_ptr().add((ky * g.kw + kx) * BLOCK));
                    let p = row.add((ox * g.sw + kx * g.dw) * BLOCK);
                    for (u, a) in acc.iter_mut().enumerate() {
                        *a = _mm256_fmadd_ps(w, _mm256_load_ps(p.add(u * g.sw * BLOCK)), *a);
                    }
                }
            }
            for a in &mut acc {
                *a = act8(act, *a);
            }
            acc
        }
    }
}

/// The channel-blocked kernel's runner for this CPU's selected GEMM kernel family (AVX2 or
/// AVX-512, both with FMA), if it has one.
pub(super) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let name = crate::gemm::selected_kernel().name;
        name.starts_with("avx")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// `y = act(depthwise_conv(x, w) + bias)` for `C == M == group`: tasks of (image, block of 8
/// channels, band of output rows) spread over the current pool in contiguous runs; rows are
/// cut into bands only when there are fewer blocks than runs. `x` and `y` hold elements of
/// type `E` ([`F32`], or [`F16`] / [`BF16`] values as `u16` bits behind these pointers).
///
/// # Safety
/// [`available`] is true; `ring` is `Ring::new(g)`; that of
/// [`crate::gemm::conv::arenac_conv2d`] (without the scratch) with `C == M == group`, the
/// planes in elements of type `E`.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn run<const E: u8>(
    g: &Geom,
    ring: &Ring,
    act: Activation,
    n: usize,
    c: usize,
    width: usize,
    x: *const f32,
    w: *const f32,
    bias: Option<*const f32>,
    y: *mut f32,
) {
    use crate::gemm::split::SyncPtr;
    let taps = g.kh * g.kw;
    let blocks = c.div_ceil(BLOCK);
    let units = n * blocks;
    let work = (n * c).saturating_mul(g.oh * g.ow).saturating_mul(taps);
    let wanted = (work / crate::gemm::split::MIN_TASK_MACS)
        .min(width * 4)
        .max(1);
    let bands = if width > 1 {
        wanted.div_ceil(units.max(1)).clamp(1, g.oh)
    } else {
        1
    };
    let ntasks = units * bands;
    let runs = wanted.min(ntasks).max(1);
    // An activation with an exp on an AVX-512 CPU: in a second pass per task by the 16-lane
    // `bias_act` (measured faster than 8 lanes in registers on EfficientNet-B0's SiLU).
    let avx512 = crate::gemm::selected_kernel().name.starts_with("avx512");
    let post = (!act.is_cheap() && avx512).then_some(act);
    let act = if post.is_some() {
        Activation::None
    } else {
        act
    };
    let (xp, yp) = (SyncPtr(x.cast_mut()), SyncPtr(y));
    // SAFETY: c*kh*kw weights and c biases (the caller's contract).
    let (ws, bs) = unsafe {
        (
            std::slice::from_raw_parts(w, c * taps),
            bias.map(|b| std::slice::from_raw_parts(b, c)),
        )
    };
    crate::par::for_each(runs, width, |r, _| {
        let mine = ntasks * r / runs..ntasks * (r + 1) / runs;
        let tasks = mine.map(|t| {
            let (unit, band) = (t / bands, t % bands);
            let (img, blk) = (unit / blocks, unit % blocks);
            let c0 = blk * BLOCK;
            Task {
                // Image img's planes: inside the n*c*h*w and n*c*oh*ow floats.
                x: elem::<E>(xp.get(), img * c * g.h * g.w),
                y: elem_mut::<E>(yp.get(), img * c * g.oh * g.ow),
                w: ws,
                bias: bs,
                c0,
                nc: (c - c0).min(BLOCK),
                rows: g.oh * band / bands..g.oh * (band + 1) / bands,
            }
        });
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `available` (AVX2+FMA) by the contract; each task's rows of its channels
        // belong to that task only.
        unsafe {
            x86::run_tasks::<E>(g, ring, act, post, tasks)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (tasks, ring, act);
    });
}

#[cfg(test)]
mod tests;
