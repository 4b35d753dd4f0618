//! The input side of one unit ([`super::unit`]): each packed panel's 16 tiles' 6 x 6 input
//! patches gathered into lanes (`d[r][k]`, lane `l` the panel's tile `l`), the input
//! transform ([`transform::input`]) and the 36 rows of the packed `V_p` stored.
//!
//! The gather: a panel's tiles are runs ([`Seg`]) of consecutive tiles of one tile row, and
//! the patches of a run at stride 4 read, in patch row `r`, the columns `base + 4 l + k`
//! (`k` in 0..6) of one input row. On AVX-512 ([`gather_avx512`]) the columns `4 l .. 4 l +
//! 4` of all lanes are 4 vectors (masked, merging loads: each run's elements inside the
//! plane, zeros elsewhere, the padding), deinterleaved at stride 4 by 8 two-source permutes
//! into `k` 0..4; `k` 4 and 5 are `k` 0 and 1 one lane on, and the run's last lane loads its
//! two. Elsewhere ([`gather_scalar`]) one value at a time. Either way every lane holds the
//! same values (the plane's or 0.0), so the transform's bits do not depend on the path.

use super::transform::{self, L, Lanes};
use super::{NR, POS};
use crate::gemm::stage16::N16;

/// A 16-bit input read in place ([`super::run16`]): the staged 16-bit Winograd bands
/// (`crate::gemm::stage16::conv`) read their rows of the node's input planes, widened by
/// the gathers' loads, instead of a band widened into their scratch first.
#[derive(Clone, Copy, Debug)]
pub(crate) struct In16 {
    /// Row 0 of the band in channel 0 of image 0: the band's row `r` of channel `ci` is at
    /// `x + ci * cs + r * w` (only rows in [`In16::rows`] are read: `x` itself may lie
    /// before the plane, the band's top padding).
    pub(crate) x: *const u16,
    pub(crate) t: N16,
    /// Elements from one channel's plane to the next (and `c` of them from one image's to
    /// the next).
    pub(crate) cs: usize,
    /// The band's rows inside the plane, `[start, end)`: the others read as zeros, as the
    /// padding rows of a widened band are.
    pub(crate) rows: (isize, isize),
}

// SAFETY: a read-only view of the input planes (the contract of `super::run16`), shared by
// the threads of one run as `super::run`'s `x` is.
unsafe impl Send for In16 {}
// SAFETY: as above.
unsafe impl Sync for In16 {}

impl In16 {
    /// The view from image `img` of `c` channels on.
    pub(super) fn image(self, img: usize, c: usize) -> Self {
        Self {
            x: self.x.wrapping_add(img * c * self.cs),
            ..self
        }
    }
}

/// Value `v` widened as `crate::gemm::stage16::widen` widens it (a NaN quieted).
fn widen1(t: N16, v: u16) -> f32 {
    match t {
        N16::F16 => half::f16::from_bits(v).to_f32(),
        N16::Bf16 => half::bf16::from_bits(v).to_f32(),
    }
}

/// A tile block's geometry and pointers, as the input transform reads them.
pub(super) struct Block {
    /// The image's input planes (`c` x `h` x `w`), or the 16-bit ones read in their place.
    pub(super) xi: *const f32,
    pub(super) x16: Option<In16>,
    pub(super) c: usize,
    pub(super) h: usize,
    pub(super) w: usize,
    /// Top and left pads.
    pub(super) pt: isize,
    pub(super) pl: isize,
    /// Tiles per row of the plane.
    pub(super) tw: usize,
    /// The block's first tile, its tiles, its packed columns (a multiple of [`NR`]) and the
    /// tiles per block (the `V_p` panel layout's `t`).
    pub(super) first: usize,
    pub(super) nt: usize,
    pub(super) n_cols: usize,
    pub(super) t: usize,
    /// The 36 packed `V_p` (`c` x `t` each).
    pub(super) v: *mut f32,
}

