//! CumSum/CumProd and LpNormalization over a tensor seen as `outer x len x inner` (the axis
//! in the middle), on any dtype but f16/bf16 (LpNormalization: f32/f64), computed like the
//! reference: floats in f64, integers in i64 (wrapping).

use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::{InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;

use super::reduce_any::{Dom, load, store};
use super::{for_range, offset};
use crate::ir::types::DType;

/// CumSum or CumProd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CumDesc {
    /// Element type.
    pub dtype: DType,
    /// Rows before the axis.
    pub outer: usize,
    /// Axis length.
    pub len: usize,
    /// Elements after the axis.
    pub inner: usize,
    /// Product (true) or sum.
    pub prod: bool,
    /// Each output leaves its own element out.
    pub exclusive: bool,
    /// From the end of the axis.
    pub reverse: bool,
}

impl CumDesc {
    /// Emits the body for `(x, y)` (`y` may be `x`: each element is read before written).
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, x: Value, y: Value) {
        let Some(dom) = Dom::of(self.dtype) else {
            return;
        };
        let acc_dom = if dom.ty() == I64 { dom } else { Dom::F64 };
        let es = self.dtype.size();
        let (len, inner) = (self.len, self.inner);
        for_range(b, self.outer, &mut |b, o| {
            let xo = offset(b, x, o, len * inner * es);
            let yo = offset(b, y, o, len * inner * es);
            for_range(b, inner, &mut |b, i| {
                let xb = offset(b, xo, i, es);
                let yb = offset(b, yo, i, es);
                let acc = b.declare_var(acc_dom.ty());
                let init = acc_dom.c(b, if self.prod { 1.0 } else { 0.0 });
                b.def_var(acc, init);
                for_range(b, len, &mut |b, t| {
                    let k = if self.reverse {
                        let last = b.ins().iconst(I64, len as i64 - 1);
                        b.ins().isub(last, t)
                    } else {
                        t
                    };
                    let p = offset(b, xb, k, inner * es);
                    let v = load(b, self.dtype, p);
                    let v = dom.to(b, v, acc_dom);
                    let a = b.use_var(acc);
                    let next = match (self.prod, acc_dom == Dom::F64) {
                        (true, true) => b.ins().fmul(a, v),
                        (true, false) => b.ins().imul(a, v),
                        (false, true) => b.ins().fadd(a, v),
                        (false, false) => b.ins().iadd(a, v),
                    };
                    let out = if self.exclusive { a } else { next };
                    let out = acc_dom.to(b, out, dom);
                    let q = offset(b, yb, k, inner * es);
                    store(b, self.dtype, out, q);
                    b.def_var(acc, next);
                });
            });
        });
    }
}

/// LpNormalization (p = 1 or 2) on f32 or f64.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LpNormDesc {
    /// Element type (f32 or f64).
    pub dtype: DType,
    /// Rows before the axis.
    pub outer: usize,
    /// Axis length.
    pub len: usize,
    /// Elements after the axis.
    pub inner: usize,
    /// 1 or 2.
    pub p: u8,
}

impl LpNormDesc {
    /// Emits the body for `(x, y)`.
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, x: Value, y: Value) {
        let Some(dom) = Dom::of(self.dtype) else {
            return;
        };
        let f = Dom::F64;
        let es = self.dtype.size();
        let (len, inner) = (self.len, self.inner);
        for_range(b, self.outer, &mut |b, o| {
            let xo = offset(b, x, o, len * inner * es);
            let yo = offset(b, y, o, len * inner * es);
            for_range(b, inner, &mut |b, i| {
                let xb = offset(b, xo, i, es);
                let yb = offset(b, yo, i, es);
                let acc = b.declare_var(f.ty());
                let z = f.c(b, 0.0);
                b.def_var(acc, z);
                for_range(b, len, &mut |b, t| {
                    let p = offset(b, xb, t, inner * es);
                    let v = load(b, self.dtype, p);
                    let v = dom.to(b, v, f);
                    let m = if self.p == 1 {
                        b.ins().fabs(v)
                    } else {
                        b.ins().fmul(v, v)
                    };
                    let a = b.use_var(acc);
                    let s = b.ins().fadd(a, m);
                    b.def_var(acc, s);
                });
                let s = b.use_var(acc);
                let norm = if self.p == 1 { s } else { b.ins().sqrt(s) };
                let z = f.c(b, 0.0);
                let is0 = b.ins().fcmp(FloatCC::Equal, norm, z);
                for_range(b, len, &mut |b, t| {
                    let p = offset(b, xb, t, inner * es);
                    let v = load(b, self.dtype, p);
                    let v = dom.to(b, v, f);
                    let q = b.ins().fdiv(v, norm);
                    let r = b.ins().select(is0, z, q);
                    let r = f.to(b, r, dom);
                    let yp = offset(b, yb, t, inner * es);
                    store(b, self.dtype, r, yp);
                });
            });
        });
    }
}
