//! ArgMax/ArgMin, Hardmax and TopK over a tensor seen as `outer x len x inner` (the axis in
//! the middle), on any dtype but f16/bf16, with the reference's rules (`ops::reduce::arg`,
//! `ops::reduce::topk`): a NaN wins an arg scan; ties go to the first index (the last with
//! `select_last_index`); TopK orders by value (NaN above every number), then lower index.
//!
//! TopK needs no scratch: per row, one pass over the axis insertion-sorts the best `k` seen
//! so far into the outputs themselves (`len` comparisons plus the shifts of the elements
//! that enter; `k * len` at worst, on an ascending row for largest).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::{BlockArg, InstBuilder, Value};
use cranelift_frontend::{FunctionBuilder, Variable};

use super::reduce_any::{Dom, load, store};
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

    /// Emits the body for `(x, values, indices)`: per row, an insertion sort into the
    /// outputs of the best `k` seen so far (an element enters when fewer than `k` are held
    /// or it comes before the last held one; equal elements keep index order).
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, x: Value, yv: Value, yi: Value) {
        let Some(dom) = Dom::of(self.dtype) else {
            return;
        };
        if self.k == 0 {
            return;
        }
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
                let cnt = b.declare_var(I64);
                let z = b.ins().iconst(I64, 0);
                b.def_var(cnt, z);
                for_range(b, len, &mut |b, t| {
                    self.insert(b, dom, (base, vb, ib), cnt, t);
                });
            });
        });
    }

    /// Offers element `t` of the row at `base` to the held outputs at `(vb, ib)`.
    fn insert(
        &self,
        b: &mut FunctionBuilder<'_>,
        dom: Dom,
        (base, vb, ib): (Value, Value, Value),
        cnt: Variable,
        t: Value,
    ) {
        let (es, inner, k) = (self.dtype.size(), self.inner, self.k);
        let p = offset(b, base, t, inner * es);
        let v = load(b, self.dtype, p);
        let c = b.use_var(cnt);
        let full = b.ins().icmp_imm_u(IntCC::Equal, c, k as i64);
        // The last held element (garbage, and ignored, while not full).
        let lv_p = self.at(b, vb, k - 1, es);
        let lv = load(b, self.dtype, lv_p);
        let li_p = self.at(b, ib, k - 1, 8);
        let li = b.ins().load(I64, super::mem(), li_p, 0);
        let bef = self.before(b, dom, (v, t), (lv, li));
        let not_full = b.ins().icmp_imm_u(IntCC::NotEqual, c, k as i64);
        let enters = b.ins().bor(bef, not_full);
        let (ins, hdr, check, shift, place, done) = (
            b.create_block(),
            b.create_block(),
            b.create_block(),
            b.create_block(),
            b.create_block(),
            b.create_block(),
        );
        b.ins().brif(enters, ins, &[], done, &[]);
        // Start at the first free slot, or over the last one when full.
        b.switch_to_block(ins);
        let last = b.ins().iconst(I64, k as i64 - 1);
        let start = b.ins().select(full, last, c);
        b.ins().jump(hdr, &[BlockArg::Value(start)]);
        b.switch_to_block(hdr);
        let pos = b.append_block_param(hdr, I64);
        b.append_block_param(place, I64);
        let at0 = b.ins().icmp_imm_u(IntCC::Equal, pos, 0);
        b.ins()
            .brif(at0, place, &[BlockArg::Value(pos)], check, &[]);
        // Move the held element at pos - 1 up while the new one comes before it.
        b.switch_to_block(check);
        let pm1 = b.ins().iadd_imm_s(pos, -1);
        let pvp = self.at(b, vb, 0, es);
        let pvp = offset(b, pvp, pm1, inner * es);
        let pv = load(b, self.dtype, pvp);
        let pip = offset(b, ib, pm1, inner * 8);
        let pi = b.ins().load(I64, super::mem(), pip, 0);
        let moves = self.before(b, dom, (v, t), (pv, pi));
        b.ins()
            .brif(moves, shift, &[], place, &[BlockArg::Value(pos)]);
        b.switch_to_block(shift);
        let dv = offset(b, vb, pos, inner * es);
        store(b, self.dtype, pv, dv);
        let di = offset(b, ib, pos, inner * 8);
        b.ins().store(super::mem(), pi, di, 0);
        b.ins().jump(hdr, &[BlockArg::Value(pm1)]);
        b.switch_to_block(place);
        let at = b.block_params(place)[0];
        let dv = offset(b, vb, at, inner * es);
        store(b, self.dtype, v, dv);
        let di = offset(b, ib, at, inner * 8);
        b.ins().store(super::mem(), t, di, 0);
        let c1 = b.ins().iadd_imm_s(c, 1);
        let nc = b.ins().select(full, c, c1);
        b.def_var(cnt, nc);
        b.ins().jump(done, &[]);
        b.switch_to_block(done);
    }

    /// The address of held slot `j` (a constant) from `p`, `elem` bytes per element.
    fn at(&self, b: &mut FunctionBuilder<'_>, p: Value, j: usize, elem: usize) -> Value {
        let off = (j * self.inner * elem) as i64;
        if off == 0 {
            return p;
        }
        b.ins().iadd_imm_s(p, off)
    }
}
