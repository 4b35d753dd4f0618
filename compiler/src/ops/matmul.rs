//! Gemm and MatMul.
//!
//! Gemm: `Y = alpha * A' * B' + beta * C` with `A'`/`B'` optionally transposed rank-2
//! matrices and C unidirectionally broadcast to `[M, N]` (C optional since opset 11).
//! MatMul follows numpy `matmul`: a 1-d operand is promoted to a matrix (`[K]` → `[1, K]` on
//! the left, `[K, 1]` on the right) and the added dim is removed from the result; batch dims
//! broadcast.

use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, TensorType};
use crate::ops::conv::{check_dtype, check_float_operands, checked_out};
use crate::ops::ctx::NodeCtx;
use crate::ops::util::{broadcast_index_map, broadcast_shapes, fmt_f32, wrong_family};
use crate::ops::{MAX_OPSET, MIN_OPSET, Op, OpDef};

/// Gemm attributes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmAttrs {
    /// Scale of A*B.
    pub alpha: f32,
    /// Scale of C.
    pub beta: f32,
    /// A is transposed.
    pub trans_a: bool,
    /// B is transposed.
    pub trans_b: bool,
}

/// Converters of this family.
pub const DEFS: &[OpDef] = &[
    OpDef {
        op_type: "Gemm",
        since: MIN_OPSET,
        until: MAX_OPSET,
        convert: convert_gemm,
    },
    OpDef {
        op_type: "MatMul",
        since: MIN_OPSET,
        until: MAX_OPSET,
        convert: convert_matmul,
    },
];

/// MatMul's dtypes.
const MATMUL_DTYPES: &[DType] = &[
    DType::F32,
    DType::F64,
    DType::F16,
    DType::BF16,
    DType::I32,
    DType::I64,
];

fn read_flag(ctx: &NodeCtx<'_>, name: &str) -> Result<bool, OpError> {
    match ctx.attr_int(name, 0)? {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(OpError::attr(name, format!("{v} is not 0 or 1"))),
    }
}

fn convert_gemm(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    // C became optional in opset 11.
    let min = if ctx.opset >= 11 { 2 } else { 3 };
    ctx.expect_inputs(min, 3)?;
    Ok(Op::Gemm(GemmAttrs {
        alpha: ctx.attr_float("alpha", 1.0)?,
        beta: ctx.attr_float("beta", 1.0)?,
        trans_a: read_flag(ctx, "transA")?,
        trans_b: read_flag(ctx, "transB")?,
    }))
}

fn convert_matmul(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(2, 2)?;
    Ok(Op::MatMul)
}

/// Printed op name.
pub fn name(op: &Op) -> &'static str {
    match op {
        Op::Gemm(_) => "Gemm",
        Op::MatMul => "MatMul",
        _ => "?",
    }
}

/// Gemm's `(M, K, N)`, checking dtypes and shapes.
fn gemm_dims(a: &GemmAttrs, inputs: &[TensorType]) -> Result<(usize, usize, usize), OpError> {
    check_float_operands(inputs)?;
    let shapes: Vec<&[usize]> = inputs.iter().map(|t| &t.shape[..]).collect();
    let (sa, sb) = (shapes[0], shapes[1]);
    if sa.len() != 2 || sb.len() != 2 {
        return Err(OpError::shape("Gemm's A and B must be rank 2", &shapes));
    }
    let (m, ka) = if a.trans_a {
        (sa[1], sa[0])
    } else {
        (sa[0], sa[1])
    };
    let (kb, n) = if a.trans_b {
        (sb[1], sb[0])
    } else {
        (sb[0], sb[1])
    };
    if ka != kb {
        return Err(OpError::shape(
            format!("inner dims differ: A' is [{m},{ka}], B' is [{kb},{n}]"),
            &shapes,
        ));
    }
    if let Some(sc) = shapes.get(2) {
        let target = [m, n];
        let ok = sc.len() <= 2
            && sc
                .iter()
                .rev()
                .zip(target.iter().rev())
                .all(|(&c, &t)| c == t || c == 1);
        if !ok {
            return Err(OpError::shape(
                format!("C does not broadcast to [{m},{n}]"),
                &shapes,
            ));
        }
    }
    Ok((m, ka, n))
}