impl Block {
    /// The rows of a plane read (the others are zeros): all `h`, or a 16-bit band's inside
    /// the plane.
    fn rows(&self) -> (isize, isize) {
        self.x16.map_or((0, self.h as isize), |s| s.rows)
    }
}

/// A run of lanes of one panel whose tiles are consecutive in one tile row: lane `l` of it
/// reads the columns `col + 4 l + k` of input rows `iy + r`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Seg {
    /// The patches' first input row (may be above the plane: the top pad).
    pub(super) iy: isize,
    /// The column of lane 0's patch were it in this run (`ix` of the first lane - 4 x it).
    pub(super) col: isize,
    /// The run's lanes.
    pub(super) l0: usize,
    pub(super) end: usize,
    /// Bit `4 l + k` (`k` in 0..4): lane `l` of the run, column `col + 4 l + k` inside the
    /// plane.
    pub(super) cols: u64,
    /// Whether the last lane's columns 4 and 5 are inside the plane.
    pub(super) end4: bool,
    pub(super) end5: bool,
}

/// The runs of panel `gi` of `b` (at most [`L`]; lanes past the block's tiles in none).
pub(super) fn segments(b: &Block, gi: usize) -> ([Seg; L], usize) {
    let mut segs = [Seg::default(); L];
    let mut n = 0;
    let lanes = L.min(b.nt.saturating_sub(gi * L));
    let w = b.w as isize;
    let inside = |x: isize| x >= 0 && x < w;
    for l in 0..lanes {
        let ti = b.first + gi * L + l;
        let (ty, tx) = (ti / b.tw, ti % b.tw);
        let (iy, ix) = (4 * ty as isize - b.pt, 4 * tx as isize - b.pl);
        if l == 0 || tx == 0 {
            segs[n] = Seg {
                iy,
                col: ix - 4 * l as isize,
                l0: l,
                ..Seg::default()
            };
            n += 1;
        }
        let s = &mut segs[n - 1];
        s.end = l;
        for k in 0..4 {
            if inside(ix + k as isize) {
                s.cols |= 1 << (4 * l + k);
            }
        }
        s.end4 = inside(ix + 4);
        s.end5 = inside(ix + 5);
    }
    (segs, n)
}

/// The patches of `segs` in input plane `plane` one value at a time (the reference, and the
/// path without AVX-512).
///
/// # Safety
/// `plane` holds `b.h` x `b.w` floats; `segs` made by [`segments`] for `b`.
pub(super) unsafe fn gather_scalar(
    b: &Block,
    plane: *const f32,
    segs: &[Seg],
    d: &mut [[Lanes; 6]; 6],
) {
    // SAFETY: `at` is inside the plane (`gather_by`), which the contract makes readable.
    gather_by(b, segs, d, |at| unsafe { *plane.offset(at) });
}

/// [`gather_scalar`] reading the value at element `at` of the plane by `read`, for each
/// row in [`Block::rows`] and column inside the plane.
#[inline(always)]
fn gather_by(b: &Block, segs: &[Seg], d: &mut [[Lanes; 6]; 6], read: impl Fn(isize) -> f32) {
    *d = [[[0.0; L]; 6]; 6];
    let ((y0, y1), w) = (b.rows(), b.w as isize);
    for s in segs {
        for l in s.l0..=s.end {
            let ix = s.col + 4 * l as isize;
            for (r, dr) in d.iter_mut().enumerate() {
                let yy = s.iy + r as isize;
                if yy < y0 || yy >= y1 {
                    continue;
                }
                for (k, dk) in dr.iter_mut().enumerate() {
                    let xx = ix + k as isize;
                    if xx >= 0 && xx < w {
                        dk[l] = read(yy * w + xx);
                    }
                }
            }
        }
    }
}

