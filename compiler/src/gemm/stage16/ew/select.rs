//! `Where(cond, a, b)` on 16-bit values (f16/bf16 `--activations`: the attention mask of a
//! decoder): each output the bits of `a` where the condition byte is nonzero, else of `b` —
//! the typed JIT kernel's reading (a byte load, a select of the raw 16-bit bits), so the same
//! bits, NaN payloads included. That kernel goes element by element; here each operand
//! broadcasts as one block of dims ([`Bcast`]) and the output is cut, as [`super::fast`]
//! cuts it, into segments over which every operand is a contiguous run or one value, each
//! segment 32 outputs per AVX-512BW step (the condition bytes tested into a mask blending
//! the operands' 16-bit lanes; elsewhere a plain loop).
//! Safe in place over a full `a` or `b` (each element read before it is written).

use super::Bcast;
use super::fast::Pos;
use crate::gemm::stage16::split::{PAR_MIN_ELEMS, Shared, ew_slots, for_pieces};

/// Elements per piece when the pass is spread over threads.
const PIECE: usize = 1024;

/// An operand of a segment: `at(i)` its `i`-th value.
trait Src: Copy {
    /// # Safety
    /// `i` inside the segment.
    unsafe fn at(self, i: usize) -> u16;
}

#[derive(Clone, Copy)]
struct Run(*const u16);

impl Src for Run {
    #[inline(always)]
    unsafe fn at(self, i: usize) -> u16 {
        // SAFETY: by the contract.
        unsafe { *self.0.add(i) }
    }
}

#[derive(Clone, Copy)]
struct Splat(u16);

impl Src for Splat {
    #[inline(always)]
    unsafe fn at(self, _: usize) -> u16 {
        self.0
    }
}

/// `y[i] = if c[i] != 0 { a.at(i) } else { b.at(i) }` for `i < n` (both read, then
/// selected: a blend the compiler vectorizes).
///
/// # Safety
/// `c` readable and `y` writable for `n`; the operands' runs readable for `n`; `y` equal to
/// a run or overlapping none.
#[inline(always)]
unsafe fn blend<A: Src, B: Src>(c: *const u8, a: A, b: B, n: usize, y: *mut u16) {
    for i in 0..n {
        // SAFETY: `i < n`, by the contract.
        unsafe {
            let (u, v) = (a.at(i), b.at(i));
            *y.add(i) = if *c.add(i) != 0 { u } else { v };
        }
    }
}

/// `y[i] = s.at(i)` for `i < n`.
///
/// # Safety
/// As [`blend`].
#[inline(always)]
unsafe fn copy<A: Src>(s: A, n: usize, y: *mut u16) {
    for i in 0..n {
        // SAFETY: `i < n`, by the contract.
        unsafe { *y.add(i) = s.at(i) };
    }
}

/// One segment of `n` outputs at `y`.
///
/// # Safety
/// As [`blend`]; `pc`, `pa`, `pb` at the segment's start, `n` within their `left()`.
#[inline(always)]
unsafe fn segment(pc: &Pos<u8>, pa: &Pos<u16>, pb: &Pos<u16>, n: usize, y: *mut u16) {
    // SAFETY: the contract passed on; every run holds `n` values from here.
    unsafe {
        let (ra, rb) = (pa.run(), pb.run());
        let Some(c) = pc.run() else {
            // One condition over the segment: a copy of the chosen operand.
            let (p, r) = if pc.value() != 0 { (pa, ra) } else { (pb, rb) };
            return match r {
                Some(r) => copy(Run(r), n, y),
                None => copy(Splat(p.value()), n, y),
            };
        };
        match (ra, rb) {
            (Some(a), Some(b)) => blend(c, Run(a), Run(b), n, y),
            (Some(a), None) => blend(c, Run(a), Splat(pb.value()), n, y),
            (None, Some(b)) => blend(c, Splat(pa.value()), Run(b), n, y),
            (None, None) => blend(c, Splat(pa.value()), Splat(pb.value()), n, y),
        }
    }
}

/// Outputs `e0..e1`.
///
/// # Safety
/// As [`select`].
#[inline(always)]
unsafe fn range(
    c: (*const u8, Bcast),
    a: (*const u16, Bcast),
    b: (*const u16, Bcast),
    e: (usize, usize),
    y: *mut u16,
) {
    // SAFETY: the caller's contract; `segment` as `walk` needs it.
    unsafe { walk(c, a, b, e, y, |pc, pa, pb, n, y| segment(pc, pa, pb, n, y)) }
}

