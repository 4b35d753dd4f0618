//! The register path of [`super::run`] (AVX-512) for one Add/Sub/Mul/Div of two inputs,
//! optionally followed by a Relu (the native binary nodes, fused `Add+Relu`): 16 lanes at a
//! time in one pass — each input widened straight from its 16-bit run, or splat once per run
//! of a broadcast value, the result narrowed into the output — instead of the chunk path's
//! passes through stack buffers. The same f32 operations as the chunk path (no contraction;
//! Relu as `max(x, 0)`, as [`crate::gemm::act`]'s vectors): the same bits.
//!
//! The output is cut into segments over which each input is either a contiguous run (a
//! full or periodic input: up to its wrap) or one value (a scalar, or a broadcast input's
//! element over its `inner` run), the positions kept as counters (no division per
//! segment); each segment runs whole vectors, then a last partial one through masked 16-bit
//! loads and stores (AVX-512BW/VL).

use super::{Arg, Bcast, Program, Step};
use crate::gemm::stage16::N16;
use crate::ops::{BinaryOp, UnaryOp};

/// The form [`run_avx512`] takes: `op(input a, input b)`, then a Relu when `relu`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Form {
    op: BinaryOp,
    a: usize,
    b: usize,
    relu: bool,
}

/// The register form of `prog`, if it has one: a binary step on two inputs, alone or
/// followed by a Relu of it.
pub(super) fn form(prog: &Program) -> Option<Form> {
    let (op, a, b, relu) = match prog.steps[..] {
        [Step::Binary(op, Arg::Input(a), Arg::Input(b))] => (op, a, b, false),
        [
            Step::Binary(op, Arg::Input(a), Arg::Input(b)),
            Step::Unary(UnaryOp::Relu, Arg::Step(0)),
        ] => (op, a, b, true),
        _ => return None,
    };
    Some(Form { op, a, b, relu })
}

#[cfg(target_arch = "x86_64")]
pub(super) use x86::run_avx512;
#[cfg(all(test, target_arch = "x86_64"))]
pub(super) use x86::run_avx512_with;

/// An operand's position in a broadcast pass: element `i` of its `count`, `off` outputs into
/// its run of `inner` (any element type: the 16-bit values here, the condition bytes of
/// [`super::select`]).
#[derive(Clone, Copy)]
pub(in crate::gemm::stage16::ew) struct Pos<T> {
    x: *const T,
    inner: usize,
    count: usize,
    i: usize,
    off: usize,
}

impl<T: Copy> Pos<T> {
    /// The position of output `e`.
    pub(in crate::gemm::stage16::ew) fn new(x: *const T, b: Bcast, e: usize) -> Pos<T> {
        let (inner, count) = (b.inner.max(1), b.count.max(1));
        Pos {
            x,
            inner,
            count,
            i: (e / inner) % count,
            off: e % inner,
        }
    }

    /// Outputs left before this operand changes form (a run's wrap, a value's end).
    pub(in crate::gemm::stage16::ew) fn left(&self) -> usize {
        if self.count == 1 {
            usize::MAX
        } else if self.inner == 1 {
            self.count - self.i
        } else {
            self.inner - self.off
        }
    }

    /// Moves `len` outputs on (`len <= self.left()`).
    pub(in crate::gemm::stage16::ew) fn advance(&mut self, len: usize) {
        if self.count == 1 {
            return;
        }
        if self.inner == 1 {
            self.i += len;
        } else {
            self.off += len;
            if self.off == self.inner {
                self.off = 0;
                self.i += 1;
            }
        }
        if self.i == self.count {
            self.i = 0;
        }
    }

    /// A contiguous run from here (`Some`), or the one value over the segment (`None`).
    pub(in crate::gemm::stage16::ew) fn run(&self) -> Option<*const T> {
        // SAFETY (of the caller's reads): `i < count`.
        let p = self.x.wrapping_add(self.i);
        (self.inner == 1 && self.count > 1).then_some(p)
    }

