//! Reductions on any dtype but f16/bf16 (ReduceL1/L2/LogSum/LogSumExp/Prod/SumSquare, and
//! Sum/Mean/Max/Min beyond the f32 kernel of [`super::reduce`]): the same loop nest as
//! [`super::reduce::ReduceDesc`], one scalar accumulator per output element, computed like
//! the reference evaluation: floats in f64; integers in i64 (wrapping), or in f64 for
//! Mean/L2/LogSum/LogSumExp (truncated on store). `exp` and `ln` in f64 are calls of the Rust
//! helpers below, once per element (these ops are rare in real models; correct first).
//!
//! Also the typed scalar helpers the other kernels of this family share ([`Dom`], [`load`],
//! [`store`], comparisons with NaN rules).

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::types::{F32, F64, I64};
use cranelift_codegen::ir::{AbiParam, InstBuilder, Signature, Type, Value};
use cranelift_frontend::FunctionBuilder;

use super::cast::convert;
use super::reduce::ReduceDesc;
use super::{for_range, mem, offset};
use crate::ir::types::DType;
use crate::ops::ReduceKind;

/// Where values are computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dom {
    /// i64 (unsigned comparisons for u64).
    Int {
        /// u64.
        unsigned: bool,
    },
    /// f32.
    F32,
    /// f64.
    F64,
}

impl Dom {
    /// The domain of a dtype's elements (`None`: f16/bf16, not handled by these kernels).
    pub(crate) fn of(dt: DType) -> Option<Dom> {
        match dt {
            DType::F16 | DType::BF16 => None,
            DType::F32 => Some(Dom::F32),
            DType::F64 => Some(Dom::F64),
            DType::U64 => Some(Dom::Int { unsigned: true }),
            _ => Some(Dom::Int { unsigned: false }),
        }
    }

    /// The register type.
    pub(crate) fn ty(self) -> Type {
        match self {
            Dom::Int { .. } => I64,
            Dom::F32 => F32,
            Dom::F64 => F64,
        }
    }

    /// A dtype computed in this domain (for [`convert`]).
    fn dtype(self) -> DType {
        match self {
            Dom::Int { unsigned: true } => DType::U64,
            Dom::Int { unsigned: false } => DType::I64,
            Dom::F32 => DType::F32,
            Dom::F64 => DType::F64,
        }
    }

    /// Converts `v` from domain `self` to `to` (floats to integers truncate, saturating).
    pub(crate) fn to(self, b: &mut FunctionBuilder<'_>, v: Value, to: Dom) -> Value {
        if self == to || (to.ty() == I64 && self.ty() == I64) {
            return v;
        }
        convert(b, v, self.dtype(), to.dtype())
    }

    /// The constant `x` (an integer domain takes `x as i64`).
    pub(crate) fn c(self, b: &mut FunctionBuilder<'_>, x: f64) -> Value {
        match self {
            Dom::Int { .. } => b.ins().iconst(I64, x as i64),
            Dom::F32 => b.ins().f32const(x as f32),
            Dom::F64 => b.ins().f64const(x),
        }
    }

    /// `x > y` (IEEE: false with a NaN).
    pub(crate) fn gt(self, b: &mut FunctionBuilder<'_>, x: Value, y: Value) -> Value {
        match self {
            Dom::Int { unsigned: true } => b.ins().icmp(IntCC::UnsignedGreaterThan, x, y),
            Dom::Int { unsigned: false } => b.ins().icmp(IntCC::SignedGreaterThan, x, y),
            _ => b.ins().fcmp(FloatCC::GreaterThan, x, y),
        }
    }

    /// `x == y` (IEEE).
    pub(crate) fn eq(self, b: &mut FunctionBuilder<'_>, x: Value, y: Value) -> Value {
        match self {
            Dom::Int { .. } => b.ins().icmp(IntCC::Equal, x, y),
            _ => b.ins().fcmp(FloatCC::Equal, x, y),
        }
    }

    /// Whether `x` is NaN (`None` for integers: never).
    pub(crate) fn nan(self, b: &mut FunctionBuilder<'_>, x: Value) -> Option<Value> {
        match self {
            Dom::Int { .. } => None,
            _ => Some(b.ins().fcmp(FloatCC::Unordered, x, x)),
        }
    }