/// MatMul's output shape, checking dtypes and shapes.
fn matmul_shape(inputs: &[TensorType]) -> Result<Vec<usize>, OpError> {
    if inputs.len() != 2 {
        return Err(OpError::Arity {
            expected: "2".into(),
            actual: inputs.len(),
        });
    }
    let dt = inputs[0].dtype;
    check_dtype(0, dt, MATMUL_DTYPES)?;
    check_dtype(1, inputs[1].dtype, &[dt])?;
    let (sa, sb) = (&inputs[0].shape[..], &inputs[1].shape[..]);
    if sa.is_empty() || sb.is_empty() {
        return Err(OpError::shape(
            "MatMul operands must have rank >= 1",
            &[sa, sb],
        ));
    }
    let (a2, b2) = (promote_a(sa), promote_b(sb));
    let (ra, rb) = (a2.len(), b2.len());
    let (m, ka, kb, n) = (a2[ra - 2], a2[ra - 1], b2[rb - 2], b2[rb - 1]);
    if ka != kb {
        return Err(OpError::shape(
            format!("contraction dims differ: {ka} and {kb}"),
            &[sa, sb],
        ));
    }
    let mut out = broadcast_shapes(&[&a2[..ra - 2], &b2[..rb - 2]])
        .map_err(|_| OpError::shape("batch dims do not broadcast", &[sa, sb]))?;
    if sa.len() > 1 {
        out.push(m);
    }
    if sb.len() > 1 {
        out.push(n);
    }
    checked_out(out)
}

fn promote_a(s: &[usize]) -> Vec<usize> {
    if s.len() == 1 {
        vec![1, s[0]]
    } else {
        s.to_vec()
    }
}

fn promote_b(s: &[usize]) -> Vec<usize> {
    if s.len() == 1 {
        vec![s[0], 1]
    } else {
        s.to_vec()
    }
}

/// Shape and type inference.
pub fn infer(op: &Op, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    match op {
        Op::Gemm(a) => {
            let (m, _, n) = gemm_dims(a, inputs)?;
            Ok(vec![TensorType::new(
                inputs[0].dtype,
                checked_out(vec![m, n])?,
            )])
        }
        Op::MatMul => Ok(vec![TensorType::new(
            inputs.first().map_or(DType::F32, |t| t.dtype),
            matmul_shape(inputs)?,
        )]),
        _ => Err(wrong_family(op, "matmul")),
    }
}

fn eval_gemm(a: &GemmAttrs, inputs: &[&Tensor]) -> Result<Tensor, OpError> {
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let (m, k, n) = gemm_dims(a, &types)?;
    let av = inputs[0].to_f64_vec();
    let bv = inputs[1].to_f64_vec();
    // Element (i, j) of A' and B'.
    let a_at = |i: usize, p: usize| {
        if a.trans_a {
            av[p * m + i]
        } else {
            av[i * k + p]
        }
    };
    let b_at = |p: usize, j: usize| {
        if a.trans_b {
            bv[j * k + p]
        } else {
            bv[p * n + j]
        }
    };
    let c = inputs.get(2).map(|c| {
        let map = broadcast_index_map(c.shape(), &[m, n]);
        let cv = c.to_f64_vec();
        map.into_iter().map(|i| cv[i]).collect::<Vec<f64>>()
    });
    let (alpha, beta) = (f64::from(a.alpha), f64::from(a.beta));
    let mut out = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0.0;
            for p in 0..k {
                acc += a_at(i, p) * b_at(p, j);
            }
            let mut y = alpha * acc;
            if let Some(c) = &c {
                y += beta * c[i * n + j];
            }
            out.push(y);
        }
    }
    Ok(Tensor::from_f64(types[0].dtype, vec![m, n], &out))
}

fn eval_matmul(inputs: &[&Tensor]) -> Result<Tensor, OpError> {
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let out_shape = matmul_shape(&types)?;
    let dtype = types[0].dtype;
    let (a2, b2) = (promote_a(inputs[0].shape()), promote_b(inputs[1].shape()));
    let (ra, rb) = (a2.len(), b2.len());
    let (m, k, n) = (a2[ra - 2], a2[ra - 1], b2[rb - 1]);
    let (ab, bb) = (&a2[..ra - 2], &b2[..rb - 2]);
    let batch = broadcast_shapes(&[ab, bb])?;
    let a_map = broadcast_index_map(ab, &batch);
    let b_map = broadcast_index_map(bb, &batch);
    let (mk, kn) = (m * k, k * n);
    if dtype.is_float() {
        let (av, bv) = (inputs[0].to_f64_vec(), inputs[1].to_f64_vec());
        let mut out = Vec::with_capacity(a_map.len() * m * n);
        for (&ia, &ib) in a_map.iter().zip(&b_map) {
            for i in 0..m {
                for j in 0..n {
                    let mut acc = 0.0;
                    for p in 0..k {
                        acc += av[ia * mk + i * k + p] * bv[ib * kn + p * n + j];
                    }
                    out.push(acc);
                }
            }
        }
        Ok(Tensor::from_f64(dtype, out_shape, &out))
    } else {
        // Integer products wrap, like the dtype's own arithmetic.
        let (av, bv) = (inputs[0].to_i64_vec(), inputs[1].to_i64_vec());
        let mut out = Vec::with_capacity(a_map.len() * m * n);
        for (&ia, &ib) in a_map.iter().zip(&b_map) {
            for i in 0..m {
                for j in 0..n {
                    let mut acc = 0i64;
                    for p in 0..k {
                        let prod = av[ia * mk + i * k + p].wrapping_mul(bv[ib * kn + p * n + j]);
                        acc = acc.wrapping_add(prod);
                    }
                    out.push(acc);
                }
            }
        }
        Ok(Tensor::from_i64(dtype, out_shape, &out))
    }
}

