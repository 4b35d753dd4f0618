//! ArgMax/ArgMin, Hardmax and TopK over a tensor seen as `outer x len x inner` (the axis in
//! the middle), on any dtype but f16/bf16, with the reference's rules (`ops::reduce::arg`,
//! `ops::reduce::topk`): a NaN wins an arg scan; ties go to the first index (the last with
//! `select_last_index`); TopK orders by value (NaN above every number), then lower index.
//!
//! TopK selects without scratch: output `j` is the best element strictly after output
//! `j - 1` in that order, one scan of the axis per output (`k * len` comparisons per row).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::{InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;

use super::reduce_any::{Dom, flag, load, store};
use super::{for_range, offset};
use crate::ir::types::DType;

/// ArgMax/ArgMin (i64 indices out) or Hardmax (a one-hot of the input's dtype).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgDesc {
    /// Element type of the input.
    pub dtype: DType,
    /// Rows before the axis.
    pub outer: usize,
    /// Axis length (at least 1 for ArgMax/ArgMin).
    pub len: usize,
    /// Elements after the axis.
    pub inner: usize,
    /// Max (true) or min.
    pub max: bool,
    /// Ties go to the last index.
    pub last: bool,
    /// Write the one-hot (Hardmax) instead of the index.
    pub hardmax: bool,
}

impl ArgDesc {
    /// Emits the body for `(x, y)`.
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, x: Value, y: Value) {
        let Some(dom) = Dom::of(self.dtype) else {
            return;
        };
        if self.len == 0 {
            return;
        }
        let es = self.dtype.size();
        let (len, inner) = (self.len, self.inner);
        for_range(b, self.outer, &mut |b, o| {
            let xo = offset(b, x, o, len * inner * es);
            let out_row = if self.hardmax {
                len * inner * es
            } else {
                inner * 8
            };
            let yo = offset(b, y, o, out_row);
            for_range(b, inner, &mut |b, i| {
                let base = offset(b, xo, i, es);
                let best = b.declare_var(dom.ty());
                let bi = b.declare_var(I64);
                let v0 = load(b, self.dtype, base);
                b.def_var(best, v0);
                let z = b.ins().iconst(I64, 0);
                b.def_var(bi, z);
                for_range(b, len - 1, &mut |b, t| {
                    let k = b.ins().iadd_imm_s(t, 1);
                    let p = offset(b, base, k, inner * es);
                    let v = load(b, self.dtype, p);
                    let cur = b.use_var(best);
                    let take = self.takes(b, dom, v, cur);
                    let nb = b.ins().select(take, v, cur);
                    b.def_var(best, nb);
                    let ci = b.use_var(bi);
                    let ni = b.ins().select(take, k, ci);
                    b.def_var(bi, ni);
                });
                let idx = b.use_var(bi);
                if !self.hardmax {
                    let yp = offset(b, yo, i, 8);
                    b.ins().store(super::mem(), idx, yp, 0);
                    return;
                }
                let yb = offset(b, yo, i, es);
                for_range(b, len, &mut |b, k| {
                    let hit = b.ins().icmp(IntCC::Equal, k, idx);
                    let one = dom.c(b, 1.0);
                    let zero = dom.c(b, 0.0);
                    let v = b.ins().select(hit, one, zero);
                    let yp = offset(b, yb, k, inner * es);
                    store(b, self.dtype, v, yp);
                });
            });
        });
    }

    /// Whether `v` replaces the current best `cur`.
    fn takes(&self, b: &mut FunctionBuilder<'_>, dom: Dom, v: Value, cur: Value) -> Value {
        let strict = if self.max {
            dom.gt(b, v, cur)
        } else {
            dom.gt(b, cur, v)
        };
        let (nv, nc) = (dom.nan(b, v), dom.nan(b, cur));
        if self.last {
            let e = dom.eq(b, v, cur);
            let t = b.ins().bor(strict, e);
            match nv {
                Some(nv) => b.ins().bor(t, nv),
                None => t,
            }
        } else {
            match (nv, nc) {
                (Some(nv), Some(nc)) => {
                    let n = b.ins().band_not(nv, nc);
                    b.ins().bor(strict, n)
                }
                _ => strict,
            }
        }
    }
}

