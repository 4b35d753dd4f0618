//! The register path of [`super::run`] (AVX-512) for a fused linear chain of Add/Sub/Mul/Div
//! and Relu steps over up to [`super::MAX_INPUTS`] inputs (a transformer's residual
//! `bias + x + y`, `Add+Add`), a program [`super::fast`]'s single-step form does not take:
//! each step after the first combines the one before it with an input or a constant, so one
//! running vector carries the chain. 16 lanes at a time, every input widened straight from
//! its 16-bit run (or splat once per run of a broadcast value), the steps in registers, the
//! last narrowed into the output — instead of the chunk path's passes through stack
//! buffers. The same f32 operations in the same order as the chunk path (no contraction; a
//! constant as its f32 value, Relu as `max(x, 0)`, as [`super::fast`]): the same bits.
//!
//! The output is cut as [`super::fast`] cuts it: segments over which every input is a
//! contiguous run or one value, whole vectors, then a last partial one through masked loads
//! and a masked store.

use super::{Arg, Program, Step};
use crate::ops::{BinaryOp, UnaryOp};

/// Most steps a chain takes.
const MAX_CHAIN: usize = 8;

/// One step of a linear chain: `acc = acc op x` (or `x op acc` when `!left`), a Relu of
/// `acc`, or for the first step `x op x2` / a Relu of `x`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Link {
    /// `a op b` (the first step: both inputs or constants).
    First(BinaryOp, Opnd, Opnd),
    /// `acc op x` (`left`) or `x op acc`.
    Next(BinaryOp, Opnd, bool),
    /// `max(acc, 0)`.
    Relu,
    /// `max(x, 0)` (the first step).
    ReluOf(Opnd),
}

/// A step's operand other than the running value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Opnd {
    /// Input `i`.
    Input(usize),
    /// A constant.
    Const(f32),
}

/// A chain [`run_avx512`] runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Chain {
    links: [Link; MAX_CHAIN],
    len: usize,
}

/// The linear chain of `prog`, if it is one: each step Add/Sub/Mul/Div (the only binary
/// steps a [`Program`] has) or a Relu, every step after the first reading the step just
/// before it once and otherwise only inputs and constants, at most [`MAX_CHAIN`] steps.
pub(super) fn chain(prog: &Program) -> Option<Chain> {
    let opnd = |a: Arg| match a {
        Arg::Input(i) => Some(Opnd::Input(i)),
        Arg::Const(c) => Some(Opnd::Const(c)),
        Arg::Step(_) => None,
    };
    let mut c = Chain {
        links: [Link::Relu; MAX_CHAIN],
        len: 0,
    };
    if prog.steps.is_empty() || prog.steps.len() > MAX_CHAIN {
        return None;
    }
    for (k, s) in prog.steps.iter().enumerate() {
        let prev = |a: Arg| k > 0 && a == Arg::Step(k - 1);
        c.links[k] = match *s {
            Step::Binary(op, a, b) if k == 0 => Link::First(op, opnd(a)?, opnd(b)?),
            Step::Binary(op, a, b) if prev(a) => Link::Next(op, opnd(b)?, true),
            Step::Binary(op, a, b) if prev(b) => Link::Next(op, opnd(a)?, false),
            Step::Unary(UnaryOp::Relu, a) if k == 0 => Link::ReluOf(opnd(a)?),
            Step::Unary(UnaryOp::Relu, a) if prev(a) => Link::Relu,
            _ => return None,
        };
    }
    c.len = prog.steps.len();
    Some(c)
}

