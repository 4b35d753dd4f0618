//! One kernel for every statistics-based normalization (BatchNormalization in both modes,
//! LayerNormalization with its Mean/InvStdDev outputs, Instance-, Group-, MeanVariance- and
//! RMSNormalization).
//!
//! X is walked as nested loops: the *outer* levels enumerate the groups of elements that share
//! one mean and variance (the row counter `r` indexes the statistics), the *inner* levels
//! enumerate one group's elements. Each level gives its trip count and the byte step of every
//! pointer: X (Y has X's layout), scale, bias, and the statistics (0 where a pointer does not
//! move, which is how a parameter broadcasts). Per group: a pass for the mean, a pass for the
//! centered squares (two passes: no cancellation), then `y = (x - mean) * inv * scale + bias`
//! with `inv = 1 / sqrt(var + eps)`. An innermost level that is contiguous in X, and in the
//! parameters or broadcast, runs on f32x4 with a scalar tail. The kernel reads each element of
//! a group before it writes it, so Y may be X's buffer.

use super::{Math, for_range, offset};
use cranelift_codegen::ir::types::{F32, F32X4, I64};
use cranelift_codegen::ir::{InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;

/// One loop level: a trip count and the byte step of each pointer per iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Level {
    /// Trip count.
    pub count: usize,
    /// Step of X and Y.
    pub x: usize,
    /// Step of the scale (0: broadcast).
    pub scale: usize,
    /// Step of the bias (0: broadcast).
    pub bias: usize,
    /// Step of the statistics (outer levels only).
    pub stat: usize,
}

/// What the kernel does with per-group statistics.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stats {
    /// Computed, used, not stored.
    None,
    /// Computed and stored: the mean into `s0`, `1 / sqrt(var + eps)` into `s1`
    /// (LayerNormalization's Mean and InvStdDev).
    MeanInvStd,
    /// Computed and blended with the given ones: `s0 = in0 * m + mean * (1 - m)`,
    /// `s1 = in1 * m + var * (1 - m)` (BatchNormalization training mode's running mean and
    /// variance).
    Running(f32),
    /// Not computed: the mean is read from `in0`, the variance from `in1` (inference
    /// BatchNormalization with run-time statistics).
    Given,
}

/// A normalization kernel over `(x, scale, bias, y, s0, s1, in0, in1)` (unused pointers may be
/// null).
#[derive(Clone, Debug, PartialEq)]
pub struct NormDesc {
    /// Levels enumerating the groups (row-major: the last moves fastest).
    pub outer: Vec<Level>,
    /// Levels enumerating one group's elements.
    pub inner: Vec<Level>,
    /// Added to the variance (or, with `eps_after_sqrt`, to the standard deviation).
    pub epsilon: f32,
    /// `inv = 1 / (sqrt(var) + eps)` (MeanVarianceNormalization) instead of
    /// `1 / sqrt(var + eps)`.
    pub eps_after_sqrt: bool,
    /// Subtract the mean; false: the "variance" is the mean square and nothing is subtracted
    /// (RMSNormalization).
    pub center: bool,
    /// A scale is given.
    pub has_scale: bool,
    /// A bias is given.
    pub has_bias: bool,
    /// What happens to the statistics.
    pub stats: Stats,
}

/// The pointers walked together: X, Y, scale, bias, statistics offset.
type Ptrs = [Value; 5];

/// The per-element body of a group walk: `(builder, width, pointers, [scale, bias] splat,
/// vector number)`.
type Leaf<'a> = dyn FnMut(&mut FunctionBuilder<'_>, Math, Ptrs, [bool; 2], usize) + 'a;

/// Vectors per iteration of a contiguous innermost level.
const UNROLL: usize = 4;

fn advance(b: &mut FunctionBuilder<'_>, p: Ptrs, l: &Level, i: Value) -> Ptrs {
    [
        offset(b, p[0], i, l.x),
        offset(b, p[1], i, l.x),
        offset(b, p[2], i, l.scale),
        offset(b, p[3], i, l.bias),
        offset(b, p[4], i, l.stat),
    ]
}

fn advance_by(b: &mut FunctionBuilder<'_>, p: Ptrs, l: &Level, t: usize) -> Ptrs {
    let mut add = |v: Value, step: usize| {
        if step == 0 || t == 0 {
            v
        } else {
            b.ins().iadd_imm_s(v, (step * t) as i64)
        }
    };
    [
        add(p[0], l.x),
        add(p[1], l.x),
        add(p[2], l.scale),
        add(p[3], l.bias),
        add(p[4], l.stat),
    ]
}

