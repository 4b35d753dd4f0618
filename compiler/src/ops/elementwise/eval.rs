//! Reference evaluation of the elementwise ops: floats in `f64`, integers and bools in `i64`
//! (`u64` compared and divided as unsigned).

use std::cmp::Ordering;

use super::{BinaryOp, UnaryOp, VariadicOp, erf, infer, math_f64, name, sign_i64};
use crate::error::OpError;
use crate::ir::lowp::{self, CastMode};
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, TensorType, checked_numel};
use crate::ops::Op;
use crate::ops::util::{broadcast_index_map, wrong_family};

/// Reference evaluation.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let out = infer(op, &types)?
        .into_iter()
        .next()
        .ok_or_else(|| OpError::Unsupported("elementwise inference gave no output".into()))?;
    let result = match op {
        Op::Unary(u) => eval_unary(*u, inputs[0]),
        Op::ClipDynamic { min, max } => {
            let lo = min.then(|| inputs[1]);
            let hi = max.then(|| inputs[1 + usize::from(*min)]);
            eval_clip(inputs[0], lo, hi)
        }
        Op::Binary(b) => eval_binary(*b, inputs[0], inputs[1], out)?,
        Op::Variadic(v) => eval_variadic(*v, inputs, out),
        Op::Where => eval_where(inputs, out),
        // A cast to the same type is the identity (NaN payloads and all).
        Op::Cast { to, .. } if *to == inputs[0].dtype() => inputs[0].clone(),
        Op::Cast {
            to: DType::BF16, ..
        } => cast_to_bf16(inputs[0], out),
        Op::Cast { to, mode } if to.is_storage() => cast_to_storage(inputs[0], *to, *mode, out)?,
        Op::Cast { to, .. } => {
            let x = inputs[0];
            if x.dtype().is_float() {
                Tensor::from_f64(*to, out.shape, &x.to_f64_vec())
            } else if x.dtype() == DType::U64 && to.is_float() {
                // The i64 domain wraps u64 values above i64::MAX; convert them as unsigned.
                let vals: Vec<f64> = x.to_i64_vec().iter().map(|&v| v as u64 as f64).collect();
                Tensor::from_f64(*to, out.shape, &vals)
            } else {
                Tensor::from_i64(*to, out.shape, &x.to_i64_vec())
            }
        }
        _ => return Err(wrong_family(op, "elementwise")),
    };
    Ok(vec![result])
}

/// Cast to a storage type (8-/4-bit floats, 4-/2-bit integers) like onnx's reference
/// (`crate::ir::lowp`): floats (and u64, as unsigned) through f64 then f32, other integers
/// exactly; integer targets wrap integers and truncate floats.
fn cast_to_storage(
    x: &Tensor,
    to: DType,
    mode: CastMode,
    out: TensorType,
) -> Result<Tensor, OpError> {
    let codes: Vec<u8> = if x.dtype().is_float() {
        x.to_f64_vec()
            .iter()
            .map(|&v| lowp::encode_f64(to, v, mode))
            .collect()
    } else if x.dtype() == DType::U64 && to.is_float() {
        x.to_i64_vec()
            .iter()
            .map(|&v| lowp::encode_f64(to, v as u64 as f64, mode))
            .collect()
    } else {
        x.to_i64_vec()
            .iter()
            .map(|&v| lowp::encode_i64(to, v, mode))
            .collect()
    };
    Tensor::from_bytes(to, out.shape, codes.into())
        .map_err(|e| OpError::Unsupported(format!("Cast to {to}: {e}")))
}

/// Cast to bf16 like onnx's reference (ml_dtypes): the value is rounded to f32 first, then
/// to bf16, each to nearest even. (`half`'s own `bf16::from_f64` truncates the low 32 bits of
/// the f64 first, which can break a tie the wrong way.)
fn cast_to_bf16(x: &Tensor, out: TensorType) -> Tensor {
    let src: Vec<f64> = if x.dtype() == DType::U64 {
        x.to_i64_vec().iter().map(|&v| v as u64 as f64).collect()
    } else if x.dtype().is_float() {
        x.to_f64_vec()
    } else {
        x.to_i64_vec().iter().map(|&v| v as f64).collect()
    };
    // Every bf16 value is exact in f64, so `from_f64` below stores it unchanged.
    let vals: Vec<f64> = src
        .iter()
        .map(|&v| half::bf16::from_f32(v as f32).to_f64())
        .collect();
    Tensor::from_f64(DType::BF16, out.shape, &vals)
}

