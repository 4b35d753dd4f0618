use arenac_proto::AttributeProto;

use super::*;
use crate::ir::tensor::Tensor;

mod eval;
mod logical;
mod math;
use crate::ops::ctx::CtxInput;
use crate::ops::test_util::{
    absent, attr_f, attr_i, attr_s, cnst_named as cnst, convert_inputs, data_named as data,
};
use crate::ops::{MAX_OPSET, lookup};

// ---------- helpers

fn tt(dtype: DType, shape: &[usize]) -> TensorType {
    TensorType::new(dtype, shape.to_vec())
}

fn ft(shape: &[usize], v: &[f64]) -> Tensor {
    Tensor::from_f64(DType::F32, shape.to_vec(), v)
}

fn dt(shape: &[usize], v: &[f64]) -> Tensor {
    Tensor::from_f64(DType::F64, shape.to_vec(), v)
}

fn it(dtype: DType, shape: &[usize], v: &[i64]) -> Tensor {
    Tensor::from_i64(dtype, shape.to_vec(), v)
}

fn bt(shape: &[usize], v: &[i64]) -> Tensor {
    it(DType::Bool, shape, v)
}

fn run(op: Op, inputs: &[&Tensor]) -> Tensor {
    let mut out = eval(&op, inputs).unwrap();
    assert_eq!(out.len(), 1);
    let t = out.remove(0);
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    assert_eq!(
        infer(&op, &types).unwrap(),
        vec![t.ty()],
        "eval agrees with infer"
    );
    t
}

