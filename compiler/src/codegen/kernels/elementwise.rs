//! Elementwise kernels over broadcast operands: a loop nest over the output's (collapsed)
//! dims with per-input strides (0 for broadcast dims); the innermost dim runs over f32x4 with a
//! scalar tail, each input loaded as a vector (stride 1) or a splatted scalar (stride 0).

use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::types::{F32, F32X4};
use cranelift_codegen::ir::{InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;

use super::{Math, for_range, offset};
use crate::ops::MathOp;

/// The math of one elementwise kernel.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Ew {
    /// x
    Copy,
    /// x * k
    Scale(f32),
    /// max(x, 0)
    Relu,
    /// x < 0 ? alpha x : x
    LeakyRelu(f32),
    /// min(max(x, lo), hi)
    Clip(f32, f32),
    /// -x
    Neg,
    /// |x|
    Abs,
    /// sqrt(x)
    Sqrt,
    /// 1 / x
    Reciprocal,
    /// exp(x)
    Exp,
    /// ln(x)
    Log,
    /// 1 / (1 + exp(-x))
    Sigmoid,
    /// tanh(x)
    Tanh,
    /// erf(x)
    Erf,
    /// x Phi(x) (exact, via erf)
    Gelu,
    /// the tanh approximation of Gelu
    GeluTanh,
    /// max(0, min(1, alpha x + beta))
    HardSigmoid(f32, f32),
    /// x HardSigmoid(x) with alpha 1/6, beta 1/2
    HardSwish,
    /// Float math and activations of [`MathOp`] (not its predicates, which output bool).
    Math(MathOp),
    /// a + b
    Add,
    /// a - b
    Sub,
    /// a * b
    Mul,
    /// a / b
    Div,
    /// max(a, b)
    Max,
    /// min(a, b)
    Min,
    /// a < 0 ? b a : a
    PRelu,
    /// (a + b) * 0.5
    Mean2,
    /// a * b + c (inference BatchNormalization with folded scale and shift)
    MulAdd,
    /// x^n for a constant integer n
    Powi(i32),
    /// a^b (C `powf` semantics)
    Pow,
}

impl Ew {
    /// Number of inputs.
    pub fn arity(self) -> usize {
        match self {
            Ew::Add
            | Ew::Sub
            | Ew::Mul
            | Ew::Div
            | Ew::Max
            | Ew::Min
            | Ew::PRelu
            | Ew::Mean2
            | Ew::Pow => 2,
            Ew::MulAdd => 3,
            _ => 1,
        }
    }