/// Nested loops over `levels`, calling `body` with the pointers of each iteration.
fn nest(
    b: &mut FunctionBuilder<'_>,
    levels: &[Level],
    p: Ptrs,
    body: &mut dyn FnMut(&mut FunctionBuilder<'_>, Ptrs),
) {
    match levels.split_first() {
        None => body(b, p),
        Some((l, rest)) => for_range(b, l.count, &mut |b, i| {
            let q = advance(b, p, l, i);
            nest(b, rest, q, body);
        }),
    }
}

/// The element walk of one group: nested loops with the last level on f32x4 where it is
/// contiguous (four vectors per iteration, then single vectors, then scalars).
/// `leaf(b, m, ptrs, splat, u)` handles one element (`m` scalar) or four (`m` vector;
/// `splat[k]` when scale/bias do not move along the level); `u < UNROLL` numbers the vectors
/// of one iteration (independent accumulators for the sums).
fn elements(b: &mut FunctionBuilder<'_>, levels: &[Level], p: Ptrs, leaf: &mut Leaf<'_>) {
    let (sm, vm) = (Math { ty: F32 }, Math { ty: F32X4 });
    let Some((last, rest)) = levels.split_last() else {
        leaf(b, sm, p, [true; 2], 0);
        return;
    };
    let last = *last;
    nest(b, rest, p, &mut |b, q| {
        let vec_ok = last.x == 4 && [0, 4].contains(&last.scale) && [0, 4].contains(&last.bias);
        if !vec_ok {
            for_range(b, last.count, &mut |b, i| {
                let r = advance(b, q, &last, i);
                leaf(b, sm, r, [true; 2], 0);
            });
            return;
        }
        let splat = [last.scale == 0, last.bias == 0];
        let step = |k: usize| Level {
            count: 0,
            x: 4 * k,
            scale: last.scale * k,
            bias: last.bias * k,
            stat: 0,
        };
        let blocks = last.count / (4 * UNROLL);
        for_range(b, blocks, &mut |b, i| {
            let r = advance(b, q, &step(4 * UNROLL), i);
            for u in 0..UNROLL {
                let ru = advance_by(b, r, &step(4), u);
                leaf(b, vm, ru, splat, u);
            }
        });
        let done = blocks * 4 * UNROLL;
        for c in 0..(last.count - done) / 4 {
            let r = advance_by(b, q, &last, done + 4 * c);
            leaf(b, vm, r, splat, c);
        }
        let done = last.count / 4 * 4;
        for t in done..last.count {
            let r = advance_by(b, q, &last, t);
            leaf(b, sm, r, [true; 2], 0);
        }
    });
}

impl NormDesc {
    /// Elements of one group.
    pub fn group_len(&self) -> usize {
        self.inner.iter().map(|l| l.count).product()
    }

    /// Emits the body for `p = (x, scale, bias, y, s0, s1, in0, in1)`.
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, p: &[Value]) {
        let (x, scale, bias, y) = (p[0], p[1], p[2], p[3]);
        let (s0, s1, in0, in1) = (p[4], p[5], p[6], p[7]);
        let sm = Math { ty: F32 };
        let zero_i = b.ins().iconst(I64, 0);
        let start: Ptrs = [x, y, scale, bias, zero_i];
        let n = self.group_len();
        let inv_n = 1.0 / n.max(1) as f32;
        nest(b, &self.outer, start, &mut |b, g| {
            let so = g[4];
            let (mean, var) = if self.stats == Stats::Given {
                let mp = b.ins().iadd(in0, so);
                let vp = b.ins().iadd(in1, so);
                (sm.load(b, mp, 0), sm.load(b, vp, 0))
            } else {
                let mean = if self.center {
                    let s = self.sum(b, g, None);
                    let k = sm.c(b, inv_n);
                    Some(b.ins().fmul(s, k))
                } else {
                    None
                };
                let q = self.sum(b, g, Some(mean));
                let k = sm.c(b, inv_n);
                let var = b.ins().fmul(q, k);
                let mean = match mean {
                    Some(m) => m,
                    None => sm.c(b, 0.0),
                };
                (mean, var)
            };
            let eps = sm.c(b, self.epsilon);
            let one = sm.c(b, 1.0);
            let den = if self.eps_after_sqrt {
                let sd = b.ins().sqrt(var);
                b.ins().fadd(sd, eps)
            } else {
                let ve = b.ins().fadd(var, eps);
                b.ins().sqrt(ve)
            };
            let inv = b.ins().fdiv(one, den);
            match self.stats {
                Stats::None | Stats::Given => {}
                Stats::MeanInvStd => {
                    let mp = b.ins().iadd(s0, so);
                    let ip = b.ins().iadd(s1, so);
                    sm.store(b, mean, mp, 0);
                    sm.store(b, inv, ip, 0);
                }
                Stats::Running(m) => {
                    // Both inputs are read before either output is written (they may share
                    // buffers).
                    let (ip0, ip1) = (b.ins().iadd(in0, so), b.ins().iadd(in1, so));
                    let (r0, r1) = (sm.load(b, ip0, 0), sm.load(b, ip1, 0));
                    let (km, kb) = (sm.c(b, m), sm.c(b, 1.0 - m));
                    let bm = b.ins().fmul(mean, kb);
                    let o0 = b.ins().fma(r0, km, bm);
                    let bv = b.ins().fmul(var, kb);
                    let o1 = b.ins().fma(r1, km, bv);
                    let (op0, op1) = (b.ins().iadd(s0, so), b.ins().iadd(s1, so));
                    sm.store(b, o0, op0, 0);
                    sm.store(b, o1, op1, 0);
                }
            }
            self.write(b, g, mean, inv);
        });
    }

    /// The sum over one group of `x` (`center` None) or of `(x - c)^2` (`center` Some(c),
    /// `c` None meaning 0).
    fn sum(&self, b: &mut FunctionBuilder<'_>, g: Ptrs, center: Option<Option<Value>>) -> Value {
        let (sm, vm) = (Math { ty: F32 }, Math { ty: F32X4 });
        let vacc: Vec<_> = (0..UNROLL).map(|_| b.declare_var(F32X4)).collect();
        let sacc = b.declare_var(F32);
        let vz = vm.c(b, 0.0);
        let sz = sm.c(b, 0.0);
        for &v in &vacc {
            b.def_var(v, vz);
        }
        b.def_var(sacc, sz);
        elements(b, &self.inner, g, &mut |b, m, q, _, u| {
            let mut v = m.load(b, q[0], 0);
            if let Some(c) = center {
                if let Some(c) = c {
                    let c = if m.vector() {
                        b.ins().splat(F32X4, c)
                    } else {
                        c
                    };
                    v = b.ins().fsub(v, c);
                }
                v = b.ins().fmul(v, v);
            }
            let acc = if m.vector() { vacc[u % UNROLL] } else { sacc };
            let a = b.use_var(acc);
            let a = b.ins().fadd(a, v);
            b.def_var(acc, a);
        });
        let (a0, a1) = (b.use_var(vacc[0]), b.use_var(vacc[1]));
        let (a2, a3) = (b.use_var(vacc[2]), b.use_var(vacc[3]));
        let (l, r) = (b.ins().fadd(a0, a1), b.ins().fadd(a2, a3));
        let a = b.ins().fadd(l, r);
        let s = Math::hreduce(b, a, |b, x, y| b.ins().fadd(x, y));
        let t = b.use_var(sacc);
        b.ins().fadd(s, t)
    }

    /// Writes one group: `y = (x - mean) * inv * scale + bias`.
    fn write(&self, b: &mut FunctionBuilder<'_>, g: Ptrs, mean: Value, inv: Value) {
        elements(b, &self.inner, g, &mut |b, m, q, splat, _| {
            let (mean, inv) = if m.vector() {
                (b.ins().splat(F32X4, mean), b.ins().splat(F32X4, inv))
            } else {
                (mean, inv)
            };
            let v = m.load(b, q[0], 0);
            let d = if self.center {
                b.ins().fsub(v, mean)
            } else {
                v
            };
            let mut o = b.ins().fmul(d, inv);
            let param = |b: &mut FunctionBuilder<'_>, ptr: Value, splat: bool| {
                if splat {
                    m.load_splat(b, ptr, 0)
                } else {
                    m.load(b, ptr, 0)
                }
            };
            if self.has_scale {
                let s = param(b, q[2], splat[0]);
                o = b.ins().fmul(o, s);
            }
            if self.has_bias {
                let bb = param(b, q[3], splat[1]);
                o = b.ins().fadd(o, bb);
            }
            m.store(b, o, q[1], 0);
        });
    }
}

/// Merges adjacent levels that walk every pointer as one level would (outer step = inner
/// step * inner count), and drops levels of count 1.
pub fn merge_levels(levels: &[Level]) -> Vec<Level> {
    let mut out: Vec<Level> = Vec::new();
    for &l in levels.iter().filter(|l| l.count != 1) {
        if let Some(prev) = out.last_mut() {
            let fits = |outer: usize, inner: usize| outer == inner * l.count;
            if fits(prev.x, l.x)
                && fits(prev.scale, l.scale)
                && fits(prev.bias, l.bias)
                && fits(prev.stat, l.stat)
            {
                *prev = Level {
                    count: prev.count * l.count,
                    ..l
                };
                continue;
            }
        }
        out.push(l);
    }
    out
}
