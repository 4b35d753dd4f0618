//! Reductions over constant axes (ReduceMean/Sum/Max/Min): a loop nest over the kept dims
//! (output contiguous), and for each output element a loop nest over the reduced dims with
//! the input's strides, accumulating a scalar.

use cranelift_codegen::ir::types::F32;
use cranelift_codegen::ir::{InstBuilder, Value};
use cranelift_frontend::{FunctionBuilder, Variable};

use super::{Math, for_range, mem, offset};
use crate::ops::ReduceKind;

/// One reduction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReduceDesc {
    /// Which reduction.
    pub kind: ReduceKind,
    /// Kept dims and their input element strides.
    pub kept: Vec<(usize, usize)>,
    /// Reduced dims and their input element strides.
    pub reduced: Vec<(usize, usize)>,
}

impl ReduceDesc {
    /// From the input shape and the reduced axes.
    pub fn new(kind: ReduceKind, shape: &[usize], axes: &[usize]) -> ReduceDesc {
        let mut st = vec![1usize; shape.len()];
        for k in (0..shape.len().saturating_sub(1)).rev() {
            st[k] = st[k + 1] * shape[k + 1];
        }
        let (mut kept, mut reduced) = (Vec::new(), Vec::new());
        for (k, (&d, &s)) in shape.iter().zip(&st).enumerate() {
            if d == 1 {
                continue;
            }
            if axes.contains(&k) {
                reduced.push((d, s));
            } else {
                kept.push((d, s));
            }
        }
        ReduceDesc {
            kind,
            kept,
            reduced,
        }
    }

    /// Emits the body for `(x, y)`.
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, x: Value, y: Value) {
        self.outer(b, 0, x, y);
    }

    fn outer(&self, b: &mut FunctionBuilder<'_>, k: usize, x: Value, y: Value) {
        let m = Math { ty: F32 };
        if k == self.kept.len() {
            let acc = b.declare_var(F32);
            let init = match self.kind {
                ReduceKind::Max => f32::NEG_INFINITY,
                ReduceKind::Min => f32::INFINITY,
                _ => 0.0,
            };
            let c = m.c(b, init);
            b.def_var(acc, c);
            self.inner(b, 0, x, acc);
            let mut r = b.use_var(acc);
            if self.kind == ReduceKind::Mean {
                let count: usize = self.reduced.iter().map(|d| d.0).product();
                let k = m.c(b, 1.0 / count as f32);
                r = b.ins().fmul(r, k);
            }
            b.ins().store(mem(), r, y, 0);
            return;
        }
        let (n, s) = self.kept[k];
        let out_stride: usize = self.kept[k + 1..].iter().map(|d| d.0).product();
        for_range(b, n, &mut |b, i| {
            let xp = offset(b, x, i, s * 4);
            let yp = offset(b, y, i, out_stride * 4);
            self.outer(b, k + 1, xp, yp);
        });
    }

    fn inner(&self, b: &mut FunctionBuilder<'_>, k: usize, x: Value, acc: Variable) {
        let m = Math { ty: F32 };
        if k == self.reduced.len() {
            let v = m.load(b, x, 0);
            let a = b.use_var(acc);
            let r = match self.kind {
                ReduceKind::Max => m.max(b, a, v),
                ReduceKind::Min => m.min(b, a, v),
                _ => b.ins().fadd(a, v),
            };
            b.def_var(acc, r);
            return;
        }
        let (n, s) = self.reduced[k];
        for_range(b, n, &mut |b, i| {
            let xp = offset(b, x, i, s * 4);
            self.inner(b, k + 1, xp, acc);
        });
    }
}