/// Orders two values of integer dtype `dtype` held in the `i64` domain (`u64` as unsigned).
fn int_cmp(dtype: DType, a: i64, b: i64) -> Ordering {
    if dtype == DType::U64 {
        (a as u64).cmp(&(b as u64))
    } else {
        a.cmp(&b)
    }
}

/// max/min propagating NaN, like numpy's `maximum`/`minimum`.
fn fmax(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

fn fmin(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

fn eval_unary(u: UnaryOp, x: &Tensor) -> Tensor {
    let dtype = x.dtype();
    let shape = x.shape().to_vec();
    if !dtype.is_float() {
        let unsigned = matches!(dtype, DType::U8 | DType::U16 | DType::U32 | DType::U64);
        // Bounds of an integer Clip came from a tensor of the same dtype.
        let bound = |v: f64| {
            if dtype == DType::U64 {
                v as u64 as i64
            } else {
                v as i64
            }
        };
        let vals: Vec<i64> = x
            .to_i64_vec()
            .into_iter()
            .map(|v| match u {
                // Bool holds 0 or 1; the store narrows `!v` to the element's width.
                UnaryOp::Not => v ^ 1,
                UnaryOp::BitwiseNot => !v,
                UnaryOp::Relu | UnaryOp::Abs if unsigned => v,
                UnaryOp::Relu => v.max(0),
                UnaryOp::Abs => v.wrapping_abs(),
                UnaryOp::Neg => v.wrapping_neg(),
                UnaryOp::Math(_) => sign_i64(v, dtype == DType::U64),
                UnaryOp::Clip { min, max } => {
                    let mut r = v;
                    if let Some(lo) = min.map(bound)
                        && int_cmp(dtype, r, lo) == Ordering::Less
                    {
                        r = lo;
                    }
                    if let Some(hi) = max.map(bound)
                        && int_cmp(dtype, r, hi) == Ordering::Greater
                    {
                        r = hi;
                    }
                    r
                }
                // infer admits only the ops above for integers.
                _ => v,
            })
            .collect();
        return Tensor::from_i64(dtype, shape, &vals);
    }
    let vals: Vec<f64> = x
        .to_f64_vec()
        .into_iter()
        .map(|v| unary_f64(u, v))
        .collect();
    if matches!(u, UnaryOp::Math(m) if m.is_predicate()) {
        let bits: Vec<i64> = vals.iter().map(|&v| i64::from(v != 0.0)).collect();
        return Tensor::from_i64(DType::Bool, shape, &bits);
    }
    Tensor::from_f64(dtype, shape, &vals)
}

/// Clip with bounds given as one-element tensors of x's dtype: floats through the constant
/// Clip's own rule (NaN propagates); integers compared exactly in their own order (u64 as
/// unsigned), without the round trip through f64 of an attribute bound.
fn eval_clip(x: &Tensor, lo: Option<&Tensor>, hi: Option<&Tensor>) -> Tensor {
    let dtype = x.dtype();
    if dtype.is_float() {
        let first = |t: Option<&Tensor>| t.and_then(|t| t.to_f64_vec().first().copied());
        let clip = UnaryOp::Clip {
            min: first(lo),
            max: first(hi),
        };
        return eval_unary(clip, x);
    }
    let first = |t: Option<&Tensor>| t.and_then(|t| t.to_i64_vec().first().copied());
    let (lo, hi) = (first(lo), first(hi));
    let vals: Vec<i64> = x
        .to_i64_vec()
        .into_iter()
        .map(|v| {
            let mut r = v;
            if let Some(lo) = lo
                && int_cmp(dtype, r, lo) == Ordering::Less
            {
                r = lo;
            }
            if let Some(hi) = hi
                && int_cmp(dtype, r, hi) == Ordering::Greater
            {
                r = hi;
            }
            r
        })
        .collect();
    Tensor::from_i64(dtype, x.shape().to_vec(), &vals)
}

pub(crate) fn unary_f64(u: UnaryOp, x: f64) -> f64 {
    let hard_sigmoid = |x: f64, alpha: f64, beta: f64| fmax(0.0, fmin(1.0, alpha * x + beta));
    match u {
        // infer admits Not and BitwiseNot for bool and integers only.
        UnaryOp::Not | UnaryOp::BitwiseNot => x,
        UnaryOp::Relu => fmax(x, 0.0),
        UnaryOp::LeakyRelu { alpha } => {
            if x < 0.0 {
                f64::from(alpha) * x
            } else {
                x
            }
        }
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Erf => erf(x),
        UnaryOp::Gelu { tanh_approx: false } => 0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2)),
        UnaryOp::Gelu { tanh_approx: true } => {
            let k = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh())
        }
        UnaryOp::HardSigmoid { alpha, beta } => hard_sigmoid(x, f64::from(alpha), f64::from(beta)),
        UnaryOp::HardSwish => x * hard_sigmoid(x, 1.0 / 6.0, 0.5),
        UnaryOp::Clip { min, max } => {
            let mut r = x;
            if let Some(lo) = min {
                r = fmax(r, lo);
            }
            if let Some(hi) = max {
                r = fmin(r, hi);
            }
            r
        }
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Reciprocal => 1.0 / x,
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Math(m) => math_f64(m, x),
    }
}

