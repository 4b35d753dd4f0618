//! Element-wise programs on 16-bit data: a one-step Add/Sub/Mul/Div (the native binary ops,
//! broadcasting) or a fused program (SiLU), computed in f32 a chunk at a time (one
//! Add/Sub/Mul/Div, alone or before a Relu, on AVX-512: in registers, one pass, [`fast`]; a
//! longer chain of those steps over up to four inputs: [`chain`]). Each input is
//! widened into a stack buffer (whole runs through [`super::widen`]'s vector loops; a
//! broadcast input's value repeated), the steps run as plain slice loops the compiler
//! vectorizes, and the last step is rounded once into the output. Safe in place: a chunk of
//! every input is read before the chunk of the output is written.
//!
//! The same chunk loop runs f32 data ([`F32`]: copies instead of conversions) for the f32
//! programs whose transcendental steps the JIT's 4-lane vectors compute slowly ([`native_f32`]:
//! GELU's `Erf`, `Sigmoid`, `Tanh`), on 8 lanes (AVX2) or 16 (AVX-512F).

use super::split::Shared;
use super::{N16, narrow, widen};
use crate::ops::{BinaryOp, FusedArg, FusedStep, Op, UnaryOp};

/// Elements per chunk.
const CHUNK: usize = 512;

/// Most inputs a program may read.
pub const MAX_INPUTS: usize = 4;

/// Most steps a program may have (each a chunk buffer on the stack).
pub const MAX_STEPS: usize = 16;

/// How a program's data is stored: read into f32 chunks, the result written back.
pub trait Store: Copy + Send + Sync {
    /// The stored element.
    type E: Copy;
    /// Fewest elements per thread before [`run`] spreads a pass (0: the cost model alone
    /// decides).
    const MIN_PER_THREAD: usize = 0;
    /// `dst = src` as f32.
    fn read(self, src: &[Self::E], dst: &mut [f32]);
    /// `dst = src` stored (rounded once).
    fn write(self, src: &[f32], dst: &mut [Self::E]);
    /// Runs outputs `range` of `prog` by a faster path of this type's own, if it has one
    /// (`false`: not taken, nothing written).
    ///
    /// # Safety
    /// As [`run`].
    unsafe fn fast(
        self,
        _prog: &Program,
        _xs: &[*const Self::E],
        _bc: &[Bcast],
        _range: (usize, usize),
        _y: *mut Self::E,
    ) -> bool {
        false
    }
}

impl Store for N16 {
    type E = u16;
    const MIN_PER_THREAD: usize = super::split::PAR_MIN_ELEMS;
    fn read(self, src: &[u16], dst: &mut [f32]) {
        widen(self, src, dst);
    }
    fn write(self, src: &[f32], dst: &mut [u16]) {
        narrow(self, src, dst);
    }
    unsafe fn fast(
        self,
        prog: &Program,
        xs: &[*const u16],
        bc: &[Bcast],
        range: (usize, usize),
        y: *mut u16,
    ) -> bool {
        #[cfg(target_arch = "x86_64")]
        if super::convert::isa() == super::convert::Isa::Avx512
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vl")
        {
            if let Some(f) = fast::form(prog) {
                // SAFETY: the CPU has AVX-512F (`isa`), BW and VL; the contract passed on.
                unsafe { fast::run_avx512(self, f, xs, bc, range, y) };
                return true;
            }
            if let Some(c) = chain::chain(prog) {
                // SAFETY: as above; `c` the chain of `prog`.
                unsafe { chain::run_avx512(self, &c, xs, bc, range, y) };
                return true;
            }
        }
        false
    }
}

/// f32 data: the chunks are copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct F32;

impl Store for F32 {
    type E = f32;
    fn read(self, src: &[f32], dst: &mut [f32]) {
        dst.copy_from_slice(src);
    }
    fn write(self, src: &[f32], dst: &mut [f32]) {
        dst.copy_from_slice(src);
    }
}