    /// `a || b` of optional conditions.
    fn or(b: &mut FunctionBuilder<'_>, x: Value, y: Option<Value>) -> Value {
        match y {
            Some(y) => b.ins().bor(x, y),
            None => x,
        }
    }

    /// `x > y` in the total order where NaN is above every number and equal to NaN.
    pub(crate) fn gt_total(self, b: &mut FunctionBuilder<'_>, x: Value, y: Value) -> Value {
        let g = self.gt(b, x, y);
        let extra = match (self.nan(b, x), self.nan(b, y)) {
            (Some(nx), Some(ny)) => Some(b.ins().band_not(nx, ny)),
            _ => None,
        };
        Dom::or(b, g, extra)
    }

    /// `x == y` in the same total order.
    pub(crate) fn eq_total(self, b: &mut FunctionBuilder<'_>, x: Value, y: Value) -> Value {
        let e = self.eq(b, x, y);
        let extra = match (self.nan(b, x), self.nan(b, y)) {
            (Some(nx), Some(ny)) => Some(b.ins().band(nx, ny)),
            _ => None,
        };
        Dom::or(b, e, extra)
    }
}

/// Loads one element of `dt` (not f16/bf16) into its domain.
pub(crate) fn load(b: &mut FunctionBuilder<'_>, dt: DType, p: Value) -> Value {
    match dt {
        DType::F32 => b.ins().load(F32, mem(), p, 0),
        DType::F64 => b.ins().load(F64, mem(), p, 0),
        DType::I8 => b.ins().sload8(I64, mem(), p, 0),
        DType::I16 => b.ins().sload16(I64, mem(), p, 0),
        DType::U16 | DType::F16 | DType::BF16 => b.ins().uload16(I64, mem(), p, 0),
        DType::I32 => b.ins().sload32(mem(), p, 0),
        DType::U32 => b.ins().uload32(mem(), p, 0),
        DType::I64 | DType::U64 => b.ins().load(I64, mem(), p, 0),
        DType::U8 | DType::Bool => b.ins().uload8(I64, mem(), p, 0),
        // `Op::infer` keeps the storage types away from reductions.
        DType::F8E4M3FN
        | DType::F8E4M3FNUZ
        | DType::F8E5M2
        | DType::F8E5M2FNUZ
        | DType::F8E8M0
        | DType::F4E2M1
        | DType::I4
        | DType::U4
        | DType::I2
        | DType::U2 => b.ins().uload8(I64, mem(), p, 0),
    }
}

/// Stores `v` (in the domain of `dt`) as one element of `dt`; integers are narrowed.
pub(crate) fn store(b: &mut FunctionBuilder<'_>, dt: DType, v: Value, p: Value) {
    let width = b.func.dfg.value_type(v).bytes() as usize;
    match dt.size() {
        n if n == width => b.ins().store(mem(), v, p, 0),
        1 => b.ins().istore8(mem(), v, p, 0),
        2 => b.ins().istore16(mem(), v, p, 0),
        _ => b.ins().istore32(mem(), v, p, 0),
    };
}

/// `e^x` in f64, for the generated code.
pub extern "C" fn arenac_reduce_exp(x: f64) -> f64 {
    x.exp()
}

/// `ln x` in f64, for the generated code.
pub extern "C" fn arenac_reduce_ln(x: f64) -> f64 {
    x.ln()
}

/// `x^y` in f64, for the generated code.
pub extern "C" fn arenac_reduce_pow(x: f64, y: f64) -> f64 {
    x.powf(y)
}

/// Calls the Rust helper `f` (an `extern "C" fn` of f64 arguments returning f64) at its
/// address, with the kernel's calling convention.
pub(crate) fn call_f64(b: &mut FunctionBuilder<'_>, f: usize, args: &[Value]) -> Value {
    let mut sig = Signature::new(b.func.signature.call_conv);
    sig.params.extend(args.iter().map(|_| AbiParam::new(F64)));
    sig.returns.push(AbiParam::new(F64));
    let sref = b.import_signature(sig);
    let addr = b.ins().iconst(I64, f as i64);
    let call = b.ins().call_indirect(sref, addr, args);
    b.inst_results(call)[0]
}

/// One reduction on any dtype but f16/bf16.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnyReduceDesc {
    /// The loop nest (kind, kept and reduced dims with their strides).
    pub nest: ReduceDesc,
    /// Element type of input and output.
    pub dtype: DType,
    /// Elements folded into each output.
    pub count: usize,
}

