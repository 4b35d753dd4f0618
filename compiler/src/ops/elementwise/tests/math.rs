//! The float math ops of `UnaryOp::Math`: converters and defaults, inference, reference values.

use super::*;

fn math(m: MathOp) -> Op {
    Op::Unary(UnaryOp::Math(m))
}

#[test]
fn math_registry() {
    for d in MATH_DEFS {
        assert!(lookup(d.op_type, d.since).is_some(), "{}", d.op_type);
        assert!(lookup(d.op_type, MAX_OPSET).is_some(), "{}", d.op_type);
        assert!(lookup(d.op_type, d.since - 1).is_none(), "{}", d.op_type);
    }
    assert_eq!(MATH_DEFS.len(), 26);
    assert!(lookup("Swish", 23).is_none());
    assert!(lookup("Mish", 17).is_none());
}

#[test]
fn math_converters() {
    let c = |t: &str, opset, attrs| convert(t, opset, attrs, vec![x_f32()]).map(|r| r.0);
    assert_eq!(c("Floor", 13, vec![]).unwrap(), math(MathOp::Floor));
    assert_eq!(
        c("Elu", 22, vec![]).unwrap(),
        math(MathOp::Elu { alpha: 1.0 })
    );
    assert_eq!(
        c("Selu", 22, vec![attr_f("gamma", 2.0)]).unwrap(),
        math(MathOp::Selu {
            alpha: 1.673_263_2,
            gamma: 2.0
        })
    );
    assert!(matches!(
        c("Celu", 12, vec![attr_f("alpha", 0.0)]),
        Err(OpError::InvalidAttribute { .. })
    ));
    assert_eq!(
        c("Shrink", 9, vec![attr_f("bias", 1.5)]).unwrap(),
        math(MathOp::Shrink {
            bias: 1.5,
            lambd: 0.5
        })
    );
    assert_eq!(
        c("ThresholdedRelu", 10, vec![]).unwrap(),
        math(MathOp::ThresholdedRelu { alpha: 1.0 })
    );
    assert_eq!(
        c("IsInf", 20, vec![attr_i("detect_negative", 0)]).unwrap(),
        math(MathOp::IsInf {
            pos: true,
            neg: false
        })
    );
    assert!(c("IsInf", 20, vec![attr_i("detect_positive", 2)]).is_err());
    assert_eq!(
        c("Swish", 24, vec![]).unwrap(),
        math(MathOp::Swish { alpha: 1.0 })
    );
    let op = c("Selu", 7, vec![]).unwrap();
    assert_eq!(op.name(), "Selu");
    assert_eq!(
        attrs(&op),
        vec![("alpha", "1.6732632".into()), ("gamma", "1.050701".into())]
    );
}

#[test]
fn math_inference() {
    let f = tt(DType::F16, &[2, 3]);
    let i = tt(DType::I32, &[2, 3]);
    let b = tt(DType::Bool, &[2, 3]);
    for m in [
        MathOp::IsNaN,
        MathOp::IsInf {
            pos: true,
            neg: true,
        },
    ] {
        assert_eq!(
            infer(&math(m), std::slice::from_ref(&f)).unwrap(),
            vec![b.clone()]
        );
        assert!(infer(&math(m), std::slice::from_ref(&i)).is_err());
    }
    assert_eq!(
        infer(&math(MathOp::Sin), std::slice::from_ref(&f)).unwrap(),
        vec![f.clone()]
    );
    assert!(matches!(
        infer(&math(MathOp::Sin), std::slice::from_ref(&i)),
        Err(OpError::DType { input: 0, .. })
    ));
    assert_eq!(
        infer(&math(MathOp::Sign), std::slice::from_ref(&i)).unwrap(),
        vec![i]
    );
}

#[test]
fn math_reference_values() {
    let x = ft(&[6], &[-2.5, -0.5, 0.5, 1.5, 2.5, -0.0]);
    close(
        &run(math(MathOp::Round), &[&x]),
        &[-2.0, -0.0, 0.0, 2.0, 2.0, 0.0],
        0.0,
    );
    close(
        &run(math(MathOp::Floor), &[&x]),
        &[-3.0, -1.0, 0.0, 1.0, 2.0, 0.0],
        0.0,
    );
    close(
        &run(math(MathOp::Ceil), &[&x]),
        &[-2.0, 0.0, 1.0, 2.0, 3.0, 0.0],
        0.0,
    );
    let s = ft(&[4], &[-3.0, 0.0, 2.0, f64::NAN]);
    close(
        &run(math(MathOp::Sign), &[&s]),
        &[-1.0, 0.0, 1.0, f64::NAN],
        0.0,
    );
    let si = it(DType::I8, &[3], &[-7, 0, 9]);
    assert_eq!(run(math(MathOp::Sign), &[&si]).to_i64_vec(), vec![-1, 0, 1]);
    let e = ft(&[3], &[-1.0, 0.0, 2.0]);
    let elu = run(math(MathOp::Elu { alpha: 2.0 }), &[&e]);
    close(&elu, &[2.0 * ((-1.0f64).exp() - 1.0), 0.0, 2.0], 1e-6);
    let celu = run(math(MathOp::Celu { alpha: 2.0 }), &[&e]);
    close(&celu, &[2.0 * ((-0.5f64).exp() - 1.0), 0.0, 2.0], 1e-6);
    let sp = ft(&[3], &[-100.0, 0.0, 100.0]);
    close(
        &run(math(MathOp::Softplus), &[&sp]),
        &[(-100.0f64).exp(), 2f64.ln(), 100.0],
        1e-6,
    );
    let sh = ft(&[5], &[-2.0, -0.5, 0.0, 0.7, 3.0]);
    let shrink = run(
        math(MathOp::Shrink {
            bias: 0.25,
            lambd: 0.5,
        }),
        &[&sh],
    );
    close(&shrink, &[-1.75, 0.0, 0.0, 0.45, 2.75], 1e-6);
    let tr = run(math(MathOp::ThresholdedRelu { alpha: 0.5 }), &[&sh]);
    close(&tr, &[0.0, 0.0, 0.0, 0.7, 3.0], 1e-6);
    let sw = run(math(MathOp::Swish { alpha: 1.0 }), &[&e]);
    close(
        &sw,
        &[-1.0 / (1.0 + 1f64.exp()), 0.0, 2.0 / (1.0 + (-2f64).exp())],
        1e-6,
    );
    let v = ft(&[4], &[f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1.0]);
    let nan = run(math(MathOp::IsNaN), &[&v]);
    assert_eq!(
        (nan.dtype(), nan.to_i64_vec()),
        (DType::Bool, vec![1, 0, 0, 0])
    );
    let neg = run(
        math(MathOp::IsInf {
            pos: false,
            neg: true,
        }),
        &[&v],
    );
    assert_eq!(neg.to_i64_vec(), vec![0, 0, 1, 0]);
    let d = dt(&[2], &[0.5, 2.0]);
    close(
        &run(math(MathOp::Atanh), &[&d]),
        &[0.5f64.atanh(), f64::NAN],
        0.0,
    );
}