/// Whether f32 program `prog` runs faster here than in the JIT's f32x4 kernels: it has a
/// step the JIT computes with a long 4-lane sequence (`Erf`: a division and an exp;
/// `Sigmoid`, `Tanh`: an exp and a division) and every step has a vector loop here (no step
/// falls back to per-element f64 math).
pub fn native_f32(prog: &Program) -> bool {
    let unary = prog.steps.iter().filter_map(|s| match s {
        Step::Unary(u, _) => Some(u),
        Step::Binary(..) | Step::Powi(..) => None,
    });
    let vector = |u: &UnaryOp| {
        matches!(
            u,
            UnaryOp::Relu
                | UnaryOp::LeakyRelu { .. }
                | UnaryOp::Sigmoid
                | UnaryOp::Tanh
                | UnaryOp::HardSigmoid { .. }
                | UnaryOp::HardSwish
                | UnaryOp::Erf
                | UnaryOp::Gelu { .. }
                | UnaryOp::Sqrt
        )
    };
    let slow_in_jit = |u: &UnaryOp| {
        matches!(
            u,
            UnaryOp::Erf | UnaryOp::Sigmoid | UnaryOp::Tanh | UnaryOp::Gelu { .. }
        )
    };
    unary.clone().all(vector) && unary.clone().any(slow_in_jit)
}

/// How an input broadcasts against the output: output element `e` reads the input's element
/// `(e / inner) % count` (a full input: `inner = 1`, `count` = the output's size; a scalar:
/// `count = 1`; per channel of an NCHW tensor: `inner = H*W`, `count = C`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bcast {
    /// Output elements per input element along the run.
    pub inner: usize,
    /// Input elements (the period of the index).
    pub count: usize,
}

/// The [`Bcast`] of an input of shape `x` read by an output of shape `y` (numpy
/// broadcasting), when its non-1 dims (right-aligned) are one contiguous block of `y`'s dims;
/// `None` otherwise (or when `x` has more dims than `y`, or a dim neither 1 nor `y`'s).
pub fn bcast(x: &[usize], y: &[usize]) -> Option<Bcast> {
    let lead = y.len().checked_sub(x.len())?;
    let xd = |d: usize| if d < lead { 1 } else { x[d - lead] };
    let mut kept: Vec<usize> = Vec::new();
    for (d, &yd) in y.iter().enumerate() {
        let v = xd(d);
        if v != 1 && v != yd {
            return None;
        }
        if v == yd && yd != 1 {
            kept.push(d);
        }
    }
    let (Some(&a), Some(&b)) = (kept.first(), kept.last()) else {
        return Some(Bcast { inner: 1, count: 1 });
    };
    // Every dim of y between a and b that is not 1 must be kept (no broadcast gap).
    if (a..=b).any(|d| y[d] != 1 && xd(d) != y[d]) {
        return None;
    }
    Some(Bcast {
        inner: y[b + 1..].iter().product(),
        count: y[a..=b].iter().product(),
    })
}

/// One step's argument, resolved at compile time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg {
    /// Input `i`'s chunk.
    Input(usize),
    /// An earlier step's chunk.
    Step(usize),
    /// A scalar constant (as f32).
    Const(f32),
}

/// One step of a compiled program.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Step {
    /// A one-input activation ([`crate::ops::stage16::unary_f32`]).
    Unary(UnaryOp, Arg),
    /// `a op b` for Add, Sub, Mul or Div.
    Binary(BinaryOp, Arg, Arg),
    /// `a` to a small whole power ([`POWI`]: `Pow(x, 3.0)` of the tanh form of GELU), by
    /// repeated products `((a * a) * a)...`.
    Powi(Arg, u8),
}

/// The whole exponents a [`Step::Powi`] takes.
pub const POWI: std::ops::RangeInclusive<u8> = 2..=4;

/// A program [`run`] executes: its steps, the last one the output.
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    /// The steps in order.
    pub steps: Vec<Step>,
}