impl AnyReduceDesc {
    /// From the input dtype and shape and the reduced axes.
    pub fn new(kind: ReduceKind, dtype: DType, shape: &[usize], axes: &[usize]) -> AnyReduceDesc {
        let count = axes
            .iter()
            .map(|&a| shape.get(a).copied().unwrap_or(1))
            .product();
        AnyReduceDesc {
            nest: ReduceDesc::new(kind, shape, axes),
            dtype,
            count,
        }
    }

    /// Why no kernel exists (`None`: supported).
    pub fn unsupported(&self) -> Option<String> {
        Dom::of(self.dtype).is_none().then(|| {
            format!(
                "no kernel for {:?} on {} yet",
                self.nest.kind,
                self.dtype.name()
            )
        })
    }

    /// The accumulator domain.
    fn acc(&self) -> Dom {
        match (Dom::of(self.dtype), self.nest.kind) {
            (
                Some(d @ Dom::Int { .. }),
                ReduceKind::Sum
                | ReduceKind::Prod
                | ReduceKind::L1
                | ReduceKind::SumSquare
                | ReduceKind::Max
                | ReduceKind::Min,
            ) => d,
            _ => Dom::F64,
        }
    }

    /// Emits the body for `(x, y)`.
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, x: Value, y: Value) {
        let es = self.dtype.size();
        self.outer(b, 0, x, y, es);
    }

    fn outer(&self, b: &mut FunctionBuilder<'_>, k: usize, x: Value, y: Value, es: usize) {
        let kept = &self.nest.kept;
        if k == kept.len() {
            self.one(b, x, y);
            return;
        }
        let (n, s) = kept[k];
        let out_stride: usize = kept[k + 1..].iter().map(|d| d.0).product();
        for_range(b, n, &mut |b, i| {
            let xp = offset(b, x, i, s * es);
            let yp = offset(b, y, i, out_stride * es);
            self.outer(b, k + 1, xp, yp, es);
        });
    }

    /// One output element from the reduced elements at `x`.
    fn one(&self, b: &mut FunctionBuilder<'_>, x: Value, y: Value) {
        let (acc_dom, kind) = (self.acc(), self.nest.kind);
        let Some(dom) = Dom::of(self.dtype) else {
            return;
        };
        let acc = b.declare_var(acc_dom.ty());
        // LogSumExp: first the shift (the largest element if finite, else 0).
        let shift = (kind == ReduceKind::LogSumExp).then(|| {
            let ninf = acc_dom.c(b, f64::NEG_INFINITY);
            b.def_var(acc, ninf);
            self.inner(b, 0, x, &mut |b, v| {
                let a = b.use_var(acc);
                let v = dom.to(b, v, acc_dom);
                let g = acc_dom.gt(b, v, a);
                let r = b.ins().select(g, v, a);
                b.def_var(acc, r);
            });
            let m = b.use_var(acc);
            let am = b.ins().fabs(m);
            let inf = acc_dom.c(b, f64::INFINITY);
            let finite = b.ins().fcmp(FloatCC::LessThan, am, inf);
            let zero = acc_dom.c(b, 0.0);
            b.ins().select(finite, m, zero)
        });
        let init_v = match (acc_dom, kind) {
            // Integer extremes as bits (64-bit ones do not round-trip through f64).
            (Dom::Int { unsigned }, ReduceKind::Max | ReduceKind::Min) => {
                let bits = int_extreme_bits(self.dtype, unsigned, kind == ReduceKind::Min);
                b.ins().iconst(I64, bits)
            }
            (_, ReduceKind::Max) => acc_dom.c(b, f64::NEG_INFINITY),
            (_, ReduceKind::Min) => acc_dom.c(b, f64::INFINITY),
            (_, ReduceKind::Prod) => acc_dom.c(b, 1.0),
            _ => acc_dom.c(b, 0.0),
        };
        b.def_var(acc, init_v);
        self.inner(b, 0, x, &mut |b, v| {
            let v = dom.to(b, v, acc_dom);
            let a = b.use_var(acc);
            let r = step(b, kind, acc_dom, a, v, shift);
            b.def_var(acc, r);
        });
        let s = b.use_var(acc);
        let r = match kind {
            ReduceKind::Mean => {
                let c = acc_dom.c(b, self.count as f64);
                b.ins().fdiv(s, c)
            }
            ReduceKind::L2 => b.ins().sqrt(s),
            ReduceKind::LogSum => call_f64(
                b,
                (arenac_reduce_ln as extern "C" fn(f64) -> f64) as usize,
                &[s],
            ),
            ReduceKind::LogSumExp => {
                let l = call_f64(
                    b,
                    (arenac_reduce_ln as extern "C" fn(f64) -> f64) as usize,
                    &[s],
                );
                let m = shift.unwrap_or(l);
                b.ins().fadd(m, l)
            }
            _ => s,
        };
        let r = acc_dom.to(b, r, dom);
        store(b, self.dtype, r, y);
    }

    /// Calls `f` with every reduced element (in its dtype's domain), in input order.
    fn inner(
        &self,
        b: &mut FunctionBuilder<'_>,
        k: usize,
        x: Value,
        f: &mut dyn FnMut(&mut FunctionBuilder<'_>, Value),
    ) {
        let red = &self.nest.reduced;
        if k == red.len() {
            let v = load(b, self.dtype, x);
            f(b, v);
            return;
        }
        let (n, s) = red[k];
        let es = self.dtype.size();
        for_range(b, n, &mut |b, i| {
            let xp = offset(b, x, i, s * es);
            self.inner(b, k + 1, xp, f);
        });
    }
}