    /// The value here.
    ///
    /// # Safety
    /// `x` readable for `count` values.
    pub(in crate::gemm::stage16::ew) unsafe fn value(&self) -> T {
        // SAFETY: `i < count`.
        unsafe { *self.x.add(self.i) }
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) mod x86 {
    use super::*;
    use crate::gemm::stage16::convert::x86::{load16, narrow16n, store16n, widen16};
    use std::arch::x86_64::*;

    /// An input over a segment.
    #[derive(Clone, Copy)]
    pub(in crate::gemm::stage16::ew) enum In {
        /// Contiguous 16-bit values from here.
        Run(*const u16),
        /// One widened value.
        Splat(__m512),
    }

    impl Pos<u16> {
        /// The input over the segment starting here.
        ///
        /// # Safety
        /// The CPU has AVX-512F; `x` readable for `count` values.
        #[inline(always)]
        pub(in crate::gemm::stage16::ew) unsafe fn input(&self, t: N16) -> In {
            match self.run() {
                Some(p) => In::Run(p),
                // SAFETY: `i < count`; by the contract.
                None => In::Splat(unsafe { splat(t, self.x.add(self.i)) }),
            }
        }
    }

    /// One value at `p`, widened (the vector conversion's bits) into all lanes.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `p` readable for one value.
    #[inline(always)]
    unsafe fn splat(t: N16, p: *const u16) -> __m512 {
        // SAFETY: by the contract.
        unsafe { widen16(t, _mm256_set1_epi16(*p as i16)) }
    }

    /// `a op b`, then `max(., 0)` when `relu`.
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[inline(always)]
    unsafe fn apply(f: Form, a: __m512, b: __m512) -> __m512 {
        // SAFETY: by the contract.
        unsafe {
            let v = match f.op {
                BinaryOp::Add => _mm512_add_ps(a, b),
                BinaryOp::Sub => _mm512_sub_ps(a, b),
                BinaryOp::Mul => _mm512_mul_ps(a, b),
                _ => _mm512_div_ps(a, b),
            };
            if f.relu {
                _mm512_max_ps(v, _mm512_setzero_ps())
            } else {
                v
            }
        }
    }

    /// Whole vectors of a segment of `n` outputs at `y`; returns how many were done.
    ///
    /// # Safety
    /// The CPU has AVX-512F; runs readable and `y` writable for `n` values (`y` equal to a
    /// run or overlapping none).
    #[inline(always)]
    unsafe fn vectors<const NE: bool>(
        t: N16,
        f: Form,
        a: In,
        b: In,
        n: usize,
        y: *mut u16,
    ) -> usize {
        let mut i = 0;
        // SAFETY: lanes `i..i + 16 <= n` of the runs and `y`.
        unsafe {
            match (a, b) {
                (In::Run(p), In::Run(q)) => {
                    while i + 16 <= n {
                        store16n::<NE>(
                            t,
                            apply(f, load16(t, p.add(i)), load16(t, q.add(i))),
                            y.add(i),
                        );
                        i += 16;
                    }
                }
                (In::Run(p), In::Splat(v)) => {
                    while i + 16 <= n {
                        store16n::<NE>(t, apply(f, load16(t, p.add(i)), v), y.add(i));
                        i += 16;
                    }
                }
                (In::Splat(u), In::Run(q)) => {
                    while i + 16 <= n {
                        store16n::<NE>(t, apply(f, u, load16(t, q.add(i))), y.add(i));
                        i += 16;
                    }
                }
                (In::Splat(u), In::Splat(v)) => {
                    let r = apply(f, u, v);
                    while i + 16 <= n {
                        store16n::<NE>(t, r, y.add(i));
                        i += 16;
                    }
                }
            }
        }
        i
    }

    /// A segment of `n` outputs at `y`: whole vectors, then the rest masked.
    ///
    /// # Safety
    /// As [`vectors`]; the CPU has AVX-512BW and VL.
    #[inline(always)]
    unsafe fn segment<const NE: bool>(t: N16, f: Form, a: In, b: In, n: usize, y: *mut u16) {
        // SAFETY: the contract passed on.
        let i = unsafe { vectors::<NE>(t, f, a, b, n, y) };
        let r = n - i;
        if r == 0 {
            return;
        }
        // The last partial vector through masked 16-bit loads and a masked store.
        let m: __mmask16 = (1u16 << r) - 1;
        // SAFETY: lanes `i..i + r` of the runs and `y` (the others masked off).
        unsafe {
            let v = apply(f, masked(t, a, m, i), masked(t, b, m, i));
            _mm256_mask_storeu_epi16(y.add(i).cast(), m, narrow16n::<NE>(t, v));
        }
    }

    /// Input `x` at lane offset `at`, the lanes outside `m` read as zero bits.
    ///
    /// # Safety
    /// The CPU has AVX-512F, BW and VL; a run readable for the lanes of `m` from `at`.
    #[inline(always)]
    pub(in crate::gemm::stage16::ew) unsafe fn masked(
        t: N16,
        x: In,
        m: __mmask16,
        at: usize,
    ) -> __m512 {
        match x {
            // SAFETY: by the contract.
            In::Run(p) => unsafe { widen16(t, _mm256_maskz_loadu_epi16(m, p.add(at).cast())) },
            In::Splat(v) => v,
        }
    }

    /// [`super::super::run`] for a program of [`form`] `f`, in registers (bf16 rounded by
    /// AVX512_BF16 where the CPU has it: [`crate::gemm::stage16::convert::bf16_ne`]).
    ///
    /// # Safety
    /// As [`super::super::run`] (inputs `f.a` and `f.b` in `xs` and `bc`); the CPU has
    /// AVX-512F, BW and VL.
    pub(in crate::gemm::stage16::ew) unsafe fn run_avx512(
        t: N16,
        f: Form,
        xs: &[*const u16],
        bc: &[Bcast],
        range: (usize, usize),
        y: *mut u16,
    ) {
        let ne = t == N16::Bf16 && crate::gemm::stage16::convert::bf16_ne();
        // SAFETY: the contract passed on; `ne` only where the CPU has the bf16 features.
        unsafe { run_avx512_with(ne, t, f, xs, bc, range, y) }
    }

    /// [`run_avx512`] with the bf16 rounding chosen: `ne`, AVX512_BF16's (the same bits).
    ///
    /// # Safety
    /// As [`run_avx512`]; with `ne`, [`crate::gemm::stage16::convert::bf16_ne`] holds.
    pub(in crate::gemm::stage16::ew) unsafe fn run_avx512_with(
        ne: bool,
        t: N16,
        f: Form,
        xs: &[*const u16],
        bc: &[Bcast],
        range: (usize, usize),
        y: *mut u16,
    ) {
        // SAFETY: the contract passed on.
        unsafe {
            if ne {
                run_ne(t, f, xs, bc, range, y)
            } else {
                run_plain(t, f, xs, bc, range, y)
            }
        }
    }

    /// [`run_body`] compiled for AVX-512F, BW and VL.
    ///
    /// # Safety
    /// As [`run_avx512`].
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn run_plain(
        t: N16,
        f: Form,
        xs: &[*const u16],
        bc: &[Bcast],
        range: (usize, usize),
        y: *mut u16,
    ) {
        // SAFETY: the contract passed on.
        unsafe { run_body::<false>(t, f, xs, bc, range, y) }
    }

    /// [`run_body`] compiled with AVX512_BF16 and DQ too, bf16 rounded by `vcvtneps2bf16`.
    ///
    /// # Safety
    /// As [`run_avx512_with`] with `ne`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")]
    unsafe fn run_ne(
        t: N16,
        f: Form,
        xs: &[*const u16],
        bc: &[Bcast],
        range: (usize, usize),
        y: *mut u16,
    ) {
        // SAFETY: the contract passed on.
        unsafe { run_body::<true>(t, f, xs, bc, range, y) }
    }

    /// The segments of outputs `e0..n`.
    ///
    /// # Safety
    /// As [`run_avx512_with`] (`NE` for `ne`); inlined into a caller with the features.
    #[inline(always)]
    unsafe fn run_body<const NE: bool>(
        t: N16,
        f: Form,
        xs: &[*const u16],
        bc: &[Bcast],
        (e0, n): (usize, usize),
        y: *mut u16,
    ) {
        let (Some(&xa), Some(&xb), Some(&ba), Some(&bb)) =
            (xs.get(f.a), xs.get(f.b), bc.get(f.a), bc.get(f.b))
        else {
            return;
        };
        let (mut pa, mut pb) = (Pos::new(xa, ba, e0), Pos::new(xb, bb, e0));
        let mut e = e0;
        while e < n {
            let len = (n - e).min(pa.left()).min(pb.left());
            // SAFETY: the segment's runs and outputs are inside the inputs and `y`.
            unsafe { segment::<NE>(t, f, pa.input(t), pb.input(t), len, y.add(e)) };
            pa.advance(len);
            pb.advance(len);
            e += len;
        }
    }
}
