//! Softmax / LogSoftmax over lines of `len` elements `inner` apart: for each line, the max,
//! the sum of `exp(x - max)`, then a scale (or `x - max - ln(sum)`). Contiguous lines
//! (`inner == 1`) run over f32x4 chunks with horizontal reductions; strided lines run four
//! adjacent lines at once in the lanes.

use cranelift_codegen::ir::types::{F32, F32X4};
use cranelift_codegen::ir::{FuncRef, InstBuilder, Value};
use cranelift_frontend::{FunctionBuilder, Variable};

use super::{Math, for_range, offset};

/// One Softmax kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SoftmaxDesc {
    /// Number of line groups before the axis.
    pub outer: usize,
    /// Elements per line.
    pub len: usize,
    /// Distance between consecutive elements of a line (elements after the axis).
    pub inner: usize,
    /// LogSoftmax.
    pub log: bool,
}

fn fmax(b: &mut FunctionBuilder<'_>, x: Value, y: Value) -> Value {
    Math { ty: F32 }.max(b, x, y)
}

fn fadd(b: &mut FunctionBuilder<'_>, x: Value, y: Value) -> Value {
    b.ins().fadd(x, y)
}

impl SoftmaxDesc {
    /// Emits the body for `(x, y)`; `logf` is `arenac_logf` (one call per line).
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, x: Value, y: Value, logf: FuncRef) {
        let row = self.len * self.inner * 4;
        for_range(b, self.outer, &mut |b, o| {
            let xr = offset(b, x, o, row);
            let yr = offset(b, y, o, row);
            if self.inner == 1 {
                self.contiguous(b, xr, yr, logf);
            } else {
                let m = Math { ty: F32X4 };
                for_range(b, self.inner / 4, &mut |b, s| {
                    let xs = offset(b, xr, s, 16);
                    let ys = offset(b, yr, s, 16);
                    self.lines(m, b, xs, ys, logf);
                });
                let m = Math { ty: F32 };
                for s in (self.inner / 4) * 4..self.inner {
                    let xs = b.ins().iadd_imm_s(xr, (s * 4) as i64);
                    let ys = b.ins().iadd_imm_s(yr, (s * 4) as i64);
                    self.lines(m, b, xs, ys, logf);
                }
            }
        });
    }

    /// `ln` of each lane by one helper call per lane.
    fn ln(m: Math, b: &mut FunctionBuilder<'_>, v: Value, logf: FuncRef) -> Value {
        if !m.vector() {
            let call = b.ins().call(logf, &[v]);
            return b.inst_results(call)[0];
        }
        let mut out = v;
        for lane in 0..4u8 {
            let s = b.ins().extractlane(v, lane);
            let call = b.ins().call(logf, &[s]);
            let r = b.inst_results(call)[0];
            out = b.ins().insertlane(out, r, lane);
        }
        out
    }

    /// Lines at `x`, `x + inner`, ... (`m` wide: one line, or four adjacent ones).
    fn lines(&self, m: Math, b: &mut FunctionBuilder<'_>, x: Value, y: Value, logf: FuncRef) {
        let step = self.inner * 4;
        let acc = b.declare_var(m.ty);
        let ninf = m.c(b, f32::NEG_INFINITY);
        b.def_var(acc, ninf);
        for_range(b, self.len, &mut |b, k| {
            let p = offset(b, x, k, step);
            let v = m.load(b, p, 0);
            let a = b.use_var(acc);
            let a = m.max(b, a, v);
            b.def_var(acc, a);
        });
        let max = b.use_var(acc);
        let sum = b.declare_var(m.ty);
        let zero = m.c(b, 0.0);
        b.def_var(sum, zero);
        for_range(b, self.len, &mut |b, k| {
            let p = offset(b, x, k, step);
            let v = m.load(b, p, 0);
            let d = b.ins().fsub(v, max);
            let e = m.exp(b, d);
            if !self.log {
                let q = offset(b, y, k, step);
                m.store(b, e, q, 0);
            }
            let s = b.use_var(sum);
            let s = b.ins().fadd(s, e);
            b.def_var(sum, s);
        });
        let s = b.use_var(sum);
        if self.log {
            let l = Self::ln(m, b, s, logf);
            let shift = b.ins().fadd(max, l);
            for_range(b, self.len, &mut |b, k| {
                let p = offset(b, x, k, step);
                let v = m.load(b, p, 0);
                let r = b.ins().fsub(v, shift);
                let q = offset(b, y, k, step);
                m.store(b, r, q, 0);
            });
        } else {
            let one = m.c(b, 1.0);
            let inv = b.ins().fdiv(one, s);
            for_range(b, self.len, &mut |b, k| {
                let q = offset(b, y, k, step);
                let v = m.load(b, q, 0);
                let r = b.ins().fmul(v, inv);
                m.store(b, r, q, 0);
            });
        }
    }

    /// One contiguous line: f32x4 chunks plus a scalar tail, reduced horizontally.
    fn contiguous(&self, b: &mut FunctionBuilder<'_>, x: Value, y: Value, logf: FuncRef) {
        let (vm, sm) = (Math { ty: F32X4 }, Math { ty: F32 });
        let chunks = self.len / 4;
        let tail = chunks * 4..self.len;
        // Pass 1: max.
        let vacc = b.declare_var(F32X4);
        let ninf = vm.c(b, f32::NEG_INFINITY);
        b.def_var(vacc, ninf);
        for_range(b, chunks, &mut |b, i| {
            let p = offset(b, x, i, 16);
            let v = vm.load(b, p, 0);
            let a = b.use_var(vacc);
            let a = vm.max(b, a, v);
            b.def_var(vacc, a);
        });
        let a = b.use_var(vacc);
        let mut max = Math::hreduce(b, a, fmax);
        for t in tail.clone() {
            let v = sm.load(b, x, (t * 4) as i32);
            max = sm.max(b, max, v);
        }
        // Pass 2: exp and sum.
        let vmax = b.ins().splat(F32X4, max);
        let vsum: Variable = b.declare_var(F32X4);
        let zero = vm.c(b, 0.0);
        b.def_var(vsum, zero);
        for_range(b, chunks, &mut |b, i| {
            let p = offset(b, x, i, 16);
            let v = vm.load(b, p, 0);
            let d = b.ins().fsub(v, vmax);
            let e = vm.exp(b, d);
            if !self.log {
                let q = offset(b, y, i, 16);
                vm.store(b, e, q, 0);
            }
            let s = b.use_var(vsum);
            let s = b.ins().fadd(s, e);
            b.def_var(vsum, s);
        });
        let s = b.use_var(vsum);
        let mut sum = Math::hreduce(b, s, fadd);
        for t in tail.clone() {
            let v = sm.load(b, x, (t * 4) as i32);
            let d = b.ins().fsub(v, max);
            let e = sm.exp(b, d);
            if !self.log {
                sm.store(b, e, y, (t * 4) as i32);
            }
            sum = b.ins().fadd(sum, e);
        }
        // Pass 3: normalize.
        if self.log {
            let l = Self::ln(sm, b, sum, logf);
            let shift = b.ins().fadd(max, l);
            let vshift = b.ins().splat(F32X4, shift);
            for_range(b, chunks, &mut |b, i| {
                let p = offset(b, x, i, 16);
                let v = vm.load(b, p, 0);
                let r = b.ins().fsub(v, vshift);
                let q = offset(b, y, i, 16);
                vm.store(b, r, q, 0);
            });
            for t in tail {
                let v = sm.load(b, x, (t * 4) as i32);
                let r = b.ins().fsub(v, shift);
                sm.store(b, r, y, (t * 4) as i32);
            }
        } else {
            let one = sm.c(b, 1.0);
            let inv = b.ins().fdiv(one, sum);
            let vinv = b.ins().splat(F32X4, inv);
            for_range(b, chunks, &mut |b, i| {
                let q = offset(b, y, i, 16);
                let v = vm.load(b, q, 0);
                let r = b.ins().fmul(v, vinv);
                vm.store(b, r, q, 0);
            });
            for t in tail {
                let v = sm.load(b, y, (t * 4) as i32);
                let r = b.ins().fmul(v, inv);
                sm.store(b, r, y, (t * 4) as i32);
            }
        }
    }
}