/// [`gather_scalar`] by vector loads and stride-4 deinterleaves (module doc).
///
/// # Safety
/// As [`gather_scalar`]; the CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn gather_avx512(
    b: &Block,
    plane: *const f32,
    segs: &[Seg],
    d: &mut [[Lanes; 6]; 6],
) {
    use std::arch::x86_64::*;
    let (y0, y1) = b.rows();
    // Level 1: from A_j | A_j+1 (lanes 4j..4j+8, 4 columns each), lanes' columns k and k + 1
    // in the low and high halves; level 2: lanes 0..8 of one, 8..16 of the other.
    let lo = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
    let hi = _mm512_setr_epi32(2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
    let lo2 = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    let hi2 = _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    let next = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 15);
    let mut not_end: u16 = !0;
    for s in segs {
        not_end &= !(1 << s.end);
    }
    for (r, dr) in d.iter_mut().enumerate() {
        let mut a = [_mm512_setzero_ps(); 4];
        let mut k4 = _mm512_setzero_ps();
        let mut k5 = _mm512_setzero_ps();
        let mut rows = 0;
        for s in segs {
            let yy = s.iy + r as isize;
            if yy < y0 || yy >= y1 {
                continue;
            }
            rows += 1;
            let row = plane.wrapping_offset(yy * b.w as isize + s.col);
            for (j, aj) in a.iter_mut().enumerate() {
                let m = (s.cols >> (16 * j)) as u16;
                if m != 0 {
                    // SAFETY: the masked-on elements are columns inside the plane of row yy
                    // (`Seg::cols`); masked-off ones are not read.
                    *aj = unsafe { _mm512_mask_loadu_ps(*aj, m, row.wrapping_add(16 * j)) };
                }
            }
            let e = 4 * s.end;
            // SAFETY: columns 4 and 5 of the last lane, read only inside the plane.
            unsafe {
                if s.end4 {
                    k4 = _mm512_mask_mov_ps(k4, 1 << s.end, _mm512_set1_ps(*row.add(e + 4)));
                }
                if s.end5 {
                    k5 = _mm512_mask_mov_ps(k5, 1 << s.end, _mm512_set1_ps(*row.add(e + 5)));
                }
            }
        }
        if rows == 0 {
            for dk in dr.iter_mut() {
                *dk = [0.0; L];
            }
            continue;
        }
        let t0 = _mm512_permutex2var_ps(a[0], lo, a[1]);
        let t1 = _mm512_permutex2var_ps(a[0], hi, a[1]);
        let t2 = _mm512_permutex2var_ps(a[2], lo, a[3]);
        let t3 = _mm512_permutex2var_ps(a[2], hi, a[3]);
        let k0 = _mm512_permutex2var_ps(t0, lo2, t2);
        let k1 = _mm512_permutex2var_ps(t0, hi2, t2);
        let k = [
            k0,
            k1,
            _mm512_permutex2var_ps(t1, lo2, t3),
            _mm512_permutex2var_ps(t1, hi2, t3),
            // Columns 4 and 5 of lane l are columns 0 and 1 of lane l + 1 within a run; the
            // runs' last lanes hold their own (or 0.0 outside the plane).
            _mm512_mask_permutexvar_ps(k4, not_end, next, k0),
            _mm512_mask_permutexvar_ps(k5, not_end, next, k1),
        ];
        for (dk, kv) in dr.iter_mut().zip(k) {
            // SAFETY: 16 floats of `d`.
            unsafe { _mm512_storeu_ps(dk.as_mut_ptr(), kv) };
        }
    }
}