#[cfg(target_arch = "x86_64")]
pub(super) use x86::run_avx512;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::*;
    use crate::gemm::stage16::N16;
    use crate::gemm::stage16::convert::x86::{load16, narrow16, store16};
    use crate::gemm::stage16::ew::fast::Pos;
    use crate::gemm::stage16::ew::fast::x86::{In, masked};
    use crate::gemm::stage16::ew::{Bcast, MAX_INPUTS};
    use std::arch::x86_64::*;

    /// `a op b`.
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[inline(always)]
    unsafe fn bin(op: BinaryOp, a: __m512, b: __m512) -> __m512 {
        // SAFETY: by the contract.
        unsafe {
            match op {
                BinaryOp::Add => _mm512_add_ps(a, b),
                BinaryOp::Sub => _mm512_sub_ps(a, b),
                BinaryOp::Mul => _mm512_mul_ps(a, b),
                _ => _mm512_div_ps(a, b),
            }
        }
    }

    /// The chain on the input vectors `ins`.
    ///
    /// # Safety
    /// The CPU has AVX-512F; the chain's inputs below [`MAX_INPUTS`].
    #[inline(always)]
    unsafe fn eval(c: &Chain, ins: &[__m512; MAX_INPUTS]) -> __m512 {
        // SAFETY: AVX-512F by the contract.
        unsafe {
            let get = |o: Opnd| match o {
                Opnd::Input(i) => ins[i % MAX_INPUTS],
                Opnd::Const(k) => _mm512_set1_ps(k),
            };
            let mut acc = _mm512_setzero_ps();
            for l in &c.links[..c.len.min(MAX_CHAIN)] {
                acc = match *l {
                    Link::First(op, a, b) => bin(op, get(a), get(b)),
                    Link::Next(op, x, true) => bin(op, acc, get(x)),
                    Link::Next(op, x, false) => bin(op, get(x), acc),
                    Link::Relu => _mm512_max_ps(acc, _mm512_setzero_ps()),
                    Link::ReluOf(x) => _mm512_max_ps(get(x), _mm512_setzero_ps()),
                };
            }
            acc
        }
    }

    /// Vectors a block evaluates each step over (the step's match once per block).
    const BLOCK: usize = 8;

    /// An operand over a block: vectors read from a run, or one vector.
    #[derive(Clone, Copy)]
    enum Val {
        Run(*const u16),
        Splat(__m512),
    }

    /// `o` over the block at lane offset `i`.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `o`'s input below `ins.len()`.
    #[inline(always)]
    unsafe fn val(o: Opnd, ins: &[In], i: usize) -> Val {
        // SAFETY: AVX-512F by the contract; the offset stays inside the run (the caller's
        // block).
        unsafe {
            match o {
                Opnd::Input(j) => match ins.get(j) {
                    Some(In::Run(p)) => Val::Run(p.add(i)),
                    Some(In::Splat(s)) => Val::Splat(*s),
                    None => Val::Splat(_mm512_setzero_ps()),
                },
                Opnd::Const(k) => Val::Splat(_mm512_set1_ps(k)),
            }
        }
    }

    /// Vector `v` of `x`.
    ///
    /// # Safety
    /// The CPU has AVX-512F; a run readable for 16 values at vector `v`.
    #[inline(always)]
    unsafe fn at(t: N16, x: Val, v: usize) -> __m512 {
        match x {
            // SAFETY: by the contract.
            Val::Run(p) => unsafe { load16(t, p.add(16 * v)) },
            Val::Splat(s) => s,
        }
    }

    /// The chain over `B` whole vectors from lane offset `i`, stored into `y + i`: each
    /// step's match taken once for the block, its operations over the block's vectors.
    ///
    /// # Safety
    /// The CPU has AVX-512F; the runs readable and `y` writable for `16 * B` values from
    /// `i` (`y` equal to a run or overlapping none).
    #[inline(always)]
    unsafe fn block<const B: usize>(t: N16, c: &Chain, ins: &[In], i: usize, y: *mut u16) {
        // SAFETY: AVX-512F and the block's lanes by the contract.
        unsafe {
            let mut acc = [_mm512_setzero_ps(); B];
            for l in &c.links[..c.len.min(MAX_CHAIN)] {
                match *l {
                    Link::First(op, a, b) => {
                        let (a, b) = (val(a, ins, i), val(b, ins, i));
                        for (v, r) in acc.iter_mut().enumerate() {
                            *r = bin(op, at(t, a, v), at(t, b, v));
                        }
                    }
                    Link::Next(op, x, left) => {
                        let x = val(x, ins, i);
                        for (v, r) in acc.iter_mut().enumerate() {
                            *r = if left {
                                bin(op, *r, at(t, x, v))
                            } else {
                                bin(op, at(t, x, v), *r)
                            };
                        }
                    }
                    Link::Relu => {
                        for r in acc.iter_mut() {
                            *r = _mm512_max_ps(*r, _mm512_setzero_ps());
                        }
                    }
                    Link::ReluOf(x) => {
                        let x = val(x, ins, i);
                        for (v, r) in acc.iter_mut().enumerate() {
                            *r = _mm512_max_ps(at(t, x, v), _mm512_setzero_ps());
                        }
                    }
                }
            }
            for (v, r) in acc.iter().enumerate() {
                store16(t, *r, y.add(i + 16 * v));
            }
        }
    }

    /// A segment of `n` outputs at `y` over inputs `ins` (`k` of them): blocks of
    /// [`BLOCK`] vectors, single vectors, then the rest masked.
    ///
    /// # Safety
    /// The CPU has AVX-512F, BW and VL; the runs readable and `y` writable for `n` values
    /// (`y` equal to a run or overlapping none); `prog`'s inputs below [`MAX_INPUTS`].
    #[inline(always)]
    unsafe fn segment(t: N16, prog: &Chain, ins: &[In], n: usize, y: *mut u16) {
        let mut i = 0;
        // SAFETY: AVX-512F by the contract; lanes `i..i + 16 * B <= n` of the runs and `y`,
        // then the masked rest.
        unsafe {
            while i + 16 * BLOCK <= n {
                block::<BLOCK>(t, prog, ins, i, y);
                i += 16 * BLOCK;
            }
            while i + 16 <= n {
                block::<1>(t, prog, ins, i, y);
                i += 16;
            }
            let r = n - i;
            if r == 0 {
                return;
            }
            let m: __mmask16 = (1u16 << r) - 1;
            let mut v = [_mm512_setzero_ps(); MAX_INPUTS];
            for (v, &x) in v.iter_mut().zip(ins) {
                *v = masked(t, x, m, i);
            }
            _mm256_mask_storeu_epi16(y.add(i).cast(), m, narrow16(t, eval(prog, &v)));
        }
    }

    /// [`super::super::run`] for the [`chain`] `prog` of a program, in registers.
    ///
    /// # Safety
    /// As [`super::super::run`]; the CPU has AVX-512F, BW and VL; `prog` the chain of the
    /// program whose inputs `xs` are.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(in crate::gemm::stage16::ew) unsafe fn run_avx512(
        t: N16,
        prog: &Chain,
        xs: &[*const u16],
        bc: &[Bcast],
        (e0, n): (usize, usize),
        y: *mut u16,
    ) {
        let k = xs.len().min(bc.len()).min(MAX_INPUTS);
        let mut pos = [Pos::new(std::ptr::null(), Bcast { inner: 1, count: 1 }, 0); MAX_INPUTS];
        for ((p, &x), &b) in pos.iter_mut().zip(xs).zip(bc).take(k) {
            *p = Pos::new(x, b, e0);
        }
        let mut ins = [In::Splat(_mm512_setzero_ps()); MAX_INPUTS];
        let mut e = e0;
        while e < n {
            let len = pos[..k].iter().fold(n - e, |l, p| l.min(p.left()));
            for (x, p) in ins.iter_mut().zip(&pos[..k]) {
                // SAFETY: `x` readable for its `count` values (the contract).
                *x = unsafe { p.input(t) };
            }
            // SAFETY: the segment's runs and outputs are inside the inputs and `y`.
            unsafe { segment(t, prog, &ins[..k], len, y.add(e)) };
            for p in &mut pos[..k] {
                p.advance(len);
            }
            e += len;
        }
    }
}
