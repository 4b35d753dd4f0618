//! Products of a few rows (`m <= 4`: a Gemm or MatMul on a batch of one, VGG's and
//! transformers' fully connected layers) by a reduced B, widening B in registers.
//!
//! There the GEMM core's path (widen a `KC x 32` block of B into a stack buffer, then run the
//! micro-kernel over it) costs a store and a reload per weight for a single multiply-add, and
//! the product is bound by reading the weights: these kernels load each panel row in its
//! stored type (half or a quarter of f32's bytes), widen it in registers (f16: `vcvtph2ps`;
//! bf16: a shift; int8: sign extension, conversion and the column's scale, the same product as
//! [`super::Widener`]) and accumulate it into `m` rows of 16 (AVX-512) or 2 x 8 (AVX2)
//! columns, several panels at once so the accumulation chains overlap. Each column is summed
//! as the core's small kernels sum it (one chain per K block of the core's blocking, added to
//! C), so the result equals the f32 product of the widened weights bit for bit, whatever
//! split of the columns among threads.

use super::{LowpB, WeightType};
use crate::gemm::{KC, Kernel, NR};

/// Most rows these kernels take.
pub(crate) const MAX_M: usize = 4;

/// The instruction set used, if any: AVX-512F, or AVX2 with FMA and F16C, as the selected
/// GEMM kernel.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Isa {
    Avx512,
    Avx2,
}

/// The instruction set of `kernel` (a GEMM micro-kernel this CPU runs), if these kernels
/// have one.
fn isa(kernel: &Kernel) -> Option<Isa> {
    #[cfg(target_arch = "x86_64")]
    {
        if kernel.name.starts_with("avx512") {
            return Some(Isa::Avx512);
        }
        static F16C: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        if kernel.name.starts_with("avx2") && *F16C.get_or_init(|| is_x86_feature_detected!("f16c"))
        {
            return Some(Isa::Avx2);
        }
    }
    let _ = kernel;
    None
}

/// Whether [`run`] computes an `m`-row product with `kernel`'s instruction set.
pub(crate) fn takes(kernel: &Kernel, m: usize) -> bool {
    (1..=MAX_M).contains(&m) && isa(kernel).is_some()
}