/// [`gather_avx512`] on a 16-bit plane ([`In16`]): each vector of 16 columns a masked
/// 16-bit load widened in registers (as `crate::gemm::stage16::widen` widens), so every
/// lane holds the value [`gather_avx512`] loads from the widened plane.
///
/// # Safety
/// As [`gather_avx512`] with `plane` the 16-bit plane; the CPU has AVX-512F, BW and VL.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
pub(super) unsafe fn gather16_avx512(
    t: N16,
    b: &Block,
    plane: *const u16,
    segs: &[Seg],
    d: &mut [[Lanes; 6]; 6],
) {
    use crate::gemm::stage16::convert::x86::widen16;
    use std::arch::x86_64::*;
    let (y0, y1) = b.rows();
    // Level 1: from A_j | A_j+1 (lanes 4j..4j+8, 4 columns each), lanes' columns k and k + 1
    // in the low and high halves; level 2: lanes 0..8 of one, 8..16 of the other.
    let lo = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
    let hi = _mm512_setr_epi32(2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
    let lo2 = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    let hi2 = _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    let next = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 15);
    let mut not_end: u16 = !0;
    for s in segs {
        not_end &= !(1 << s.end);
    }
    for (r, dr) in d.iter_mut().enumerate() {
        let mut a = [_mm512_setzero_ps(); 4];
        let mut k4 = _mm512_setzero_ps();
        let mut k5 = _mm512_setzero_ps();
        let mut rows = 0;
        for s in segs {
            let yy = s.iy + r as isize;
            if yy < y0 || yy >= y1 {
                continue;
            }
            rows += 1;
            let row = plane.wrapping_offset(yy * b.w as isize + s.col);
            for (j, aj) in a.iter_mut().enumerate() {
                let m = (s.cols >> (16 * j)) as u16;
                if m != 0 {
                    // SAFETY: the masked-on elements are columns inside the plane of row yy
                    // (`Seg::cols`); masked-off ones are not read.
                    let h = unsafe { _mm256_maskz_loadu_epi16(m, row.wrapping_add(16 * j).cast()) };
                    *aj = _mm512_mask_mov_ps(*aj, m, widen16(t, h));
                }
            }
            let e = 4 * s.end;
            // SAFETY: columns 4 and 5 of the last lane, read only inside the plane.
            unsafe {
                if s.end4 {
                    k4 = _mm512_mask_mov_ps(
                        k4,
                        1 << s.end,
                        _mm512_set1_ps(widen1(t, *row.add(e + 4))),
                    );
                }
                if s.end5 {
                    k5 = _mm512_mask_mov_ps(
                        k5,
                        1 << s.end,
                        _mm512_set1_ps(widen1(t, *row.add(e + 5))),
                    );
                }
            }
        }
        if rows == 0 {
            for dk in dr.iter_mut() {
                *dk = [0.0; L];
            }
            continue;
        }
        let t0 = _mm512_permutex2var_ps(a[0], lo, a[1]);
        let t1 = _mm512_permutex2var_ps(a[0], hi, a[1]);
        let t2 = _mm512_permutex2var_ps(a[2], lo, a[3]);
        let t3 = _mm512_permutex2var_ps(a[2], hi, a[3]);
        let k0 = _mm512_permutex2var_ps(t0, lo2, t2);
        let k1 = _mm512_permutex2var_ps(t0, hi2, t2);
        let k = [
            k0,
            k1,
            _mm512_permutex2var_ps(t1, lo2, t3),
            _mm512_permutex2var_ps(t1, hi2, t3),
            // Columns 4 and 5 of lane l are columns 0 and 1 of lane l + 1 within a run; the
            // runs' last lanes hold their own (or 0.0 outside the plane).
            _mm512_mask_permutexvar_ps(k4, not_end, next, k0),
            _mm512_mask_permutexvar_ps(k5, not_end, next, k1),
        ];
        for (dk, kv) in dr.iter_mut().zip(k) {
            // SAFETY: 16 floats of `d`.
            unsafe { _mm512_storeu_ps(dk.as_mut_ptr(), kv) };
        }
    }
}

/// The 8-lane mask of bits `bits` (bit `i`: lane `i` all ones).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn lane_mask(bits: u8) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::*;
    let one = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    _mm256_cmpeq_epi32(
        _mm256_and_si256(_mm256_set1_epi32(i32::from(bits)), one),
        one,
    )
}