impl Program {
    /// The program of an Add/Sub/Mul/Div node or of a fused node's `steps` reading `inputs`
    /// inputs; `None` when a step is of another op, an argument is not an input below
    /// `inputs`, an earlier step or a float scalar constant, or the sizes exceed
    /// [`MAX_STEPS`] / [`MAX_INPUTS`].
    pub fn of(op: &Op, inputs: usize) -> Option<Program> {
        if inputs == 0 || inputs > MAX_INPUTS {
            return None;
        }
        let steps = match op {
            Op::Binary(b) if inputs == 2 => {
                vec![Step::Binary(binary_kind(*b)?, Arg::Input(0), Arg::Input(1))]
            }
            Op::FusedElementwise(f) => fused(&f.steps, inputs)?,
            _ => return None,
        };
        (!steps.is_empty() && steps.len() <= MAX_STEPS).then_some(Program { steps })
    }
}

fn binary_kind(b: BinaryOp) -> Option<BinaryOp> {
    matches!(
        b,
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div
    )
    .then_some(b)
}

fn fused(steps: &[FusedStep], inputs: usize) -> Option<Vec<Step>> {
    steps
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let arg = |i: usize| -> Option<Arg> {
                match s.args.get(i)? {
                    FusedArg::Input(j) => (*j < inputs).then_some(Arg::Input(*j)),
                    FusedArg::Step(j) => (*j < k).then_some(Arg::Step(*j)),
                    FusedArg::Const(t) if t.numel() == 1 && t.dtype().is_float() => {
                        Some(Arg::Const(t.to_f64_vec().first().copied()? as f32))
                    }
                    FusedArg::Const(_) => None,
                }
            };
            match &s.op {
                Op::Unary(u) if crate::analysis::act_type::unary16(u) && s.args.len() == 1 => {
                    Some(Step::Unary(*u, arg(0)?))
                }
                Op::Binary(BinaryOp::Pow) if s.args.len() == 2 => match arg(1)? {
                    Arg::Const(k) if k == f32::from(k as u8) && POWI.contains(&(k as u8)) => {
                        Some(Step::Powi(arg(0)?, k as u8))
                    }
                    _ => None,
                },
                Op::Binary(b) if s.args.len() == 2 => {
                    Some(Step::Binary(binary_kind(*b)?, arg(0)?, arg(1)?))
                }
                _ => None,
            }
        })
        .collect()
}

/// Fills `dst` (output elements `at..at + dst.len()`) with input `x` read through `b`
/// (`vals`: room for the widened values of a broadcast input's rows).
///
/// # Safety
/// `x` readable for `b.count` values.
#[inline(always)]
unsafe fn fill<S: Store>(
    t: S,
    x: *const S::E,
    b: Bcast,
    at: usize,
    dst: &mut [f32],
    vals: &mut [f32; CHUNK + 1],
) {
    let (inner, count) = (b.inner.max(1), b.count.max(1));
    if count == 1 {
        // One value for the whole chunk (a scalar operand): widened once, not per element.
        let mut v = [0f32; 1];
        // SAFETY: `x` holds `count` = 1 value.
        t.read(unsafe { std::slice::from_raw_parts(x, 1) }, &mut v);
        dst.fill(v[0]);
        return;
    }
    let mut e = 0;
    while e < dst.len() {
        let g = at + e;
        let i = (g / inner) % count;
        if inner == 1 {
            let run = (dst.len() - e).min(count - i);
            // SAFETY: `i + run <= count`.
            let src = unsafe { std::slice::from_raw_parts(x.add(i), run) };
            t.read(src, &mut dst[e..e + run]);
            e += run;
        } else {
            // The input elements of the chunk's rows, widened at once (pieces that do not
            // wrap), then each repeated over its run.
            let (r0, r1) = (g / inner, (at + dst.len() - 1) / inner + 1);
            let mut r = r0;
            while r < r1 {
                let i = r % count;
                let k = (r1 - r).min(count - i).min(vals.len() - (r - r0));
                if k == 0 {
                    break;
                }
                // SAFETY: `i + k <= count`.
                let src = unsafe { std::slice::from_raw_parts(x.add(i), k) };
                t.read(src, &mut vals[r - r0..r - r0 + k]);
                r += k;
            }
            while e < dst.len() {
                let g = at + e;
                let run = (dst.len() - e).min(inner - g % inner);
                dst[e..e + run].fill(vals[(g / inner - r0).min(CHUNK)]);
                e += run;
            }
        }
    }
}