/// TopK: values (the input's dtype) and i64 indices, `outer x k x inner` each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopKDesc {
    /// Element type.
    pub dtype: DType,
    /// Rows before the axis.
    pub outer: usize,
    /// Axis length.
    pub len: usize,
    /// Elements after the axis.
    pub inner: usize,
    /// Outputs per row (at most `len`).
    pub k: usize,
    /// Largest first (true) or smallest first.
    pub largest: bool,
}

impl TopKDesc {
    /// Whether `(a, ia)` comes before `(c, ic)` in the output order.
    fn before(
        &self,
        b: &mut FunctionBuilder<'_>,
        dom: Dom,
        (a, ia): (Value, Value),
        (c, ic): (Value, Value),
    ) -> Value {
        let g = if self.largest {
            dom.gt_total(b, a, c)
        } else {
            dom.gt_total(b, c, a)
        };
        let e = dom.eq_total(b, a, c);
        let lower = b.ins().icmp(IntCC::SignedLessThan, ia, ic);
        let tie = b.ins().band(e, lower);
        b.ins().bor(g, tie)
    }

    /// Emits the body for `(x, values, indices)`.
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, x: Value, yv: Value, yi: Value) {
        let Some(dom) = Dom::of(self.dtype) else {
            return;
        };
        let es = self.dtype.size();
        let (len, inner, k) = (self.len, self.inner, self.k);
        for_range(b, self.outer, &mut |b, o| {
            let xo = offset(b, x, o, len * inner * es);
            let vo = offset(b, yv, o, k * inner * es);
            let io = offset(b, yi, o, k * inner * 8);
            for_range(b, inner, &mut |b, i| {
                let base = offset(b, xo, i, es);
                let vb = offset(b, vo, i, es);
                let ib = offset(b, io, i, 8);
                let (pv, pi) = (b.declare_var(dom.ty()), b.declare_var(I64));
                let z = dom.c(b, 0.0);
                b.def_var(pv, z);
                let zi = b.ins().iconst(I64, 0);
                b.def_var(pi, zi);
                let has_prev = flag(b, 0);
                for_range(b, k, &mut |b, j| {
                    let (bv, bi) = (b.declare_var(dom.ty()), b.declare_var(I64));
                    let z = dom.c(b, 0.0);
                    b.def_var(bv, z);
                    let zi = b.ins().iconst(I64, 0);
                    b.def_var(bi, zi);
                    let found = flag(b, 0);
                    for_range(b, len, &mut |b, t| {
                        let p = offset(b, base, t, inner * es);
                        let v = load(b, self.dtype, p);
                        let (prev, prev_i, hp) =
                            (b.use_var(pv), b.use_var(pi), b.use_var(has_prev));
                        let after = self.before(b, dom, (prev, prev_i), (v, t));
                        let no_prev = b.ins().icmp_imm_u(IntCC::Equal, hp, 0);
                        let after = b.ins().bor(after, no_prev);
                        let (cur, cur_i, f) = (b.use_var(bv), b.use_var(bi), b.use_var(found));
                        let better = self.before(b, dom, (v, t), (cur, cur_i));
                        let none = b.ins().icmp_imm_u(IntCC::Equal, f, 0);
                        let better = b.ins().bor(better, none);
                        let take = b.ins().band(after, better);
                        let nv = b.ins().select(take, v, cur);
                        b.def_var(bv, nv);
                        let ni = b.ins().select(take, t, cur_i);
                        b.def_var(bi, ni);
                        let nf = b.ins().bor(f, take);
                        b.def_var(found, nf);
                    });
                    let (v, vi) = (b.use_var(bv), b.use_var(bi));
                    let vp = offset(b, vb, j, inner * es);
                    store(b, self.dtype, v, vp);
                    let ip = offset(b, ib, j, inner * 8);
                    b.ins().store(super::mem(), vi, ip, 0);
                    b.def_var(pv, v);
                    b.def_var(pi, vi);
                    let one = b.ins().iconst(cranelift_codegen::ir::types::I8, 1);
                    b.def_var(has_prev, one);
                });
            });
        });
    }
}