/// numpy's `mod` on floats: C fmod moved to the sign of `q` (a zero takes `q`'s sign), so
/// `mod(x, ±inf)` is `x` or `q`, and an infinite `p` or a zero `q` give NaN.
fn floored_mod(p: f64, q: f64) -> f64 {
    let r = p % q;
    if r == 0.0 {
        0.0f64.copysign(q)
    } else if (r < 0.0) != (q < 0.0) {
        r + q
    } else {
        r
    }
}

fn bool_i64(b: bool) -> i64 {
    i64::from(b)
}

fn eval_binary(b: BinaryOp, x: &Tensor, y: &Tensor, out: TensorType) -> Result<Tensor, OpError> {
    let mx = broadcast_index_map(x.shape(), &out.shape);
    let my = broadcast_index_map(y.shape(), &out.shape);
    let dtype = x.dtype();
    if dtype.is_float() {
        let (xs, ys) = (x.to_f64_vec(), y.to_f64_vec());
        let pairs = mx.iter().zip(&my).map(|(&i, &j)| (xs[i], ys[j]));
        if b.is_comparison() {
            let vals: Vec<i64> = pairs
                .map(|(p, q)| match b {
                    BinaryOp::Equal => bool_i64(p == q),
                    BinaryOp::Less => bool_i64(p < q),
                    BinaryOp::GreaterOrEqual => bool_i64(p >= q),
                    BinaryOp::LessOrEqual => bool_i64(p <= q),
                    _ => bool_i64(p > q),
                })
                .collect();
            return Ok(Tensor::from_i64(DType::Bool, out.shape, &vals));
        }
        let vals: Vec<f64> = pairs
            .map(|(p, q)| match b {
                BinaryOp::Add => p + q,
                BinaryOp::Sub => p - q,
                BinaryOp::Mul => p * q,
                BinaryOp::Div => p / q,
                BinaryOp::Pow => p.powf(q),
                // Rust's `%` on floats is C's fmod.
                BinaryOp::Mod { fmod: true } => p % q,
                BinaryOp::Mod { fmod: false } => floored_mod(p, q),
                BinaryOp::PRelu => {
                    if p < 0.0 {
                        q * p
                    } else {
                        p
                    }
                }
                // Comparisons are above; infer admits the logical and bitwise ops for bool
                // and integers only.
                _ => 0.0,
            })
            .collect();
        return Ok(Tensor::from_f64(out.dtype, out.shape, &vals));
    }
    if b == BinaryOp::Pow && y.dtype().is_float() {
        // Integer base, float exponent: compute in f64, truncate toward zero.
        let (xs, ys) = (x.to_f64_vec(), y.to_f64_vec());
        let vals: Vec<f64> = mx
            .iter()
            .zip(&my)
            .map(|(&i, &j)| xs[i].powf(ys[j]).trunc())
            .collect();
        return Ok(Tensor::from_f64(out.dtype, out.shape, &vals));
    }
    let (xs, ys) = (x.to_i64_vec(), y.to_i64_vec());
    let mut vals = Vec::with_capacity(mx.len());
    for (&i, &j) in mx.iter().zip(&my) {
        vals.push(if b == BinaryOp::Pow {
            int_pow(xs[i], ys[j], y.dtype())?
        } else {
            binary_i64(b, dtype, xs[i], ys[j])?
        });
    }
    Ok(Tensor::from_i64(out.dtype, out.shape, &vals))
}