/// Outputs `e0..e1` in segments where no operand's run ends, each written by `seg(c, a, b,
/// len, y)` (inlined into its caller, so a `target_feature` caller's segments get its
/// instructions).
///
/// # Safety
/// As [`select`]; `seg` writes `len` outputs from its operands' positions.
#[inline(always)]
unsafe fn walk(
    c: (*const u8, Bcast),
    a: (*const u16, Bcast),
    b: (*const u16, Bcast),
    (e0, e1): (usize, usize),
    y: *mut u16,
    seg: impl Fn(&Pos<u8>, &Pos<u16>, &Pos<u16>, usize, *mut u16),
) {
    let (mut pc, mut pa, mut pb) = (
        Pos::new(c.0, c.1, e0),
        Pos::new(a.0, a.1, e0),
        Pos::new(b.0, b.1, e0),
    );
    let mut e = e0;
    while e < e1 {
        let len = (e1 - e).min(pc.left()).min(pa.left()).min(pb.left());
        // The segment's runs and outputs lie inside the operands and `y` (the contract).
        seg(&pc, &pa, &pb, len, y.wrapping_add(e));
        pc.advance(len);
        pa.advance(len);
        pb.advance(len);
        e += len;
    }
}

/// [`range`] in AVX-512BW registers: 32 outputs per step, the condition bytes tested into a
/// mask that blends the two operands' 16-bit lanes; a segment's last partial step through
/// masked loads and a masked store.
///
/// # Safety
/// As [`select`]; the CPU has AVX-512F, BW and VL.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn range_avx512(
    c: (*const u8, Bcast),
    a: (*const u16, Bcast),
    b: (*const u16, Bcast),
    e: (usize, usize),
    y: *mut u16,
) {
    // SAFETY: the caller's contract; this function's features are the segment's.
    unsafe {
        walk(c, a, b, e, y, |pc, pa, pb, n, y| {
            segment_avx512(pc, pa, pb, n, y)
        })
    }
}

/// One segment of [`range_avx512`].
///
/// # Safety
/// As [`segment`]; the CPU has AVX-512F, BW and VL.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn segment_avx512(pc: &Pos<u8>, pa: &Pos<u16>, pb: &Pos<u16>, n: usize, y: *mut u16) {
    use std::arch::x86_64::*;
    let (ra, rb) = (pa.run(), pb.run());
    // SAFETY: the contract; every run holds `n` values from here, `y` is writable for `n`
    // (equal to a run or apart from it: `copy` is a memmove).
    unsafe {
        let Some(c) = pc.run() else {
            let (p, r) = if pc.value() != 0 { (pa, ra) } else { (pb, rb) };
            match r {
                Some(r) => std::ptr::copy(r, y, n),
                None => copy(Splat(p.value()), n, y),
            }
            return;
        };
        let splat = |p: &Pos<u16>, r: Option<*const u16>| {
            _mm512_set1_epi16(if r.is_some() { 0 } else { p.value() as i16 })
        };
        let (sa, sb) = (splat(pa, ra), splat(pb, rb));
        let mut i = 0;
        while i + 32 <= n {
            let cv = _mm256_loadu_si256(c.add(i).cast());
            let m = _mm256_test_epi8_mask(cv, cv);
            let va = ra.map_or(sa, |p| _mm512_loadu_si512(p.add(i).cast()));
            let vb = rb.map_or(sb, |p| _mm512_loadu_si512(p.add(i).cast()));
            _mm512_storeu_si512(y.add(i).cast(), _mm512_mask_blend_epi16(m, vb, va));
            i += 32;
        }
        let r = n - i;
        if r > 0 {
            let k: __mmask32 = ((1u64 << r) - 1) as u32;
            let cv = _mm256_maskz_loadu_epi8(k, c.add(i).cast());
            let m = _mm256_test_epi8_mask(cv, cv);
            let va = ra.map_or(sa, |p| _mm512_maskz_loadu_epi16(k, p.add(i).cast()));
            let vb = rb.map_or(sb, |p| _mm512_maskz_loadu_epi16(k, p.add(i).cast()));
            _mm512_mask_storeu_epi16(y.add(i).cast(), k, _mm512_mask_blend_epi16(m, vb, va));
        }
    }
}