/// [`gather_avx512`] on AVX2: each half of the lanes (8) from 4 vectors of 2 lanes' 4
/// columns (masked loads, each run's elements inside the plane ORed in: the others load as
/// +0.0), deinterleaved by a 4 x 4 transpose in each 128-bit half (8 unpacks) and a lane
/// permute; columns 4 and 5 one lane on, read back from `d`'s columns 0 and 1.
///
/// # Safety
/// As [`gather_scalar`]; the CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn gather_avx2(
    b: &Block,
    plane: *const f32,
    segs: &[Seg],
    d: &mut [[Lanes; 6]; 6],
) {
    use std::arch::x86_64::*;
    let (y0, y1) = b.rows();
    let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    // Lanes whose columns 4 and 5 are the next lane's 0 and 1: inside a run, not its last.
    let mut next: u16 = 0;
    for s in segs {
        for l in s.l0..s.end {
            next |= 1 << l;
        }
    }
    let next = [lane_mask(next as u8), lane_mask((next >> 8) as u8)];
    for (r, dr) in d.iter_mut().enumerate() {
        let mut a = [[_mm256_setzero_ps(); 4]; 2];
        let (mut e4, mut e5) = ([0.0f32; L], [0.0f32; L]);
        for s in segs {
            let yy = s.iy + r as isize;
            if yy < y0 || yy >= y1 {
                continue;
            }
            let row = plane.wrapping_offset(yy * b.w as isize + s.col);
            for (half, ah) in a.iter_mut().enumerate() {
                for (j, aj) in ah.iter_mut().enumerate() {
                    let at = 32 * half + 8 * j;
                    let m = (s.cols >> at) as u8;
                    if m != 0 {
                        // SAFETY: the masked-on elements are columns inside the plane of row
                        // yy (`Seg::cols`); masked-off ones are not read (and load as 0.0).
                        let v = unsafe { _mm256_maskload_ps(row.wrapping_add(at), lane_mask(m)) };
                        *aj = _mm256_or_ps(*aj, v);
                    }
                }
            }
            let e = 4 * s.end;
            // SAFETY: columns 4 and 5 of the last lane, read only inside the plane.
            unsafe {
                if s.end4 {
                    e4[s.end] = *row.add(e + 4);
                }
                if s.end5 {
                    e5[s.end] = *row.add(e + 5);
                }
            }
        }
        for (half, ah) in a.iter().enumerate() {
            let t0 = _mm256_unpacklo_ps(ah[0], ah[1]);
            let t1 = _mm256_unpackhi_ps(ah[0], ah[1]);
            let t2 = _mm256_unpacklo_ps(ah[2], ah[3]);
            let t3 = _mm256_unpackhi_ps(ah[2], ah[3]);
            let pd = _mm256_castps_pd;
            let k = [
                _mm256_unpacklo_pd(pd(t0), pd(t2)),
                _mm256_unpackhi_pd(pd(t0), pd(t2)),
                _mm256_unpacklo_pd(pd(t1), pd(t3)),
                _mm256_unpackhi_pd(pd(t1), pd(t3)),
            ];
            for (dk, kv) in dr.iter_mut().zip(k) {
                let kv = _mm256_permutevar8x32_ps(_mm256_castpd_ps(kv), order);
                // SAFETY: 8 floats of `d`.
                unsafe { _mm256_storeu_ps(dk.as_mut_ptr().add(8 * half), kv) };
            }
        }
        for (col, ends) in [(4, e4), (5, e5)] {
            let from = dr[col - 4].as_ptr();
            for (half, nh) in next.iter().enumerate() {
                // SAFETY: lanes 1..17 of columns 0 / 1 (the 17th, column 1's / 2's first, is
                // a float of `d`, never selected: lane 15 is a run's last or none's).
                let shifted = unsafe { _mm256_loadu_ps(from.add(8 * half + 1)) };
                // SAFETY: 8 floats of `ends`.
                let own = unsafe { _mm256_loadu_ps(ends.as_ptr().add(8 * half)) };
                let v = _mm256_blendv_ps(own, shifted, _mm256_castsi256_ps(*nh));
                // SAFETY: 8 floats of `d`.
                unsafe { _mm256_storeu_ps(dr[col].as_mut_ptr().add(8 * half), v) };
            }
        }
    }
}