fn close(actual: &Tensor, expected: &[f64], tol: f64) {
    let a = actual.to_f64_vec();
    assert_eq!(a.len(), expected.len(), "{a:?} vs {expected:?}");
    for (x, y) in a.iter().zip(expected) {
        let ok = (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= tol;
        assert!(ok, "{a:?} vs {expected:?}");
    }
}

/// Converts a node; returns the op and the positions of its data inputs.
fn convert(
    op_type: &str,
    opset: i64,
    attrs: Vec<AttributeProto>,
    inputs: Vec<CtxInput>,
) -> Result<(Op, Vec<usize>), OpError> {
    convert_inputs(op_type, opset, attrs, inputs, &["y"])
}

fn un(u: UnaryOp) -> Op {
    Op::Unary(u)
}

fn bin(b: BinaryOp) -> Op {
    Op::Binary(b)
}

fn x_f32() -> CtxInput {
    data("x", tt(DType::F32, &[2]))
}

// ---------- registry and converters

#[test]
fn opset_ranges() {
    for d in DEFS {
        assert!(lookup(d.op_type, d.since).is_some(), "{}", d.op_type);
        assert!(lookup(d.op_type, MAX_OPSET).is_some(), "{}", d.op_type);
        assert!(d.since >= 7 || d.op_type == "Not" || d.op_type == "Cast");
        assert_eq!(d.until, MAX_OPSET);
    }
    assert!(lookup("Gelu", 19).is_none());
    assert!(lookup("HardSwish", 13).is_none());
    assert!(lookup("Mod", 9).is_none());
    assert!(lookup("Where", 8).is_none());
    assert!(lookup("Relu", 6).is_none());
    assert_eq!(DEFS.len(), 43);
}

#[test]
fn convert_attributes() {
    let c = |t: &str, opset, attrs| convert(t, opset, attrs, vec![x_f32()]).map(|r| r.0);
    assert_eq!(
        c("LeakyRelu", 16, vec![]).unwrap(),
        un(UnaryOp::LeakyRelu { alpha: 0.01 })
    );
    assert_eq!(
        c("LeakyRelu", 7, vec![attr_f("alpha", 0.5)]).unwrap(),
        un(UnaryOp::LeakyRelu { alpha: 0.5 })
    );
    assert_eq!(
        c("HardSigmoid", 7, vec![]).unwrap(),
        un(UnaryOp::HardSigmoid {
            alpha: 0.2,
            beta: 0.5
        })
    );
    assert_eq!(
        c("Gelu", 20, vec![]).unwrap(),
        un(UnaryOp::Gelu { tanh_approx: false })
    );
    assert_eq!(
        c("Gelu", 20, vec![attr_s("approximate", "tanh")]).unwrap(),
        un(UnaryOp::Gelu { tanh_approx: true })
    );
    assert!(matches!(
        c("Gelu", 20, vec![attr_s("approximate", "erf")]),
        Err(OpError::InvalidAttribute { .. })
    ));
    assert_eq!(c("Relu", 14, vec![]).unwrap(), un(UnaryOp::Relu));
    assert_eq!(
        c("Cast", 19, vec![attr_i("to", 1), attr_i("saturate", 0)]).unwrap(),
        Op::cast(DType::F32)
    );
    assert_eq!(
        c("Cast", 7, vec![attr_i("to", 9)]).unwrap(),
        Op::cast(DType::Bool)
    );
    match c("Cast", 13, vec![attr_i("to", 8)]) {
        Err(OpError::Unsupported(m)) => assert!(m.contains('8'), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        c("Cast", 13, vec![attr_i("to", 1 << 40)]),
        Err(OpError::Unsupported(_))
    ));
    assert!(matches!(
        c("Cast", 13, vec![]),
        Err(OpError::InvalidAttribute { .. })
    ));
    let two = vec![x_f32(), x_f32()];
    assert_eq!(
        convert("Mod", 13, vec![attr_i("fmod", 1)], two.clone())
            .unwrap()
            .0,
        bin(BinaryOp::Mod { fmod: true })
    );
    assert!(convert("Mod", 13, vec![attr_i("fmod", 2)], two.clone()).is_err());
    assert!(matches!(
        convert("Mod", 27, vec![], two.clone()),
        Err(OpError::InvalidAttribute { .. })
    ));
    assert_eq!(
        convert("Mod", 28, vec![], two.clone()).unwrap().0,
        bin(BinaryOp::Mod { fmod: false })
    );
    assert!(matches!(
        convert("Add", 13, vec![], vec![x_f32()]),
        Err(OpError::Arity { .. })
    ));
    let (op, data_ins) = convert("Sum", 13, vec![], vec![x_f32(), x_f32(), x_f32()]).unwrap();
    assert_eq!(
        (op, data_ins),
        (Op::Variadic(VariadicOp::Sum), vec![0, 1, 2])
    );
    assert!(convert("Max", 13, vec![], vec![]).is_err());
}

#[test]
fn convert_clip() {
    // Opset 6 style: attributes; absent means no bound.
    let (op, _) = convert("Clip", 7, vec![attr_f("max", 6.0)], vec![x_f32()]).unwrap();
    assert_eq!(
        op,
        un(UnaryOp::Clip {
            min: None,
            max: Some(6.0)
        })
    );
    // Opset 11+: constant inputs, taken; an omitted input is no bound.
    let (op, data_ins) = convert(
        "Clip",
        13,
        vec![],
        vec![x_f32(), cnst("lo", ft(&[], &[-1.5])), absent()],
    )
    .unwrap();
    assert_eq!(
        op,
        un(UnaryOp::Clip {
            min: Some(-1.5),
            max: None
        })
    );
    assert_eq!(data_ins, vec![0]);
    let x_i = data("x", tt(DType::I32, &[3]));
    let (op, _) = convert(
        "Clip",
        12,
        vec![],
        vec![x_i.clone(), absent(), cnst("hi", it(DType::I32, &[], &[7]))],
    )
    .unwrap();
    assert_eq!(
        op,
        un(UnaryOp::Clip {
            min: None,
            max: Some(7.0)
        })
    );
    // A bound computed at run time decides no shape: every given bound stays a data input
    // (the constant one too), never a frozen operand.
    let (op, data_ins) = convert(
        "Clip",
        13,
        vec![],
        vec![x_f32(), data("lo", tt(DType::F32, &[]))],
    )
    .unwrap();
    assert_eq!(
        (op, data_ins),
        (
            Op::ClipDynamic {
                min: true,
                max: false
            },
            vec![0, 1]
        )
    );
    let (op, data_ins) = convert(
        "Clip",
        13,
        vec![],
        vec![
            x_f32(),
            cnst("lo", ft(&[], &[0.0])),
            data("hi", tt(DType::F32, &[1])),
        ],
    )
    .unwrap();
    assert_eq!(
        (op, data_ins),
        (
            Op::ClipDynamic {
                min: true,
                max: true
            },
            vec![0, 1, 2]
        )
    );
    let (op, data_ins) = convert(
        "Clip",
        13,
        vec![],
        vec![x_f32(), absent(), data("hi", tt(DType::F32, &[]))],
    )
    .unwrap();
    assert_eq!(
        (op, data_ins),
        (
            Op::ClipDynamic {
                min: false,
                max: true
            },
            vec![0, 2]
        )
    );
    // The shape and dtype of a run-time bound are checked all the same.
    assert!(matches!(
        convert(
            "Clip",
            13,
            vec![],
            vec![x_f32(), data("lo", tt(DType::F32, &[2]))]
        ),
        Err(OpError::ShapeMismatch { .. })
    ));
    assert!(matches!(
        convert(
            "Clip",
            13,
            vec![],
            vec![x_f32(), data("lo", tt(DType::F64, &[]))]
        ),
        Err(OpError::DType { input: 1, .. })
    ));
    assert!(matches!(
        convert("Clip", 13, vec![], vec![x_i, cnst("lo", ft(&[], &[0.0]))]),
        Err(OpError::DType { input: 1, .. })
    ));
    assert!(matches!(
        convert(
            "Clip",
            13,
            vec![],
            vec![x_f32(), cnst("lo", ft(&[2], &[0.0, 1.0]))]
        ),
        Err(OpError::ShapeMismatch { .. })
    ));
}

#[test]
fn clip_dynamic_matches_constant_clip() {
    // Floats: the constant Clip's rule (NaN propagates; min > max gives max).
    let x = ft(&[5], &[-3.0, -0.5, 0.25, 2.0, f64::NAN]);
    for (lo, hi) in [
        (Some(-1.0), Some(1.0)),
        (Some(0.0), None),
        (None, Some(0.5)),
    ] {
        let mut ins = vec![&x];
        let (tl, th) = (
            ft(&[], &[lo.unwrap_or(0.0)]),
            ft(&[1], &[hi.unwrap_or(0.0)]),
        );
        if lo.is_some() {
            ins.push(&tl);
        }
        if hi.is_some() {
            ins.push(&th);
        }
        let op = Op::ClipDynamic {
            min: lo.is_some(),
            max: hi.is_some(),
        };
        let want = run(un(UnaryOp::Clip { min: lo, max: hi }), &[&x]);
        close(&run(op, &ins), &want.to_f64_vec(), 0.0);
    }
    let lo = ft(&[], &[2.0]);
    let hi = ft(&[], &[1.0]);
    let both = Op::ClipDynamic {
        min: true,
        max: true,
    };
    close(
        &run(both.clone(), &[&x, &lo, &hi]),
        &[1.0, 1.0, 1.0, 1.0, f64::NAN],
        0.0,
    );
    // Integers compare exactly in their own order, beyond f64's 53 bits, u64 as unsigned.
    let big = (1i64 << 60) + 1;
    let xi = it(DType::I64, &[3], &[big + 5, -7, big - 9]);
    let (li, hi_) = (it(DType::I64, &[], &[-3]), it(DType::I64, &[], &[big]));
    assert_eq!(
        run(both.clone(), &[&xi, &li, &hi_]).to_i64_vec(),
        vec![big, -3, big - 9]
    );
    let xu = it(DType::U64, &[2], &[-1, 5]);
    let (lu, hu) = (it(DType::U64, &[], &[6]), it(DType::U64, &[], &[-2]));
    assert_eq!(
        run(both.clone(), &[&xu, &lu, &hu]).to_i64_vec(),
        vec![-2, 6]
    );
    // Bounds must be one element of x's dtype.
    let two = ft(&[2], &[0.0, 1.0]);
    assert!(infer(&both, &[x.ty(), two.ty(), hi.ty()]).is_err());
    assert!(infer(&both, &[x.ty(), li.ty(), hi.ty()]).is_err());
    assert!(infer(&both, &[x.ty(), lo.ty()]).is_err());
    assert_eq!(
        attrs(&both),
        vec![("min", "input".to_string()), ("max", "input".to_string())]
    );
}

// ---------- inference

#[test]
fn infer_unary() {
    let f = tt(DType::F16, &[2, 3]);
    let i = tt(DType::I32, &[2, 3]);
    let u = tt(DType::U8, &[4]);
    let float_only = [
        UnaryOp::Sigmoid,
        UnaryOp::Tanh,
        UnaryOp::Erf,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Sqrt,
        UnaryOp::Reciprocal,
        UnaryOp::HardSwish,
        UnaryOp::Gelu { tanh_approx: false },
        UnaryOp::HardSigmoid {
            alpha: 0.2,
            beta: 0.5,
        },
        UnaryOp::LeakyRelu { alpha: 0.1 },
    ];
    for op in float_only {
        assert_eq!(
            infer(&un(op), std::slice::from_ref(&f)).unwrap(),
            vec![f.clone()]
        );
        assert!(
            matches!(
                infer(&un(op), std::slice::from_ref(&i)),
                Err(OpError::DType { input: 0, .. })
            ),
            "{op:?}"
        );
    }
    let clip = UnaryOp::Clip {
        min: None,
        max: None,
    };
    for op in [UnaryOp::Relu, UnaryOp::Neg, UnaryOp::Abs, clip] {
        assert_eq!(
            infer(&un(op), std::slice::from_ref(&i)).unwrap(),
            vec![i.clone()]
        );
        assert_eq!(
            infer(&un(op), std::slice::from_ref(&f)).unwrap(),
            vec![f.clone()]
        );
    }
    assert!(infer(&un(UnaryOp::Relu), std::slice::from_ref(&u)).is_ok());
    assert!(infer(&un(UnaryOp::Neg), &[u]).is_err());
    assert!(infer(&un(UnaryOp::Relu), &[tt(DType::Bool, &[1])]).is_err());
    assert!(matches!(
        infer(&un(UnaryOp::Relu), &[f.clone(), f]),
        Err(OpError::Arity { .. })
    ));
}

#[test]
fn infer_binary() {
    let f = |s: &[usize]| tt(DType::F32, s);
    let add = bin(BinaryOp::Add);
    assert_eq!(
        infer(&add, &[f(&[2, 1, 3]), f(&[4, 1])]).unwrap(),
        vec![f(&[2, 4, 3])]
    );
    assert_eq!(infer(&add, &[f(&[]), f(&[5])]).unwrap(), vec![f(&[5])]);
    match infer(&add, &[f(&[2, 3]), f(&[4])]) {
        Err(OpError::ShapeMismatch { shapes, .. }) => {
            assert_eq!(shapes, vec![vec![2, 3], vec![4]])
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        infer(&add, &[f(&[2]), tt(DType::I64, &[2])]),
        Err(OpError::DType { input: 1, .. })
    ));
    assert!(infer(&add, &[tt(DType::Bool, &[2]), tt(DType::Bool, &[2])]).is_err());
    // Pow: exponent of another dtype; output is the base's.
    assert_eq!(
        infer(&bin(BinaryOp::Pow), &[f(&[3]), tt(DType::I64, &[])]).unwrap(),
        vec![f(&[3])]
    );
    assert!(infer(&bin(BinaryOp::Pow), &[f(&[3]), tt(DType::Bool, &[])]).is_err());
    // Comparisons give bool; Equal accepts bool, Less does not.
    let b = tt(DType::Bool, &[2]);
    assert_eq!(
        infer(&bin(BinaryOp::Equal), &[b.clone(), b.clone()]).unwrap(),
        vec![b.clone()]
    );
    assert_eq!(
        infer(&bin(BinaryOp::Greater), &[f(&[2, 1]), f(&[3])]).unwrap(),
        vec![tt(DType::Bool, &[2, 3])]
    );
    assert!(infer(&bin(BinaryOp::Less), &[b.clone(), b]).is_err());
    // Mod with fmod=0 takes floats too (Mod-28; the converter rejects it before opset 28).
    let i = tt(DType::I32, &[2]);
    assert!(infer(&bin(BinaryOp::Mod { fmod: false }), &[i.clone(), i.clone()]).is_ok());
    assert!(infer(&bin(BinaryOp::Mod { fmod: false }), &[f(&[2]), f(&[2])]).is_ok());
    assert!(infer(&bin(BinaryOp::Mod { fmod: true }), &[f(&[2]), f(&[2])]).is_ok());
    // PRelu: the slope broadcasts to X, never the other way.
    let prelu = bin(BinaryOp::PRelu);
    assert_eq!(
        infer(&prelu, &[f(&[2, 3, 4]), f(&[3, 1])]).unwrap(),
        vec![f(&[2, 3, 4])]
    );
    assert!(matches!(
        infer(&prelu, &[f(&[3, 1]), f(&[3, 4])]),
        Err(OpError::ShapeMismatch { .. })
    ));
    assert!(infer(&add, &[f(&[2])]).is_err());
}

#[test]
fn infer_variadic_where_cast() {
    let f = |s: &[usize]| tt(DType::F32, s);
    let sum = Op::Variadic(VariadicOp::Sum);
    assert_eq!(
        infer(&sum, &[f(&[3]), f(&[2, 1]), f(&[])]).unwrap(),
        vec![f(&[2, 3])]
    );
    assert_eq!(infer(&sum, &[f(&[4])]).unwrap(), vec![f(&[4])]);
    assert!(matches!(infer(&sum, &[]), Err(OpError::Arity { .. })));
    assert!(infer(&sum, &[f(&[2]), f(&[3])]).is_err());
    let i = tt(DType::I64, &[2]);
    assert!(infer(&sum, std::slice::from_ref(&i)).is_err());
    assert!(infer(&Op::Variadic(VariadicOp::Max), &[i.clone(), i.clone()]).is_ok());
    assert!(matches!(
        infer(&Op::Variadic(VariadicOp::Min), &[i.clone(), f(&[2])]),
        Err(OpError::DType { input: 1, .. })
    ));

    let c = tt(DType::Bool, &[2, 1]);
    assert_eq!(
        infer(&Op::Where, &[c.clone(), i.clone(), tt(DType::I64, &[])]).unwrap(),
        vec![tt(DType::I64, &[2, 2])]
    );
    assert!(matches!(
        infer(&Op::Where, &[i.clone(), i.clone(), i.clone()]),
        Err(OpError::DType { input: 0, .. })
    ));
    assert!(matches!(
        infer(&Op::Where, &[c.clone(), i.clone(), f(&[2])]),
        Err(OpError::DType { input: 2, .. })
    ));
    assert!(matches!(
        infer(&Op::Where, &[c, i.clone(), tt(DType::I64, &[3])]),
        Err(OpError::ShapeMismatch { .. })
    ));

    let cast = Op::cast(DType::F16);
    assert_eq!(
        infer(&cast, &[tt(DType::I64, &[2, 3])]).unwrap(),
        vec![tt(DType::F16, &[2, 3])]
    );
    assert!(infer(&cast, &[]).is_err());
}