fn binary_i64(b: BinaryOp, dtype: DType, p: i64, q: i64) -> Result<i64, OpError> {
    let unsigned = dtype == DType::U64;
    let zero = || OpError::Unsupported(format!("integer {} by zero", name(&Op::Binary(b))));
    Ok(match b {
        BinaryOp::Add => p.wrapping_add(q),
        BinaryOp::Sub => p.wrapping_sub(q),
        BinaryOp::Mul => p.wrapping_mul(q),
        BinaryOp::Div => {
            if q == 0 {
                return Err(zero());
            }
            if unsigned {
                ((p as u64) / (q as u64)) as i64
            } else {
                p.wrapping_div(q)
            }
        }
        BinaryOp::Mod { fmod } => {
            if q == 0 {
                return Err(zero());
            }
            if unsigned {
                ((p as u64) % (q as u64)) as i64
            } else {
                let r = p.wrapping_rem(q);
                if !fmod && r != 0 && (r < 0) != (q < 0) {
                    r.wrapping_add(q)
                } else {
                    r
                }
            }
        }
        // eval_binary computes Pow with int_pow, which needs the exponent's dtype.
        BinaryOp::Pow => int_pow(p, q, dtype)?,
        BinaryOp::PRelu => {
            if !unsigned && p < 0 {
                q.wrapping_mul(p)
            } else {
                p
            }
        }
        BinaryOp::Equal => bool_i64(p == q),
        BinaryOp::Less => bool_i64(int_cmp(dtype, p, q) == Ordering::Less),
        BinaryOp::Greater => bool_i64(int_cmp(dtype, p, q) == Ordering::Greater),
        BinaryOp::GreaterOrEqual => bool_i64(int_cmp(dtype, p, q) != Ordering::Less),
        BinaryOp::LessOrEqual => bool_i64(int_cmp(dtype, p, q) != Ordering::Greater),
        // Bools are 0 or 1: the bitwise forms are the logical ones.
        BinaryOp::And | BinaryOp::BitwiseAnd => p & q,
        BinaryOp::Or | BinaryOp::BitwiseOr => p | q,
        BinaryOp::Xor | BinaryOp::BitwiseXor => p ^ q,
        BinaryOp::BitShift { left } => bit_shift(dtype, left, p, q),
    })
}

/// `p << q` or `p >> q` on `dtype` (values in the i64 domain: sign- or zero-extended). A
/// shift outside `0..bits` gives 0, or -1 for a negative `p` shifted right (onnx's
/// reference); signed right shifts are arithmetic.
fn bit_shift(dtype: DType, left: bool, p: i64, q: i64) -> i64 {
    let bits = 8 * dtype.size() as u64;
    // A negative amount of a signed dtype is huge as u64, like one >= bits.
    let in_range = (q as u64) < bits;
    match (left, in_range) {
        (true, true) => p.wrapping_shl(q as u32),
        (true, false) => 0,
        (false, _) if dtype == DType::U64 => {
            if in_range {
                ((p as u64) >> q) as i64
            } else {
                0
            }
        }
        // Sign- or zero-extended to i64: an arithmetic shift by up to 63 is exact.
        (false, _) => p >> (if in_range { q } else { 63 }),
    }
}

