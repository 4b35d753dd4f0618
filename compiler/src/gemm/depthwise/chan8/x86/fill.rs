//! Loading input rows into the kernel's ring: 8 channel planes of any element type, widened
//! and transposed 8 x 8 into pixels of 8 channel lanes.

use super::super::io::x86::{load1, load8};
use super::super::{BLOCK, F32, Geom, elem};
use super::transpose8;
use core::arch::x86_64::*;

/// Input row `iy` of the 8 channel planes `xs` (of type `E`) into ring row `dst` (pixels
/// pl..pl+w).
///
/// # Safety
/// AVX2 and F16C; `iy < h`; `dst` is a ring row of `wp >= pl + w` pixels x 8 floats;
/// the `before` values preceding each plane of `xs` are readable (the image's earlier
/// planes).
#[inline(always)]
pub(super) unsafe fn fill_row<const E: u8>(
    g: &Geom,
    xs: &[*const f32; BLOCK],
    before: usize,
    dst: *mut f32,
    iy: usize,
) {
    // SAFETY: reads columns j < w of row iy of each plane, writes ring pixels pl + j.
    unsafe {
        let d = dst.add(g.pl * BLOCK);
        let src: [*const f32; BLOCK] = std::array::from_fn(|l| elem::<E>(xs[l], iy * g.w));
        let mut j = 0;
        // (Loops, not `array::from_fn`: closures do not inherit the target features, and
        // the 16-bit loads are not inlined into one.)
        let mut r = [_mm256_setzero_ps(); BLOCK];
        while j + 8 <= g.w {
            for (v, &s) in r.iter_mut().zip(&src) {
                *v = load8::<E>(elem::<E>(s, j));
            }
            for (k, v) in transpose8(r).into_iter().enumerate() {
                _mm256_store_ps(d.add((j + k) * BLOCK), v);
            }
            j += 8;
        }
        if j < g.w && g.w >= 8 {
            // The last 8 columns (some written again, the same values).
            let j = g.w - 8;
            for (v, &s) in r.iter_mut().zip(&src) {
                *v = load8::<E>(elem::<E>(s, j));
            }
            for (k, v) in transpose8(r).into_iter().enumerate() {
                _mm256_store_ps(d.add((j + k) * BLOCK), v);
            }
            return;
        }
        if E != F32 && j < g.w && before + iy * g.w + g.w >= BLOCK {
            // A row of fewer than 8 values: the 8 values ending at its end (the first
            // from earlier rows or planes of the image), pixel k in lane 8 - rest + k.
            let rest = g.w - j;
            for (v, &s) in r.iter_mut().zip(&src) {
                let p = elem::<E>(s, j).cast::<u16>().wrapping_sub(BLOCK - rest);
                *v = load8::<E>(p.cast());
            }
            let cols = transpose8(r);
            for k in 0..rest {
                _mm256_store_ps(d.add((j + k) * BLOCK), cols[BLOCK - rest + k]);
            }
            return;
        }
        if E != F32 && j < g.w {
            // The same at the image's start: each channel's values through a zeroed
            // stack vector (a store-forwarding stall per load: only here).
            let rest = g.w - j;
            let mut h = [0u16; BLOCK];
            for (v, &s) in r.iter_mut().zip(&src) {
                let s = elem::<E>(s, j).cast::<u16>();
                for (i, e) in h.iter_mut().enumerate().take(rest) {
                    *e = *s.add(i);
                }
                *v = load8::<E>(h.as_ptr().cast());
            }
            for (k, v) in transpose8(r).into_iter().enumerate().take(rest) {
                _mm256_store_ps(d.add((j + k) * BLOCK), v);
            }
            return;
        }
        while j < g.w {
            for (l, s) in src.iter().enumerate() {
                *d.add(j * BLOCK + l) = load1::<E>(elem::<E>(*s, j));
            }
            j += 1;
        }
    }
}