/// `y[e] = cond[e] != 0 ? a[e] : b[e]` over `n` outputs, each operand read through its
/// [`Bcast`] (`c` one byte per element), spread over the session's threads in pieces when
/// worth it (any cut gives the same bits: nothing is computed).
///
/// # Safety
/// `c.0` readable for `c.1.count` bytes, `a.0` / `b.0` for their `count` values, `y`
/// writable for `n`; `y` equal to a full `a` or `b` or overlapping no operand.
pub unsafe fn select(
    c: (*const u8, Bcast),
    a: (*const u16, Bcast),
    b: (*const u16, Bcast),
    n: usize,
    y: *mut u16,
) {
    let (cp, ap, bp, ys) = (Shared::of(c.0), Shared::of(a.0), Shared::of(b.0), Shared(y));
    let cost = crate::par::cost::elems_ns(n);
    for_pieces(n, PIECE, ew_slots(n, PAR_MIN_ELEMS), cost, |e0, e1, _| {
        let (c, a, b) = (
            (cp.get().cast_const(), c.1),
            (ap.get().cast_const(), a.1),
            (bp.get().cast_const(), b.1),
        );
        let (r, y) = ((e0, e1), ys.get());
        #[cfg(target_arch = "x86_64")]
        {
            use crate::gemm::stage16::convert::{Isa, isa};
            if isa() == Isa::Avx512
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vl")
            {
                // SAFETY: the CPU has AVX-512F, BW and VL; outputs `e0..e1` are this piece's.
                return unsafe { range_avx512(c, a, b, r, y) };
            }
        }
        // SAFETY: outputs `e0..e1` are this piece's; the contract passed on.
        unsafe { range(c, a, b, r, y) }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::stage16::ew::bcast;
    use crate::par::{Pool, with_pool};

    /// The typed kernel's reading, element by element: numpy broadcasting by index.
    fn reference(
        c: &[u8],
        cb: Bcast,
        a: &[u16],
        ab: Bcast,
        b: &[u16],
        bb: Bcast,
        n: usize,
    ) -> Vec<u16> {
        let at = |bc: Bcast, e: usize| (e / bc.inner.max(1)) % bc.count.max(1);
        (0..n)
            .map(|e| {
                if c[at(cb, e)] != 0 {
                    a[at(ab, e)]
                } else {
                    b[at(bb, e)]
                }
            })
            .collect()
    }

    fn run(c: &[u8], cb: Bcast, a: &[u16], ab: Bcast, b: &[u16], bb: Bcast, n: usize) -> Vec<u16> {
        let mut y = vec![0xdead_u16; n];
        // SAFETY: operands of their `count` values, `y` of `n`, apart.
        unsafe {
            select(
                (c.as_ptr(), cb),
                (a.as_ptr(), ab),
                (b.as_ptr(), bb),
                n,
                y.as_mut_ptr(),
            )
        };
        y
    }

    /// Bits of every kind (NaNs with payloads, infinities, subnormals, signed zeros).
    fn bits(len: usize, s: u32) -> Vec<u16> {
        (0..len as u32)
            .map(|i| (i.wrapping_mul(40503).wrapping_add(s) >> 3) as u16)
            .collect()
    }

    #[test]
    fn select_matches_the_element_by_element_reading() {
        // (cond, a, b, output) shapes: the decoder's mask, odd sizes, per-channel and
        // scalar conditions, broadcast a and b.
        type Shapes<'a> = (&'a [usize], &'a [usize], &'a [usize], &'a [usize]);
        let cases: &[Shapes<'_>] = &[
            (&[64, 64], &[], &[1, 4, 64, 64], &[1, 4, 64, 64]),
            // Large enough to spread (`split::ew_slots`).
            (&[64, 1], &[], &[9, 64, 65], &[9, 64, 65]),
            (&[5, 1], &[7], &[3, 5, 7], &[3, 5, 7]),
            (&[3, 1, 1], &[3, 5, 7], &[1], &[3, 5, 7]),
            (&[], &[3, 5, 7], &[5, 7], &[3, 5, 7]),
            (&[2, 33, 17], &[2, 33, 17], &[2, 33, 17], &[2, 33, 17]),
            (&[1, 9, 1], &[9, 1], &[], &[4, 9, 13]),
        ];
        for &(cs, as_, bs, ys) in cases {
            let n: usize = ys.iter().product();
            let (cb, ab, bb) = (
                bcast(cs, ys).expect("c"),
                bcast(as_, ys).expect("a"),
                bcast(bs, ys).expect("b"),
            );
            let c: Vec<u8> = (0..cb.count)
                .map(|i| [0u8, 1, 0, 7, 0, 0, 255][(i * 5 + i / 3) % 7])
                .collect();
            let (a, b) = (bits(ab.count, 1), bits(bb.count, 99));
            let want = reference(&c, cb, &a, ab, &b, bb, n);
            assert_eq!(
                run(&c, cb, &a, ab, &b, bb, n),
                want,
                "{cs:?} {as_:?} {bs:?}"
            );
            // Spread over an eager 2-thread pool: the same bits.
            let pool = Pool::new(2).expect("threads");
            pool.set_eager(true);
            let before = pool.jobs();
            let two = with_pool(Some(&pool), || run(&c, cb, &a, ab, &b, bb, n));
            assert_eq!(two, want, "2 threads {cs:?}");
            let spread = pool.jobs() > before;
            assert_eq!(
                spread,
                n >= 2 * crate::gemm::stage16::split::PAR_MIN_ELEMS,
                "{n}"
            );
        }
    }

    #[test]
    fn select_in_place_over_a_full_operand() {
        let ys = [3usize, 37];
        let n = 111;
        let cb = bcast(&[37], &ys).expect("c");
        let c: Vec<u8> = (0..37).map(|i| u8::from(i % 3 == 0)).collect();
        let a = bits(1, 5);
        let full = Bcast { inner: 1, count: n };
        let mut b = bits(n, 7);
        let want = reference(&c, cb, &a, Bcast { inner: 1, count: 1 }, &b, full, n);
        let p = b.as_mut_ptr();
        // SAFETY: `y` is the full `b`, which the contract allows.
        unsafe {
            select(
                (c.as_ptr(), cb),
                (a.as_ptr(), Bcast { inner: 1, count: 1 }),
                (p.cast_const(), full),
                n,
                p,
            )
        };
        assert_eq!(b, want);
    }
}