/// Integer `base^e` with wrapping products (numpy's integer power); a negative `e` (of a signed
/// `exp_dtype`) gives `1/base^|e|` truncated. `0` to a negative power is an error.
pub(crate) fn int_pow(base: i64, e: i64, exp_dtype: DType) -> Result<i64, OpError> {
    if e < 0 && exp_dtype != DType::U64 {
        return match base {
            0 => Err(OpError::Unsupported(
                "integer Pow of 0 to a negative power (division by zero)".into(),
            )),
            1 => Ok(1),
            -1 => Ok(if e % 2 == 0 { 1 } else { -1 }),
            _ => Ok(0),
        };
    }
    let mut e = e as u64;
    let (mut acc, mut sq) = (1i64, base);
    while e > 0 {
        if e & 1 == 1 {
            acc = acc.wrapping_mul(sq);
        }
        sq = sq.wrapping_mul(sq);
        e >>= 1;
    }
    Ok(acc)
}

fn eval_variadic(v: VariadicOp, inputs: &[&Tensor], out: TensorType) -> Tensor {
    let maps: Vec<Vec<usize>> = inputs
        .iter()
        .map(|t| broadcast_index_map(t.shape(), &out.shape))
        .collect();
    let n = checked_numel(&out.shape).unwrap_or(0);
    if out.dtype.is_float() {
        let data: Vec<Vec<f64>> = inputs.iter().map(|t| t.to_f64_vec()).collect();
        let vals: Vec<f64> = (0..n)
            .map(|k| {
                let mut it = data.iter().zip(&maps).map(|(d, m)| d[m[k]]);
                let first = it.next().unwrap_or(0.0);
                let r = it.fold(first, |acc, x| match v {
                    VariadicOp::Sum | VariadicOp::Mean => acc + x,
                    VariadicOp::Max => fmax(acc, x),
                    VariadicOp::Min => fmin(acc, x),
                });
                if v == VariadicOp::Mean {
                    r / data.len() as f64
                } else {
                    r
                }
            })
            .collect();
        return Tensor::from_f64(out.dtype, out.shape, &vals);
    }
    let data: Vec<Vec<i64>> = inputs.iter().map(|t| t.to_i64_vec()).collect();
    let dtype = out.dtype;
    let vals: Vec<i64> = (0..n)
        .map(|k| {
            let mut it = data.iter().zip(&maps).map(|(d, m)| d[m[k]]);
            let first = it.next().unwrap_or(0);
            it.fold(first, |acc, x| {
                let take_x = match v {
                    VariadicOp::Max => int_cmp(dtype, x, acc) == Ordering::Greater,
                    VariadicOp::Min => int_cmp(dtype, x, acc) == Ordering::Less,
                    // infer admits only Max and Min for integers.
                    VariadicOp::Sum | VariadicOp::Mean => false,
                };
                if take_x { x } else { acc }
            })
        })
        .collect();
    Tensor::from_i64(dtype, out.shape, &vals)
}

fn eval_where(inputs: &[&Tensor], out: TensorType) -> Tensor {
    let (c, x, y) = (inputs[0], inputs[1], inputs[2]);
    let mc = broadcast_index_map(c.shape(), &out.shape);
    let mx = broadcast_index_map(x.shape(), &out.shape);
    let my = broadcast_index_map(y.shape(), &out.shape);
    let cs = c.to_i64_vec();
    let pick = |k: usize| cs[mc[k]] != 0;
    if out.dtype.is_float() {
        let (xs, ys) = (x.to_f64_vec(), y.to_f64_vec());
        let vals: Vec<f64> = (0..mc.len())
            .map(|k| if pick(k) { xs[mx[k]] } else { ys[my[k]] })
            .collect();
        Tensor::from_f64(out.dtype, out.shape, &vals)
    } else {
        let (xs, ys) = (x.to_i64_vec(), y.to_i64_vec());
        let vals: Vec<i64> = (0..mc.len())
            .map(|k| if pick(k) { xs[mx[k]] } else { ys[my[k]] })
            .collect();
        Tensor::from_i64(out.dtype, out.shape, &vals)
    }
}
