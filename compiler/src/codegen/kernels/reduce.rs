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

/// LayerNormalization over contiguous rows of `len`: mean, variance, then
/// `(x - mean) / sqrt(var + eps) * scale + bias` (scale and bias of `len` elements, or one).
#[derive(Clone, Debug, PartialEq)]
pub struct LayerNormDesc {
    /// Rows.
    pub rows: usize,
    /// Row length.
    pub len: usize,
    /// Added to the variance.
    pub epsilon: f32,
    /// Scale and bias are single elements (broadcast).
    pub scalar_params: [bool; 2],
    /// A bias is given.
    pub has_bias: bool,
}

impl LayerNormDesc {
    /// Emits the body for `(x, scale, bias, y)` (`bias` unused without one).
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, p: &[Value]) {
        use cranelift_codegen::ir::types::F32X4;
        let (x, scale, bias, y) = (p[0], p[1], p[2], p[3]);
        let (vm, sm) = (Math { ty: F32X4 }, Math { ty: F32 });
        let len = self.len;
        let chunks = len / 4;
        let sum_row = |b: &mut FunctionBuilder<'_>, xr: Value, center: Option<Value>| -> Value {
            let acc = b.declare_var(F32X4);
            let z = vm.c(b, 0.0);
            b.def_var(acc, z);
            let vc = center.map(|c| b.ins().splat(F32X4, c));
            for_range(b, chunks, &mut |b, i| {
                let p = offset(b, xr, i, 16);
                let mut v = vm.load(b, p, 0);
                if let Some(c) = vc {
                    let d = b.ins().fsub(v, c);
                    v = b.ins().fmul(d, d);
                }
                let a = b.use_var(acc);
                let a = b.ins().fadd(a, v);
                b.def_var(acc, a);
            });
            let a = b.use_var(acc);
            let mut s = Math::hreduce(b, a, |b, x, y| b.ins().fadd(x, y));
            for t in chunks * 4..len {
                let mut v = sm.load(b, xr, (t * 4) as i32);
                if let Some(c) = center {
                    let d = b.ins().fsub(v, c);
                    v = b.ins().fmul(d, d);
                }
                s = b.ins().fadd(s, v);
            }
            s
        };
        for_range(b, self.rows, &mut |b, r| {
            let xr = offset(b, x, r, len * 4);
            let yr = offset(b, y, r, len * 4);
            let inv_n = sm.c(b, 1.0 / len as f32);
            let s = sum_row(b, xr, None);
            let mean = b.ins().fmul(s, inv_n);
            let q = sum_row(b, xr, Some(mean));
            let var = b.ins().fmul(q, inv_n);
            let eps = sm.c(b, self.epsilon);
            let ve = b.ins().fadd(var, eps);
            let sd = b.ins().sqrt(ve);
            let one = sm.c(b, 1.0);
            let inv = b.ins().fdiv(one, sd);
            let norm = |m: Math, b: &mut FunctionBuilder<'_>, off: Value, imm: i32| {
                let (mean, inv) = if m.vector() {
                    (b.ins().splat(F32X4, mean), b.ins().splat(F32X4, inv))
                } else {
                    (mean, inv)
                };
                let xp = b.ins().iadd(xr, off);
                let v = m.load(b, xp, imm);
                let d = b.ins().fsub(v, mean);
                let d = b.ins().fmul(d, inv);
                let sp = b.ins().iadd(scale, off);
                let g = if self.scalar_params[0] {
                    m.load_splat(b, scale, 0)
                } else {
                    m.load(b, sp, imm)
                };
                let mut o = b.ins().fmul(d, g);
                if self.has_bias {
                    let bp = b.ins().iadd(bias, off);
                    let bb = if self.scalar_params[1] {
                        m.load_splat(b, bias, 0)
                    } else {
                        m.load(b, bp, imm)
                    };
                    o = b.ins().fadd(o, bb);
                }
                let yp = b.ins().iadd(yr, off);
                m.store(b, o, yp, imm);
            };
            for_range(b, chunks, &mut |b, i| {
                let off = b.ins().imul_imm_u(i, 16);
                norm(vm, b, off, 0);
            });
            for t in chunks * 4..len {
                let off = b.ins().iconst(cranelift_codegen::ir::types::I64, 0);
                norm(sm, b, off, (t * 4) as i32);
            }
        });
    }
}