/// Reference evaluation.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    match op {
        Op::Gemm(a) => Ok(vec![eval_gemm(a, inputs)?]),
        Op::MatMul => Ok(vec![eval_matmul(inputs)?]),
        _ => Err(wrong_family(op, "matmul")),
    }
}

/// Attributes for the printer.
pub fn attrs(op: &Op) -> Vec<(&'static str, String)> {
    match op {
        Op::Gemm(a) => vec![
            ("alpha", fmt_f32(a.alpha)),
            ("beta", fmt_f32(a.beta)),
            ("transA", u8::from(a.trans_a).to_string()),
            ("transB", u8::from(a.trans_b).to_string()),
        ],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::test_util::{A, convert, eval_checked as run, f32_tensor as t, f32t};

    #[test]
    fn gemm_plain_and_broadcast_c() {
        let a = t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let b = t(&[3, 2], &[1., 2., 3., 4., 5., 6.]);
        let op = convert("Gemm", 13, vec![], &[a.ty(), b.ty()], 1).unwrap();
        assert_eq!(run(&op, &[&a, &b]), (vec![2, 2], vec![22., 28., 49., 64.]));
        // C [2,1] broadcasts along columns.
        let c = t(&[2, 1], &[1., 2.]);
        assert_eq!(
            run(&op, &[&a, &b, &c]),
            (vec![2, 2], vec![23., 29., 51., 66.])
        );
        // Scalar C.
        let c = t(&[], &[1.]);
        assert_eq!(
            run(&op, &[&a, &b, &c]),
            (vec![2, 2], vec![23., 29., 50., 65.])
        );
    }

    #[test]
    fn gemm_transposes_alpha_beta() {
        // A and B given transposed.
        let at = t(&[3, 2], &[1., 4., 2., 5., 3., 6.]);
        let bt = t(&[2, 3], &[1., 3., 5., 2., 4., 6.]);
        let c = t(&[2], &[10., 20.]);
        let op = convert(
            "Gemm",
            9,
            vec![
                ("alpha", A::F(2.0)),
                ("beta", A::F(0.5)),
                ("transA", A::I(1)),
                ("transB", A::I(1)),
            ],
            &[at.ty(), bt.ty(), c.ty()],
            1,
        )
        .unwrap();
        assert_eq!(
            op,
            Op::Gemm(GemmAttrs {
                alpha: 2.0,
                beta: 0.5,
                trans_a: true,
                trans_b: true
            })
        );
        assert_eq!(
            run(&op, &[&at, &bt, &c]),
            (vec![2, 2], vec![49., 66., 103., 138.])
        );
        assert_eq!(
            attrs(&op),
            vec![
                ("alpha", "2.0".to_string()),
                ("beta", "0.5".to_string()),
                ("transA", "1".to_string()),
                ("transB", "1".to_string()),
            ]
        );
    }

    #[test]
    fn gemm_errors() {
        let op = Op::Gemm(GemmAttrs {
            alpha: 1.0,
            beta: 1.0,
            trans_a: false,
            trans_b: false,
        });
        let err = op.infer(&[f32t(&[2, 3]), f32t(&[4, 2])]).unwrap_err();
        assert!(matches!(err, OpError::ShapeMismatch { ref shapes, .. }
            if shapes == &vec![vec![2, 3], vec![4, 2]]));
        assert!(matches!(
            op.infer(&[f32t(&[2, 3]), f32t(&[3, 2]), f32t(&[3])]),
            Err(OpError::ShapeMismatch { .. })
        ));
        assert!(matches!(
            op.infer(&[f32t(&[2, 3]), f32t(&[3, 2]), f32t(&[1, 2, 2])]),
            Err(OpError::ShapeMismatch { .. })
        ));
        assert!(matches!(
            op.infer(&[f32t(&[2, 3, 1]), f32t(&[3, 2])]),
            Err(OpError::ShapeMismatch { .. })
        ));
        let i = TensorType::new(DType::I64, vec![2, 3]);
        assert!(matches!(
            op.infer(&[i, f32t(&[3, 2])]),
            Err(OpError::DType { input: 0, .. })
        ));
        // C is required before opset 11.
        let e = convert("Gemm", 9, vec![], &[f32t(&[2, 3]), f32t(&[3, 2])], 1);
        assert!(matches!(e, Err(OpError::Arity { .. })));
    }

    #[test]
    fn matmul_1d() {
        let v = t(&[3], &[1., 2., 3.]);
        let w = t(&[3], &[4., 5., 6.]);
        let op = convert("MatMul", 13, vec![], &[v.ty(), w.ty()], 1).unwrap();
        assert_eq!(run(&op, &[&v, &w]), (vec![], vec![32.]));
        let m = t(&[3, 2], &[1., 2., 3., 4., 5., 6.]);
        assert_eq!(run(&op, &[&v, &m]), (vec![2], vec![22., 28.]));
        let m = t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        assert_eq!(run(&op, &[&m, &v]), (vec![2], vec![14., 32.]));
        // 1-d against a batch: [3] x [2,3,1] -> [2,1].
        let b = t(&[2, 3, 1], &[1., 0., 0., 0., 0., 1.]);
        assert_eq!(run(&op, &[&v, &b]), (vec![2, 1], vec![1., 3.]));
    }

    #[test]
    fn matmul_batched_broadcast() {
        // A[b,0,i,p] = 100b + 10i + p; B[j] selects rows 0 and 1 scaled by j + 1, so
        // Y[b,j,i,q] = (j + 1) * (100b + 10i + q).
        let mut av = Vec::new();
        for b in 0..2 {
            for i in 0..3 {
                for p in 0..4 {
                    av.push(f64::from(100 * b + 10 * i + p));
                }
            }
        }
        let mut bv = Vec::new();
        for j in 0..5 {
            for p in 0..4 {
                for q in 0..2 {
                    bv.push(if p == q { f64::from(j + 1) } else { 0. });
                }
            }
        }
        let a = t(&[2, 1, 3, 4], &av);
        let b = t(&[5, 4, 2], &bv);
        let (shape, y) = run(&Op::MatMul, &[&a, &b]);
        assert_eq!(shape, vec![2, 5, 3, 2]);
        let mut expect = Vec::new();
        for b in 0..2 {
            for j in 0..5 {
                for i in 0..3 {
                    for q in 0..2 {
                        expect.push(f64::from((j + 1) * (100 * b + 10 * i + q)));
                    }
                }
            }
        }
        assert_eq!(y, expect);
    }

    #[test]
    fn matmul_ints_and_errors() {
        let a = Tensor::from_i64(DType::I64, vec![2, 2], &[1, 2, 3, 4]);
        let b = Tensor::from_i64(DType::I64, vec![2, 2], &[5, 6, 7, 8]);
        let y = Op::MatMul.eval(&[&a, &b]).unwrap().remove(0);
        assert_eq!(y.to_i64_vec(), vec![19, 22, 43, 50]);
        let a = Tensor::from_i64(DType::I32, vec![1, 2], &[1, -2]);
        let b = Tensor::from_i64(DType::I32, vec![2, 1], &[3, 4]);
        let y = Op::MatMul.eval(&[&a, &b]).unwrap().remove(0);
        assert_eq!((y.dtype(), y.to_i64_vec()), (DType::I32, vec![-5]));
        assert_eq!(name(&Op::MatMul), "MatMul");
        let err = Op::MatMul
            .infer(&[f32t(&[2, 3]), f32t(&[4, 2])])
            .unwrap_err();
        assert!(matches!(err, OpError::ShapeMismatch { ref shapes, .. }
            if shapes == &vec![vec![2, 3], vec![4, 2]]));
        assert!(matches!(
            Op::MatMul.infer(&[f32t(&[2, 2, 3]), f32t(&[3, 3, 2])]),
            Err(OpError::ShapeMismatch { .. })
        ));
        assert!(matches!(
            Op::MatMul.infer(&[f32t(&[]), f32t(&[3])]),
            Err(OpError::ShapeMismatch { .. })
        ));
        let i = TensorType::new(DType::I64, vec![2, 3]);
        assert!(matches!(
            Op::MatMul.infer(&[f32t(&[2, 3]), i]),
            Err(OpError::DType { input: 1, .. })
        ));
        let bools = TensorType::new(DType::Bool, vec![2, 2]);
        assert!(matches!(
            Op::MatMul.infer(&[bools.clone(), bools]),
            Err(OpError::DType { input: 0, .. })
        ));
    }
}