/// A resolved argument: a chunk or a scalar.
#[derive(Clone, Copy)]
enum Src<'a> {
    Slice(&'a [f32]),
    Scalar(f32),
}

#[inline(always)]
fn apply(out: &mut [f32], a: Src<'_>, b: Src<'_>, f: impl Fn(f32, f32) -> f32) {
    match (a, b) {
        (Src::Slice(a), Src::Slice(b)) => {
            for ((o, &a), &b) in out.iter_mut().zip(a).zip(b) {
                *o = f(a, b);
            }
        }
        (Src::Slice(a), Src::Scalar(b)) => {
            for (o, &a) in out.iter_mut().zip(a) {
                *o = f(a, b);
            }
        }
        (Src::Scalar(a), Src::Slice(b)) => {
            for (o, &b) in out.iter_mut().zip(b) {
                *o = f(a, b);
            }
        }
        (Src::Scalar(a), Src::Scalar(b)) => out.fill(f(a, b)),
    }
}

/// Runs `prog` over `n` output values `y`, input `i` at `xs[i]` read through `bc[i]`
/// (`y` may equal an input whose [`Bcast`] is full).
///
/// # Safety
/// `xs[i]` readable for `bc[i].count` values of `t`, `y` writable for `n`; `y` equal to a
/// full input or overlapping no input; `xs.len() == bc.len() <= MAX_INPUTS`.
pub unsafe fn run<S: Store>(
    t: S,
    prog: &Program,
    xs: &[*const S::E],
    bc: &[Bcast],
    n: usize,
    y: *mut S::E,
) {
    let k = xs.len().min(MAX_INPUTS);
    let mut shared = [Shared(std::ptr::null_mut()); MAX_INPUTS];
    for (s, &x) in shared.iter_mut().zip(xs) {
        *s = Shared::of(x);
    }
    let ys = Shared(y);
    let cost = crate::par::cost::elems_ns(n.saturating_mul(prog.steps.len().max(1)));
    // Pieces of whole chunks: every element computed as in one pass (the same bits); 16-bit
    // passes not spread below the f32 kernels' size.
    let slots = super::split::ew_slots(n, S::MIN_PER_THREAD);
    super::split::for_pieces(n, CHUNK, slots, cost, |e0, e1, _| {
        let mut xs = [std::ptr::null::<S::E>(); MAX_INPUTS];
        for (x, s) in xs.iter_mut().zip(&shared) {
            *x = s.get().cast_const();
        }
        // SAFETY: outputs `e0..e1` are this piece's alone (an input equal to `y` is read
        // only there); the contract passed on.
        unsafe { run_range(t, prog, &xs[..k], bc, (e0, e1), ys.get()) };
    });
}

/// [`run`] of outputs `e0..e1` on this thread.
///
/// # Safety
/// As [`run`].
unsafe fn run_range<S: Store>(
    t: S,
    prog: &Program,
    xs: &[*const S::E],
    bc: &[Bcast],
    (e0, n): (usize, usize),
    y: *mut S::E,
) {
    // SAFETY: the contract passed on.
    if unsafe { t.fast(prog, xs, bc, (e0, n), y) } {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if super::convert::isa() == super::convert::Isa::Avx512 {
        // SAFETY: the CPU has AVX-512F (`isa`); the contract passed on.
        return unsafe { run_avx512(t, prog, xs, bc, (e0, n), y) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked above); the contract passed on.
        return unsafe { run_avx2(t, prog, xs, bc, (e0, n), y) };
    }
    // SAFETY: the contract passed on.
    unsafe { run_chunks(t, prog, xs, bc, (e0, n), y) }
}

/// [`run_chunks`] compiled for AVX2: the steps' slice loops in 8-lane vectors (the same
/// operations, no contraction: the same bits).
///
/// # Safety
/// As [`run`]; the CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn run_avx2<S: Store>(
    t: S,
    prog: &Program,
    xs: &[*const S::E],
    bc: &[Bcast],
    range: (usize, usize),
    y: *mut S::E,
) {
    // SAFETY: the contract passed on.
    unsafe { run_chunks(t, prog, xs, bc, range, y) }
}