/// The gather of `isa`.
///
/// # Safety
/// As [`gather_scalar`]; the CPU runs `isa`.
#[inline(always)]
unsafe fn gather(
    isa: super::Isa,
    b: &Block,
    plane: *const f32,
    segs: &[Seg],
    d: &mut [[Lanes; 6]; 6],
) {
    #[cfg(target_arch = "x86_64")]
    match isa {
        // SAFETY: the caller's contract.
        super::Isa::Avx512 => return unsafe { gather_avx512(b, plane, segs, d) },
        // SAFETY: the caller's contract.
        super::Isa::Avx2 => return unsafe { gather_avx2(b, plane, segs, d) },
        super::Isa::Portable => {}
    }
    let _ = isa;
    // SAFETY: the caller's contract.
    unsafe { gather_scalar(b, plane, segs, d) }
}

/// Whether the CPU has AVX-512 BW and VL ([`gather16_avx512`]'s masked 16-bit loads).
fn bw() -> bool {
    static BW: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *BW.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vl")
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    })
}

/// The gather of a 16-bit plane: [`gather16_avx512`] where `vector` (AVX-512 with BW and
/// VL), else one value at a time ([`gather_by`]).
///
/// # Safety
/// As [`gather16_avx512`] (the CPU's features only where `vector`).
#[inline(always)]
unsafe fn gather16(
    vector: bool,
    t: N16,
    b: &Block,
    plane: *const u16,
    segs: &[Seg],
    d: &mut [[Lanes; 6]; 6],
) {
    #[cfg(target_arch = "x86_64")]
    if vector {
        // SAFETY: the caller's contract; `vector` says the CPU has the features.
        return unsafe { gather16_avx512(t, b, plane, segs, d) };
    }
    let _ = vector;
    // SAFETY: `at` is a row in `Block::rows` and a column inside the plane: readable.
    gather_by(b, segs, d, |at| widen1(t, unsafe { *plane.offset(at) }));
}

/// The input transform of input channels `chans` of `b`'s tiles into their rows of every
/// `V_p`, 16 tiles (one packed panel) at a time.
///
/// # Safety
/// `b.xi` holds the image's `c` planes; `b.v` the 36 `V_p` of the slot; writes only rows
/// `chans` of the `V_p`.
#[inline(always)]
pub(super) unsafe fn input(b: &Block, chans: std::ops::Range<usize>) {
    let (c, h, w, t) = (b.c, b.h, b.w, b.t);
    let isa = super::isa();
    let wide16 = isa == super::Isa::Avx512 && bw();
    let mut d = [[[0.0f32; L]; 6]; 6];
    let mut vt = [[0.0f32; L]; POS];
    for gi in 0..b.n_cols / L {
        let (segs, n) = segments(b, gi);
        let segs = &segs[..n];
        for ci in chans.clone() {
            if let Some(s16) = b.x16 {
                let plane = s16.x.wrapping_add(ci * s16.cs);
                // SAFETY: channel ci's band rows (`In16`); the ISA checked.
                unsafe { gather16(wide16, s16.t, b, plane, segs, &mut d) };
            } else {
                let plane = b.xi.wrapping_add(ci * h * w);
                // SAFETY: the plane of channel ci; the ISA the selected kernel's (which this
                // CPU runs).
                unsafe { gather(isa, b, plane, segs, &mut d) };
            }
            transform::input(&d, &mut vt);
            for (pos, vp) in vt.iter().enumerate() {
                // SAFETY: panel gi, row ci of V_pos (c x t packed: panel stride c * NR),
                // inside the slot's V part.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        vp.as_ptr(),
                        b.v.add(pos * c * t + gi * c * NR + ci * NR),
                        NR,
                    )
                };
            }
        }
    }
}

#[cfg(test)]
mod tests;