/// The accumulation of `v` into `a`.
fn step(
    b: &mut FunctionBuilder<'_>,
    kind: ReduceKind,
    dom: Dom,
    a: Value,
    v: Value,
    shift: Option<Value>,
) -> Value {
    let float = dom.ty() != I64;
    let add = |b: &mut FunctionBuilder<'_>, p: Value, q: Value| {
        if float {
            b.ins().fadd(p, q)
        } else {
            b.ins().iadd(p, q)
        }
    };
    let mul = |b: &mut FunctionBuilder<'_>, p: Value, q: Value| {
        if float {
            b.ins().fmul(p, q)
        } else {
            b.ins().imul(p, q)
        }
    };
    match kind {
        ReduceKind::Max | ReduceKind::Min => {
            // Take v when it is better, or a NaN (NaN propagates, like numpy).
            let better = if kind == ReduceKind::Max {
                dom.gt(b, v, a)
            } else {
                dom.gt(b, a, v)
            };
            let nan = dom.nan(b, v);
            let take = Dom::or(b, better, nan);
            b.ins().select(take, v, a)
        }
        ReduceKind::Prod => mul(b, a, v),
        ReduceKind::L1 => {
            let abs = match dom {
                Dom::Int { unsigned: true } => v,
                Dom::Int { unsigned: false } => {
                    let n = b.ins().ineg(v);
                    let neg = b.ins().icmp_imm_s(IntCC::SignedLessThan, v, 0);
                    b.ins().select(neg, n, v)
                }
                _ => b.ins().fabs(v),
            };
            add(b, a, abs)
        }
        ReduceKind::L2 | ReduceKind::SumSquare => {
            let sq = mul(b, v, v);
            add(b, a, sq)
        }
        ReduceKind::LogSumExp => {
            let m = shift.unwrap_or(v);
            let d = b.ins().fsub(v, m);
            let e = call_f64(
                b,
                (arenac_reduce_exp as extern "C" fn(f64) -> f64) as usize,
                &[d],
            );
            b.ins().fadd(a, e)
        }
        ReduceKind::Sum | ReduceKind::Mean | ReduceKind::LogSum => add(b, a, v),
    }
}

/// Lowest or highest value of an integer (or bool) dtype, in the i64 domain (u64's highest
/// is all ones).
fn int_extreme_bits(dt: DType, unsigned: bool, highest: bool) -> i64 {
    let (lo, hi): (i64, i64) = match dt {
        DType::I8 => (i8::MIN.into(), i8::MAX.into()),
        DType::I16 => (i16::MIN.into(), i16::MAX.into()),
        DType::I32 => (i32::MIN.into(), i32::MAX.into()),
        DType::U8 => (0, u8::MAX.into()),
        DType::U16 => (0, u16::MAX.into()),
        DType::U32 => (0, u32::MAX.into()),
        DType::Bool => (0, 1),
        _ if unsigned => (0, -1),
        _ => (i64::MIN, i64::MAX),
    };
    if highest { hi } else { lo }
}