/// `C = A * B (+ C)` for `m` ([`takes`]) rows of A (row-major, stride `lda`) and the reduced
/// packed B `b` (`k` rows, `n` columns, panel 0 at its base).
///
/// # Safety
/// `a` readable for `m` rows of `k` floats at stride `lda`; `b`'s `n.div_ceil(NR)` panels of
/// `k` rows (and int8 scales) exist; `c` readable and writable for `m` rows of `n` floats at
/// stride `ldc`, overlapping nothing else; [`takes`]`(kernel, m)`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn run(
    kernel: &Kernel,
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    lda: usize,
    b: &LowpB,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
) {
    #[cfg(target_arch = "x86_64")]
    {
        let args = Args {
            m,
            n,
            k,
            a,
            lda,
            b: *b,
            c,
            ldc,
            accumulate,
        };
        // SAFETY: the caller's contract; the CPU runs the ISA (`isa`).
        unsafe {
            match isa(kernel) {
                Some(Isa::Avx512) => x86::avx512(&args),
                Some(Isa::Avx2) => x86::avx2(&args),
                None => {}
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (kernel, m, n, k, a, lda, b, c, ldc, accumulate);
}

/// The operands of [`run`].
#[cfg(target_arch = "x86_64")]
struct Args {
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    lda: usize,
    b: LowpB,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Args, KC, NR, WeightType};
    use core::arch::x86_64::*;

    /// Type codes (const generic parameters).
    const F16: u8 = 1;
    const BF16: u8 = 2;
    const I8: u8 = 3;

    fn code(t: WeightType) -> u8 {
        match t {
            WeightType::F16 => F16,
            WeightType::Bf16 => BF16,
            _ => I8,
        }
    }

    /// Stores the `m x 16` sums `acc` (row r, lanes of `tile[r]`) at columns `j0 ..` of C,
    /// the first `w` of them, added to C when `add`.
    ///
    /// # Safety
    /// Rows `0..m`, columns `j0 .. j0 + w` of C in bounds.
    unsafe fn put(g: &Args, tile: &[[f32; NR]; 4], j0: usize, w: usize, add: bool) {
        for (r, row) in tile.iter().enumerate().take(g.m) {
            // SAFETY: row r < m, columns j0 .. j0 + w <= n of C (the contract).
            let dst = unsafe { std::slice::from_raw_parts_mut(g.c.add(r * g.ldc + j0), w) };
            for (d, &x) in dst.iter_mut().zip(row) {
                *d = if add { x + *d } else { x };
            }
        }
    }

    /// The core's K blocks of `k`: as few as [`KC`] allows, of nearly equal size.
    fn kblocks(k: usize) -> impl Iterator<Item = (usize, usize)> {
        let kc_max = k.div_ceil(k.div_ceil(KC).max(1)).max(1);
        (0..k)
            .step_by(kc_max)
            .map(move |pc| (pc, kc_max.min(k - pc)))
    }

    /// AVX-512: `P` panels at a time (4, then 1 for the rest).
    ///
    /// # Safety
    /// That of [`super::run`], on an AVX-512F CPU.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn avx512(g: &Args) {
        macro_rules! go {
            ($t:expr) => {
                match g.m {
                    1 => z::<1, $t>(g),
                    2 => z::<2, $t>(g),
                    3 => z::<3, $t>(g),
                    _ => z::<4, $t>(g),
                }
            };
        }
        // SAFETY: the contract, passed on.
        unsafe {
            match code(g.b.t) {
                F16 => go!(F16),
                BF16 => go!(BF16),
                _ => go!(I8),
            }
        }
    }

    /// [`avx512`] for `M` rows and type `T`.
    ///
    /// # Safety
    /// That of [`avx512`].
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn z<const M: usize, const T: u8>(g: &Args) {
        let panels = g.n.div_ceil(NR);
        let mut jp = 0;
        // SAFETY: the contract: panels jp.. exist, A rows and C rows in bounds.
        unsafe {
            while jp + 4 <= panels {
                z_block::<M, 4, T>(g, jp);
                jp += 4;
            }
            while jp < panels {
                z_block::<M, 1, T>(g, jp);
                jp += 1;
            }
        }
    }

    /// Panels `jp .. jp + P` of [`z`].
    ///
    /// # Safety
    /// Those panels exist; that of [`avx512`].
    #[inline(always)]
    unsafe fn z_block<const M: usize, const P: usize, const T: u8>(g: &Args, jp: usize) {
        let tb = g.b.t.bytes();
        // SAFETY: panels jp .. jp + P of k rows (and their scales), rows 0..M of A, and
        // columns of C inside n: the contract.
        unsafe {
            let mut src = [g.b.base; P];
            let mut sc = [_mm512_setzero_ps(); P];
            for (q, s) in src.iter_mut().enumerate() {
                *s = g.b.base.add((jp + q) * g.b.ps * tb);
                if T == I8 {
                    sc[q] = _mm512_loadu_ps(g.b.scales.add((jp + q) * NR));
                }
            }
            for (pc, kc) in kblocks(g.k) {
                let mut acc = [[_mm512_setzero_ps(); P]; M];
                for i in pc..pc + kc {
                    let mut wv = [_mm512_setzero_ps(); P];
                    for (q, v) in wv.iter_mut().enumerate() {
                        let p = src[q].add(i * NR * tb);
                        *v = match T {
                            F16 => _mm512_cvtph_ps(_mm256_loadu_si256(p.cast())),
                            BF16 => _mm512_castsi512_ps(_mm512_slli_epi32::<16>(
                                _mm512_cvtepu16_epi32(_mm256_loadu_si256(p.cast())),
                            )),
                            _ => _mm512_mul_ps(
                                _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p.cast()))),
                                sc[q],
                            ),
                        };
                    }
                    for (r, ar) in acc.iter_mut().enumerate() {
                        let x = _mm512_set1_ps(*g.a.add(r * g.lda + i));
                        for (a, &v) in ar.iter_mut().zip(&wv) {
                            *a = _mm512_fmadd_ps(x, v, *a);
                        }
                    }
                }
                #[allow(clippy::needless_range_loop)] // q indexes acc[r][q] for each row r
                for q in 0..P {
                    let j0 = (jp + q) * NR;
                    if j0 >= g.n {
                        break;
                    }
                    let mut tile = [[0.0f32; NR]; 4];
                    for (r, t) in tile.iter_mut().enumerate().take(M) {
                        _mm512_storeu_ps(t.as_mut_ptr(), acc[r][q]);
                    }
                    put(g, &tile, j0, NR.min(g.n - j0), g.accumulate || pc > 0);
                }
            }
        }
    }

    /// AVX2 + F16C: a panel is two 8-lane halves; 2 panels at a time for up to 2 rows, else 1.
    ///
    /// # Safety
    /// That of [`super::run`], on a CPU with AVX2, FMA and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn avx2(g: &Args) {
        macro_rules! go {
            ($t:expr) => {
                match g.m {
                    1 => y::<1, 2, $t>(g),
                    2 => y::<2, 2, $t>(g),
                    3 => y::<3, 1, $t>(g),
                    _ => y::<4, 1, $t>(g),
                }
            };
        }
        // SAFETY: the contract, passed on.
        unsafe {
            match code(g.b.t) {
                F16 => go!(F16),
                BF16 => go!(BF16),
                _ => go!(I8),
            }
        }
    }

    /// [`avx2`] for `M` rows, `P` panels at a time (then 1), type `T`.
    ///
    /// # Safety
    /// That of [`avx2`].
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn y<const M: usize, const P: usize, const T: u8>(g: &Args) {
        let panels = g.n.div_ceil(NR);
        let mut jp = 0;
        // SAFETY: the contract: panels jp.. exist, A rows and C rows in bounds.
        unsafe {
            while jp + P <= panels {
                y_block::<M, P, T>(g, jp);
                jp += P;
            }
            while jp < panels {
                y_block::<M, 1, T>(g, jp);
                jp += 1;
            }
        }
    }

    /// Widens 8 elements of type `T` at `p` (int8 times `s`).
    ///
    /// # Safety
    /// `p` readable for 8 elements; AVX2 + F16C.
    #[inline(always)]
    unsafe fn widen8<const T: u8>(p: *const u8, s: __m256) -> __m256 {
        // SAFETY: the contract.
        unsafe {
            match T {
                F16 => _mm256_cvtph_ps(_mm_loadu_si128(p.cast())),
                BF16 => _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(
                    _mm_loadu_si128(p.cast()),
                ))),
                _ => _mm256_mul_ps(
                    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(p.cast()))),
                    s,
                ),
            }
        }
    }

    /// Panels `jp .. jp + P` of [`y`].
    ///
    /// # Safety
    /// Those panels exist; that of [`avx2`].
    #[inline(always)]
    unsafe fn y_block<const M: usize, const P: usize, const T: u8>(g: &Args, jp: usize) {
        let tb = g.b.t.bytes();
        // SAFETY: as in `z_block`.
        unsafe {
            let mut src = [g.b.base; P];
            let mut sc = [[_mm256_setzero_ps(); 2]; P];
            for (q, s) in src.iter_mut().enumerate() {
                *s = g.b.base.add((jp + q) * g.b.ps * tb);
                if T == I8 {
                    let p = g.b.scales.add((jp + q) * NR);
                    sc[q] = [_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8))];
                }
            }
            for (pc, kc) in kblocks(g.k) {
                let mut acc = [[[_mm256_setzero_ps(); 2]; P]; M];
                for i in pc..pc + kc {
                    let mut wv = [[_mm256_setzero_ps(); 2]; P];
                    for (q, v) in wv.iter_mut().enumerate() {
                        let p = src[q].add(i * NR * tb);
                        *v = [
                            widen8::<T>(p, sc[q][0]),
                            widen8::<T>(p.add(8 * tb), sc[q][1]),
                        ];
                    }
                    for (r, ar) in acc.iter_mut().enumerate() {
                        let x = _mm256_set1_ps(*g.a.add(r * g.lda + i));
                        for (a, v) in ar.iter_mut().zip(&wv) {
                            a[0] = _mm256_fmadd_ps(x, v[0], a[0]);
                            a[1] = _mm256_fmadd_ps(x, v[1], a[1]);
                        }
                    }
                }
                #[allow(clippy::needless_range_loop)] // q indexes acc[r][q] for each row r
                for q in 0..P {
                    let j0 = (jp + q) * NR;
                    if j0 >= g.n {
                        break;
                    }
                    let mut tile = [[0.0f32; NR]; 4];
                    for (r, t) in tile.iter_mut().enumerate().take(M) {
                        _mm256_storeu_ps(t.as_mut_ptr(), acc[r][q][0]);
                        _mm256_storeu_ps(t.as_mut_ptr().add(8), acc[r][q][1]);
                    }
                    put(g, &tile, j0, NR.min(g.n - j0), g.accumulate || pc > 0);
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "gemv_tests.rs"]
mod tests;