/// [`run_chunks`] compiled for AVX-512F: 16-lane vectors (the same operations, no
/// contraction: the same bits).
///
/// # Safety
/// As [`run`]; the CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn run_avx512<S: Store>(
    t: S,
    prog: &Program,
    xs: &[*const S::E],
    bc: &[Bcast],
    range: (usize, usize),
    y: *mut S::E,
) {
    // SAFETY: the contract passed on.
    unsafe { run_chunks(t, prog, xs, bc, range, y) }
}

/// The body of [`run_range`]: outputs `e0..n`.
///
/// # Safety
/// As [`run`].
#[inline(always)]
unsafe fn run_chunks<S: Store>(
    t: S,
    prog: &Program,
    xs: &[*const S::E],
    bc: &[Bcast],
    (e0, n): (usize, usize),
    y: *mut S::E,
) {
    let mut vals = [0f32; CHUNK + 1];
    let mut ins = [[0f32; CHUNK]; MAX_INPUTS];
    let mut bufs = [[0f32; CHUNK]; MAX_STEPS];
    let mut at = e0;
    while at < n {
        let len = CHUNK.min(n - at);
        for ((&x, &b), buf) in xs.iter().zip(bc).zip(ins.iter_mut()) {
            // SAFETY: by the contract.
            unsafe { fill(t, x, b, at, &mut buf[..len], &mut vals) };
        }
        for (k, s) in prog.steps.iter().enumerate() {
            let (done, rest) = bufs.split_at_mut(k);
            let Some(out) = rest.first_mut() else {
                return;
            };
            let out = &mut out[..len];
            let src = |a: Arg| match a {
                Arg::Input(i) => Src::Slice(ins.get(i).map_or(&[][..], |b| &b[..len])),
                Arg::Step(j) => Src::Slice(done.get(j).map_or(&[][..], |b| &b[..len])),
                Arg::Const(c) => Src::Scalar(c),
            };
            match *s {
                Step::Unary(u, a) => {
                    match src(a) {
                        Src::Slice(v) => out.copy_from_slice(&v[..len.min(v.len())]),
                        Src::Scalar(c) => out.fill(c),
                    }
                    crate::ops::stage16::unary_f32(u, out);
                }
                Step::Powi(a, k) => {
                    let base = src(a);
                    match base {
                        Src::Slice(v) => out.copy_from_slice(&v[..len.min(v.len())]),
                        Src::Scalar(c) => out.fill(c),
                    }
                    for _ in 1..k {
                        match base {
                            Src::Slice(v) => out.iter_mut().zip(v).for_each(|(o, &e)| *o *= e),
                            Src::Scalar(c) => out.iter_mut().for_each(|o| *o *= c),
                        }
                    }
                }
                Step::Binary(op, a, b) => {
                    let (a, b) = (src(a), src(b));
                    match op {
                        BinaryOp::Add => apply(out, a, b, |a, b| a + b),
                        BinaryOp::Sub => apply(out, a, b, |a, b| a - b),
                        BinaryOp::Mul => apply(out, a, b, |a, b| a * b),
                        _ => apply(out, a, b, |a, b| a / b),
                    }
                }
            }
        }
        let last = bufs
            .get(prog.steps.len().wrapping_sub(1))
            .map_or(&[][..], |b| &b[..len]);
        // SAFETY: inside `y`; the chunk of every input was read above.
        let dst = unsafe { std::slice::from_raw_parts_mut(y.add(at), len) };
        t.write(last, dst);
        at += len;
    }
}

mod chain;
mod fast;
pub mod select;

#[cfg(test)]
mod chain_tests;
#[cfg(test)]
mod tests;