    /// The math on values of `m`'s width; `x` holds [`Ew::arity`] operands.
    pub(crate) fn apply(self, m: Math, b: &mut FunctionBuilder<'_>, x: &[Value]) -> Value {
        let a = x[0];
        match self {
            Ew::Copy => a,
            Ew::Scale(k) => {
                let k = m.c(b, k);
                b.ins().fmul(a, k)
            }
            Ew::Relu => {
                let z = m.c(b, 0.0);
                m.max(b, a, z)
            }
            Ew::LeakyRelu(alpha) => {
                let z = m.c(b, 0.0);
                let k = m.c(b, alpha);
                let neg = b.ins().fcmp(FloatCC::LessThan, a, z);
                let s = b.ins().fmul(a, k);
                m.select(b, neg, s, a)
            }
            Ew::Clip(lo, hi) => {
                let lo = m.c(b, lo);
                let hi = m.c(b, hi);
                let t = m.max(b, a, lo);
                m.min(b, t, hi)
            }
            Ew::Neg => b.ins().fneg(a),
            Ew::Abs => b.ins().fabs(a),
            Ew::Sqrt => b.ins().sqrt(a),
            Ew::Reciprocal => {
                let one = m.c(b, 1.0);
                b.ins().fdiv(one, a)
            }
            Ew::Exp => m.exp(b, a),
            Ew::Log => m.log(b, a),
            Ew::Sigmoid => m.sigmoid(b, a),
            Ew::Tanh => m.tanh(b, a),
            Ew::Erf => m.erf(b, a),
            Ew::Gelu => {
                let k = m.c(b, std::f32::consts::FRAC_1_SQRT_2);
                let s = b.ins().fmul(a, k);
                let e = m.erf(b, s);
                let one = m.c(b, 1.0);
                let e1 = b.ins().fadd(e, one);
                let h = m.c(b, 0.5);
                let ha = b.ins().fmul(a, h);
                b.ins().fmul(ha, e1)
            }
            Ew::GeluTanh => {
                let c = m.c(b, 0.044_715);
                let a3 = b.ins().fmul(a, a);
                let a3 = b.ins().fmul(a3, a);
                let inner = b.ins().fma(a3, c, a);
                let k = m.c(b, (2.0 / std::f64::consts::PI).sqrt() as f32);
                let inner = b.ins().fmul(inner, k);
                let t = m.tanh(b, inner);
                let one = m.c(b, 1.0);
                let t1 = b.ins().fadd(t, one);
                let h = m.c(b, 0.5);
                let ha = b.ins().fmul(a, h);
                b.ins().fmul(ha, t1)
            }
            Ew::HardSigmoid(alpha, beta) => hard_sigmoid(m, b, a, alpha, beta),
            Ew::Math(op) => m.math(b, op, a),
            Ew::HardSwish => {
                let h = hard_sigmoid(m, b, a, 1.0 / 6.0, 0.5);
                b.ins().fmul(a, h)
            }
            Ew::Add => b.ins().fadd(a, x[1]),
            Ew::Sub => b.ins().fsub(a, x[1]),
            Ew::Mul => b.ins().fmul(a, x[1]),
            Ew::Div => b.ins().fdiv(a, x[1]),
            Ew::Max => m.max(b, a, x[1]),
            Ew::Min => m.min(b, a, x[1]),
            Ew::PRelu => {
                let z = m.c(b, 0.0);
                let neg = b.ins().fcmp(FloatCC::LessThan, a, z);
                let s = b.ins().fmul(a, x[1]);
                m.select(b, neg, s, a)
            }
            Ew::Mean2 => {
                let s = b.ins().fadd(a, x[1]);
                let h = m.c(b, 0.5);
                b.ins().fmul(s, h)
            }
            Ew::MulAdd => b.ins().fma(a, x[1], x[2]),
            Ew::Powi(n) => m.powi(b, a, n),
            Ew::Pow => m.pow(b, a, x[1]),
        }
    }
}

fn hard_sigmoid(m: Math, b: &mut FunctionBuilder<'_>, a: Value, alpha: f32, beta: f32) -> Value {
    let k = m.c(b, alpha);
    let c = m.c(b, beta);
    let t = b.ins().fma(a, k, c);
    let z = m.c(b, 0.0);
    let one = m.c(b, 1.0);
    let t = m.max(b, t, z);
    m.min(b, t, one)
}

/// The math of a loop body: inputs' values of the [`Math`] width in, the output's out.
pub(crate) type Body<'a> = dyn Fn(Math, &mut FunctionBuilder<'_>, &[Value]) -> Value + 'a;

/// One elementwise kernel: output dims (collapsed) and each input's element strides over them.
#[derive(Clone, Debug, PartialEq)]
pub struct EwDesc {
    /// The math.
    pub op: Ew,
    /// Output dims after dropping 1s and merging contiguous runs (at least one dim).
    pub dims: Vec<usize>,
    /// Per input, element strides over `dims` (0 = broadcast).
    pub strides: Vec<Vec<usize>>,
}

impl EwDesc {
    /// Builds the descriptor for inputs of `in_shapes` broadcast to `out`.
    pub fn new(op: Ew, in_shapes: &[&[usize]], out: &[usize]) -> EwDesc {
        let r = out.len();
        let mut strides: Vec<Vec<usize>> = in_shapes
            .iter()
            .map(|s| {
                let mut st = vec![0; r];
                let mut acc = 1;
                for k in (0..s.len()).rev() {
                    let ok = r - s.len() + k;
                    st[ok] = if s[k] == 1 && out[ok] != 1 { 0 } else { acc };
                    acc *= s[k];
                }
                st
            })
            .collect();
        let mut dims: Vec<usize> = Vec::new();
        let mut kept: Vec<Vec<usize>> = vec![Vec::new(); strides.len()];
        for k in 0..r {
            if out[k] == 1 {
                continue;
            }
            dims.push(out[k]);
            for (j, st) in strides.iter().enumerate() {
                kept[j].push(st[k]);
            }
        }
        strides = kept;
        // Merge dim k into k+1 when every input walks them as one run.
        let mut k = dims.len();
        while k >= 2 {
            let (a, b) = (k - 2, k - 1);
            if strides.iter().all(|s| s[a] == s[b] * dims[b]) {
                dims[a] *= dims[b];
                dims.remove(b);
                for s in &mut strides {
                    s[a] = s[b];
                    s.remove(b);
                }
            }
            k -= 1;
        }
        if dims.is_empty() {
            dims.push(1);
            for s in &mut strides {
                s.push(1);
            }
        }
        EwDesc { op, dims, strides }
    }

