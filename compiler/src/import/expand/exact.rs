//! Exact integer products (Conv, MatMul) on arenac's f32 kernels, for ConvInteger,
//! QLinearConv and QLinearMatMul.
//!
//! The operands arrive zero-point-shifted as exact small integers in f32: `|a| <= bound_a`,
//! `|b| <= bound_b` (at most 255 each for 8-bit types). A sum of `K` products is exact in f32,
//! in any order (the GEMM core's blocking and FMAs included), when every partial sum is an
//! integer below 2^24: `K * bound_a * bound_b <= 2^24`. The bounds are measured, not assumed
//! (see [`shift_bound`]): constant weights and zero points give their real range, so a
//! symmetric int8 weight (`|w| <= 127`) against uint8 activations allows K = 518 in one
//! product. Longer reductions are made exact two ways, whichever needs fewer products:
//!
//! - split `a` into nibbles: `a = 16 a_hi + a_lo` with `a_hi = floor(a / 16)` in [-16, 15]
//!   and `a_lo` in [0, 15] (both exact in f32), each product then bounded by `16 * bound_b`
//!   (K up to 8,256 against |w| <= 127), combined in int32 as `16 p_hi + p_lo`;
//! - split the reduction into chunks (channels of each group for a Conv, columns of `a` and
//!   rows of `b` for a MatMul), each product cast to int32 and summed there.
//!
//! Both together when needed. The int32 sums wrap on overflow, as onnx's reference does.

use arenac_proto::AttributeProto;

use super::{Emitter, int_attr, unsupported};
use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::DType;

/// The largest integer every partial sum of an f32 reduction may reach and stay exact.
const EXACT: u64 = 1 << 24;

/// The most products an expansion emits.
const MAX_PRODUCTS: usize = 512;

/// The largest `|v - z|` for `v` a value of an operand of type `dt` and `z` its zero point:
/// from the constant values when known (else the type's range), and the constant zero point
/// when known (else the type's range; 0 when absent).
pub(super) fn shift_bound(
    dt: DType,
    values: Option<&Tensor>,
    zero: Option<(DType, Option<&Tensor>)>,
) -> u64 {
    let range = |dt: DType| match dt {
        DType::I8 => (-128i64, 127i64),
        _ => (0, 255),
    };
    let span = |t: Option<&Tensor>, dt: DType| match t.map(|t| t.to_i64_vec()) {
        Some(v) if !v.is_empty() => {
            let lo = v.iter().copied().min().unwrap_or(0);
            (lo, v.iter().copied().max().unwrap_or(0))
        }
        _ => range(dt),
    };
    let (vmin, vmax) = span(values, dt);
    let (zmin, zmax) = match zero {
        Some((zdt, z)) => span(z, zdt),
        None => (0, 0),
    };
    (vmax - zmin).max(zmax - vmin).max(0) as u64
}

/// The product being made exact.
pub(super) enum Product {
    /// `MatMul(a, b)`; `b_rank` picks the axis its rows lie along.
    MatMul {
        /// Rank of `b` (1: a vector).
        b_rank: usize,
    },
    /// `Conv(a, b) {attrs}` on `a` of shape `x_shape` with `group` groups.
    Conv {
        /// The node's Conv attributes, passed on.
        attrs: Vec<AttributeProto>,
        /// Shape of the input `[N, C, spatial...]`.
        x_shape: Vec<usize>,
        /// Groups.
        group: usize,
    },
}

/// An exact product of shifted operands `a` and `b` (f32 values of exact integers).
pub(super) struct Exact<'a> {
    /// The data operand (split into nibbles when that helps).
    pub a: &'a str,
    /// Its bound.
    pub a_bound: u64,
    /// The other operand (weights).
    pub b: &'a str,
    /// Its bound.
    pub b_bound: u64,
    /// Reduction units (MatMul: K; Conv: input channels per group).
    pub units: usize,
    /// Products per unit (MatMul: 1; Conv: kernel taps).
    pub per_unit: usize,
    /// What the product is.
    pub product: Product,
}

/// How many parts and chunks (and units per chunk) a split takes.
fn plan(x: &Exact<'_>) -> Result<(bool, usize), OpError> {
    let per_unit = x.per_unit.max(1) as u64;
    let mut best: Option<(usize, bool, usize)> = None;
    for nibbles in [false, true] {
        let a = if nibbles {
            x.a_bound.min(16)
        } else {
            x.a_bound
        };
        let bound = a.saturating_mul(x.b_bound);
        // A zero bound (an operand equal to its zero point) makes every product 0.
        let max_units = EXACT.checked_div(bound).map_or(x.units.max(1), |q| {
            usize::try_from(q / per_unit).unwrap_or(usize::MAX)
        });
        if max_units == 0 {
            continue;
        }
        let chunk = max_units.min(x.units.max(1));
        let cost = x.units.max(1).div_ceil(chunk) * if nibbles { 2 } else { 1 };
        if best.is_none_or(|(c, _, _)| cost < c) {
            best = Some((cost, nibbles, chunk));
        }
    }
    match best {
        Some((cost, nibbles, chunk)) if cost <= MAX_PRODUCTS => Ok((nibbles, chunk)),
        Some((cost, ..)) => Err(unsupported(format!(
            "an exact reduction of {} x {} integer products needs {cost} f32 products, more \
             than the {MAX_PRODUCTS} this expansion makes",
            x.units, x.per_unit
        ))),
        None => Err(unsupported(format!(
            "a kernel of {} taps with operands up to {} and {} cannot be summed exactly in f32",
            x.per_unit, x.a_bound, x.b_bound
        ))),
    }
}

impl Exact<'_> {
    /// Emits the product; returns the int32 result, written to `out` when given.
    pub(super) fn emit(&self, e: &mut Emitter, out: Option<&str>) -> Result<String, OpError> {
        let (nibbles, chunk) = plan(self)?;
        let parts: Vec<(String, i64)> = if nibbles && self.a_bound > 16 {
            let sixteen = e.scalar(DType::F32, 16.0);
            let q = e.op("Div", &[self.a, &sixteen], vec![]);
            let hi = e.op("Floor", &[&q], vec![]);
            let hi16 = e.op("Mul", &[&hi, &sixteen], vec![]);
            let lo = e.op("Sub", &[self.a, &hi16], vec![]);
            vec![(hi, 16), (lo, 1)]
        } else {
            vec![(self.a.to_string(), 1)]
        };
        let units = self.units.max(1);
        let chunks = units.div_ceil(chunk);
        let to_i32 = || vec![int_attr("to", i64::from(DType::I32.to_onnx()))];
        let mut terms = Vec::new();
        for c in 0..chunks {
            let (lo, hi) = (c * chunk, ((c + 1) * chunk).min(units));
            let b = if chunks == 1 {
                self.b.to_string()
            } else {
                self.slice_b(e, lo, hi)
            };
            for (a, scale) in &parts {
                let a = if chunks == 1 {
                    a.clone()
                } else {
                    self.slice_a(e, a, lo, hi)
                };
                let p = match &self.product {
                    Product::MatMul { .. } => e.op("MatMul", &[&a, &b], vec![]),
                    Product::Conv { attrs, .. } => e.op("Conv", &[&a, &b], attrs.clone()),
                };
                let last = terms.is_empty() && chunks == 1 && parts.len() == 1;
                let p = if last {
                    e.op_maybe_to("Cast", &[&p], to_i32(), out)
                } else {
                    e.op("Cast", &[&p], to_i32())
                };
                terms.push(if *scale == 1 {
                    p
                } else {
                    let s = e.scalar(DType::I32, *scale as f64);
                    e.op("Mul", &[&p, &s], vec![])
                });
            }
        }
        let n = terms.len();
        let mut sum = terms[0].clone();
        for (i, t) in terms.iter().enumerate().skip(1) {
            let o = if i + 1 == n { out } else { None };
            sum = e.op_maybe_to("Add", &[&sum, t], vec![], o);
        }
        Ok(sum)
    }

    /// Units `lo..hi` of `a`.
    fn slice_a(&self, e: &mut Emitter, a: &str, lo: usize, hi: usize) -> String {
        let (lo, hi) = (lo as i64, hi as i64);
        match &self.product {
            Product::MatMul { .. } => e.slice(a, -1, lo, hi, 1),
            Product::Conv { x_shape, group, .. } if *group > 1 => {
                // [N, G*cg, sp...] -> [N, G, cg, sp...], channels lo..hi of each group, back.
                let mut split = vec![x_shape[0], *group, x_shape[1] / group];
                split.extend_from_slice(&x_shape[2..]);
                let r = e.reshape(a, &split, None);
                let s = e.slice(&r, 2, lo, hi, 1);
                let mut back = vec![x_shape[0], group * (hi - lo) as usize];
                back.extend_from_slice(&x_shape[2..]);
                e.reshape(&s, &back, None)
            }
            Product::Conv { .. } => e.slice(a, 1, lo, hi, 1),
        }
    }

    /// Units `lo..hi` of `b`.
    fn slice_b(&self, e: &mut Emitter, lo: usize, hi: usize) -> String {
        let (lo, hi) = (lo as i64, hi as i64);
        match &self.product {
            Product::MatMul { b_rank } => {
                e.slice(self.b, if *b_rank == 1 { 0 } else { -2 }, lo, hi, 1)
            }
            Product::Conv { .. } => e.slice(self.b, 1, lo, hi, 1),
        }
    }
}