    /// Emits the body: `ptrs` are the inputs then the output.
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, ptrs: &[Value]) {
        self.emit_with(b, ptrs, &|m, b, x| self.op.apply(m, b, x));
    }

    /// Emits the loop nest over `dims` with `body` as the math instead of `op`: `body` gets
    /// one value per input (a vector, or a splatted scalar for a broadcast input) and returns
    /// the output's. `ptrs` are the inputs then the output.
    pub(crate) fn emit_with(&self, b: &mut FunctionBuilder<'_>, ptrs: &[Value], body: &Body<'_>) {
        self.level(b, 0, ptrs, body);
    }

    fn level(&self, b: &mut FunctionBuilder<'_>, k: usize, ptrs: &[Value], body: &Body<'_>) {
        let d = self.dims.len();
        if k + 1 == d {
            self.inner(b, ptrs, body);
            return;
        }
        // Output is contiguous: its stride at dim k is the product of the dims after it.
        let out_stride: usize = self.dims[k + 1..].iter().product();
        for_range(b, self.dims[k], &mut |b, i| {
            let mut next: Vec<Value> = Vec::with_capacity(ptrs.len());
            for (j, st) in self.strides.iter().enumerate() {
                next.push(offset(b, ptrs[j], i, st[k] * 4));
            }
            let o = ptrs[self.strides.len()];
            next.push(offset(b, o, i, out_stride * 4));
            self.level(b, k + 1, &next, body);
        });
    }

    fn inner(&self, b: &mut FunctionBuilder<'_>, ptrs: &[Value], body: &Body<'_>) {
        let len = *self.dims.last().unwrap_or(&1);
        let last: Vec<usize> = self
            .strides
            .iter()
            .map(|s| *s.last().unwrap_or(&1))
            .collect();
        let n_in = self.strides.len();
        let vm = Math { ty: F32X4 };
        for_range(b, len / 4, &mut |b, i| {
            let mut vals = Vec::with_capacity(n_in);
            for j in 0..n_in {
                vals.push(if last[j] == 0 {
                    vm.load_splat(b, ptrs[j], 0)
                } else {
                    let p = offset(b, ptrs[j], i, 16);
                    vm.load(b, p, 0)
                });
            }
            let y = body(vm, b, &vals);
            let p = offset(b, ptrs[n_in], i, 16);
            vm.store(b, y, p, 0);
        });
        let sm = Math { ty: F32 };
        for t in (len / 4) * 4..len {
            let mut vals = Vec::with_capacity(n_in);
            for j in 0..n_in {
                let off = if last[j] == 0 { 0 } else { (t * 4) as i32 };
                vals.push(sm.load(b, ptrs[j], off));
            }
            let y = body(sm, b, &vals);
            sm.store(b, y, ptrs[n_in], (t * 4) as i32);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collapses_dims() {
        let d = EwDesc::new(Ew::Add, &[&[2, 1, 3], &[4, 1]], &[2, 4, 3]);
        assert_eq!(d.dims, vec![2, 4, 3]);
        assert_eq!(d.strides, vec![vec![3, 0, 1], vec![0, 1, 0]]);
        let d = EwDesc::new(Ew::Add, &[&[2, 3, 4], &[2, 3, 4]], &[2, 3, 4]);
        assert_eq!(d.dims, vec![24]);
        let d = EwDesc::new(Ew::Add, &[&[2, 3, 4], &[]], &[2, 3, 4]);
        assert_eq!(d.strides, vec![vec![1], vec![0]]);
        let d = EwDesc::new(Ew::Copy, &[&[]], &[]);
        assert_eq!(d.dims, vec![1]);
    }
}
