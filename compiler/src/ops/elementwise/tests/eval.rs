//! Reference evaluation against hand-computed values.

use super::*;

// ---------- evaluation

#[test]
fn eval_activations() {
    let x = dt(&[5], &[-2.0, -1.0, 0.0, 1.0, 3.0]);
    close(
        &run(un(UnaryOp::Relu), &[&x]),
        &[0.0, 0.0, 0.0, 1.0, 3.0],
        0.0,
    );
    close(
        &run(un(UnaryOp::LeakyRelu { alpha: 0.5 }), &[&x]),
        &[-1.0, -0.5, 0.0, 1.0, 3.0],
        0.0,
    );
    let xf = ft(&[2], &[-2.0, 3.0]);
    let y = run(un(UnaryOp::LeakyRelu { alpha: 0.1 }), &[&xf]);
    assert_eq!(y.to_f32_vec(), vec![-0.2f32, 3.0]);
    close(
        &run(un(UnaryOp::Sigmoid), &[&dt(&[2], &[0.0, 1.0])]),
        &[0.5, 0.7310585786300049],
        1e-15,
    );
    close(
        &run(un(UnaryOp::Tanh), &[&dt(&[2], &[0.0, 1.0])]),
        &[0.0, 0.7615941559557649],
        1e-15,
    );
    // HardSigmoid(alpha 0.2, beta 0.5): 0.2x + 0.5 clamped to [0, 1].
    let hs = UnaryOp::HardSigmoid {
        alpha: 0.5,
        beta: 0.25,
    };
    close(&run(un(hs), &[&x]), &[0.0, 0.0, 0.25, 0.75, 1.0], 0.0);
    // HardSwish: x * clamp(x/6 + 1/2, 0, 1).
    close(
        &run(un(UnaryOp::HardSwish), &[&dt(&[4], &[-3.0, 0.0, 1.0, 3.0])]),
        &[0.0, 0.0, 2.0 / 3.0, 3.0],
        1e-15,
    );
    // Gelu(1) = Phi(1); Gelu(-2) = -2 * Phi(-2).
    close(
        &run(
            un(UnaryOp::Gelu { tanh_approx: false }),
            &[&dt(&[3], &[0.0, 1.0, -2.0])],
        ),
        &[0.0, 0.8413447460685429, -0.04550026389635842],
        1e-15,
    );
    close(
        &run(
            un(UnaryOp::Gelu { tanh_approx: true }),
            &[&dt(&[2], &[0.0, 1.0])],
        ),
        &[0.0, 0.8411919906082768],
        1e-15,
    );
    // Integer Relu; u8 Relu is the identity.
    let xi = it(DType::I32, &[3], &[-5, 0, 7]);
    assert_eq!(run(un(UnaryOp::Relu), &[&xi]).to_i64_vec(), vec![0, 0, 7]);
    let xu = it(DType::U8, &[2], &[200, 0]);
    assert_eq!(run(un(UnaryOp::Relu), &[&xu]).to_i64_vec(), vec![200, 0]);
    // NaN propagates through Relu.
    assert!(run(un(UnaryOp::Relu), &[&ft(&[1], &[f64::NAN])]).to_f64_vec()[0].is_nan());
}

#[test]
fn eval_math() {
    let x = dt(&[3], &[1.0, 4.0, 0.25]);
    close(&run(un(UnaryOp::Sqrt), &[&x]), &[1.0, 2.0, 0.5], 0.0);
    close(&run(un(UnaryOp::Reciprocal), &[&x]), &[1.0, 0.25, 4.0], 0.0);
    close(
        &run(un(UnaryOp::Exp), &[&dt(&[2], &[0.0, 1.0])]),
        &[1.0, std::f64::consts::E],
        1e-15,
    );
    close(
        &run(
            un(UnaryOp::Log),
            &[&dt(&[3], &[1.0, std::f64::consts::E, 0.0])],
        ),
        &[0.0, 1.0, f64::NEG_INFINITY],
        1e-15,
    );
    close(
        &run(un(UnaryOp::Neg), &[&ft(&[2], &[1.5, -2.0])]),
        &[-1.5, 2.0],
        0.0,
    );
    close(
        &run(un(UnaryOp::Abs), &[&ft(&[2], &[1.5, -2.0])]),
        &[1.5, 2.0],
        0.0,
    );
    let xi = it(DType::I8, &[3], &[-128, -3, 4]);
    assert_eq!(
        run(un(UnaryOp::Neg), &[&xi]).to_i64_vec(),
        vec![-128, 3, -4]
    );
    assert_eq!(run(un(UnaryOp::Abs), &[&xi]).to_i64_vec(), vec![-128, 3, 4]);
    close(
        &run(un(UnaryOp::Erf), &[&dt(&[3], &[0.0, 1.0, -0.5])]),
        &[0.0, 0.8427007929497149, -0.5204998778130465],
        2e-16,
    );
    // f16 results are rounded to f16.
    let h = run(
        un(UnaryOp::Exp),
        &[&Tensor::from_f64(DType::F16, vec![1], &[1.0])],
    );
    assert_eq!(h.dtype(), DType::F16);
    close(&h, &[2.71875], 0.0);
}

#[test]
fn eval_clip() {
    let x = ft(&[4], &[-1.0, 3.0, 7.0, f64::NAN]);
    let both = UnaryOp::Clip {
        min: Some(0.0),
        max: Some(6.0),
    };
    close(&run(un(both), &[&x]), &[0.0, 3.0, 6.0, f64::NAN], 0.0);
    let hi = UnaryOp::Clip {
        min: None,
        max: Some(2.5),
    };
    close(&run(un(hi), &[&x]), &[-1.0, 2.5, 2.5, f64::NAN], 0.0);
    let none = UnaryOp::Clip {
        min: None,
        max: None,
    };
    close(&run(un(none), &[&x]), &[-1.0, 3.0, 7.0, f64::NAN], 0.0);
    let xi = it(DType::I64, &[4], &[-9, 0, 5, 100]);
    let ci = UnaryOp::Clip {
        min: Some(-2.0),
        max: Some(50.0),
    };
    assert_eq!(run(un(ci), &[&xi]).to_i64_vec(), vec![-2, 0, 5, 50]);
}

#[test]
fn eval_arithmetic() {
    // [2,1] + [3] -> [2,3]
    let a = ft(&[2, 1], &[1.0, 2.0]);
    let b = ft(&[3], &[10.0, 20.0, 30.0]);
    let y = run(bin(BinaryOp::Add), &[&a, &b]);
    assert_eq!(y.shape(), &[2, 3]);
    close(&y, &[11.0, 21.0, 31.0, 12.0, 22.0, 32.0], 0.0);
    close(
        &run(bin(BinaryOp::Sub), &[&a, &b]),
        &[-9.0, -19.0, -29.0, -8.0, -18.0, -28.0],
        0.0,
    );
    close(
        &run(bin(BinaryOp::Mul), &[&a, &b]),
        &[10.0, 20.0, 30.0, 20.0, 40.0, 60.0],
        0.0,
    );
    close(
        &run(bin(BinaryOp::Div), &[&b, &ft(&[], &[4.0])]),
        &[2.5, 5.0, 7.5],
        0.0,
    );
    // [2,1,3] + [4,1] -> [2,4,3]; element [1,2,0] = a[1,0,0] + b[2,0].
    let a3 = dt(&[2, 1, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    let b2 = dt(&[4, 1], &[0.0, 10.0, 20.0, 30.0]);
    let y = run(bin(BinaryOp::Add), &[&a3, &b2]);
    assert_eq!(y.shape(), &[2, 4, 3]);
    assert_eq!(y.to_f64_vec()[12 + 2 * 3], 23.0);
    assert!(eval(&bin(BinaryOp::Add), &[&a3, &dt(&[2], &[0.0, 0.0])]).is_err());
    // Integer division truncates toward zero; by zero is an error.
    let p = it(DType::I32, &[4], &[7, -7, 7, -7]);
    let q = it(DType::I32, &[4], &[2, 2, -2, -2]);
    assert_eq!(
        run(bin(BinaryOp::Div), &[&p, &q]).to_i64_vec(),
        vec![3, -3, -3, 3]
    );
    let z = it(DType::I32, &[], &[0]);
    assert!(eval(&bin(BinaryOp::Div), &[&p, &z]).is_err());
    close(
        &run(bin(BinaryOp::Div), &[&ft(&[1], &[1.0]), &ft(&[1], &[0.0])]),
        &[f64::INFINITY],
        0.0,
    );
    // Wrapping in the element type.
    let m = it(DType::I8, &[1], &[127]);
    assert_eq!(
        run(bin(BinaryOp::Add), &[&m, &it(DType::I8, &[1], &[1])]).to_i64_vec(),
        vec![-128]
    );
    // u64 division is unsigned.
    let big = it(DType::U64, &[1], &[-2]); // 2^64 - 2
    let two = it(DType::U64, &[1], &[2]);
    assert_eq!(
        run(bin(BinaryOp::Div), &[&big, &two]).to_i64_vec(),
        vec![i64::MAX]
    );
    // Mismatched dtypes are rejected, not evaluated.
    assert!(eval(&bin(BinaryOp::Add), &[&a, &it(DType::I64, &[1], &[1])]).is_err());
}

#[test]
fn eval_mod() {
    let p = it(DType::I64, &[4], &[5, -5, 5, -5]);
    let q = it(DType::I64, &[4], &[3, 3, -3, -3]);
    // fmod=0: sign of the divisor (Python's %).
    assert_eq!(
        run(bin(BinaryOp::Mod { fmod: false }), &[&p, &q]).to_i64_vec(),
        vec![2, 1, -1, -2]
    );
    // fmod=1: sign of the dividend (C fmod).
    assert_eq!(
        run(bin(BinaryOp::Mod { fmod: true }), &[&p, &q]).to_i64_vec(),
        vec![2, -2, 2, -2]
    );
    let z = it(DType::I64, &[1], &[0]);
    assert!(eval(&bin(BinaryOp::Mod { fmod: false }), &[&p, &z]).is_err());
    let min = it(DType::I64, &[1], &[i64::MIN]);
    let m1 = it(DType::I64, &[1], &[-1]);
    assert_eq!(
        run(bin(BinaryOp::Mod { fmod: false }), &[&min, &m1]).to_i64_vec(),
        vec![0]
    );
    assert_eq!(
        run(bin(BinaryOp::Div), &[&min, &m1]).to_i64_vec(),
        vec![i64::MIN]
    );
    let fp = ft(&[2], &[5.5, -5.5]);
    close(
        &run(bin(BinaryOp::Mod { fmod: true }), &[&fp, &ft(&[], &[2.0])]),
        &[1.5, -1.5],
        0.0,
    );
    // fmod=0 on floats (Mod-28): numpy's mod, edge cases from the spec.
    let p = ft(&[7], &[5.5, -5.5, 0.0, -3.0, 3.0, f64::INFINITY, 1.0]);
    let q = ft(
        &[7],
        &[-2.0, 2.0, -2.0, f64::INFINITY, f64::NEG_INFINITY, 2.0, 0.0],
    );
    let r = run(bin(BinaryOp::Mod { fmod: false }), &[&p, &q]).to_f64_vec();
    close_bits(
        &r,
        &[
            -0.5,
            0.5,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::NAN,
        ],
    );
}

/// Equal values with equal signs (zeros compared by sign too), NaN equal to NaN.
fn close_bits(a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        let ok =
            (x.is_nan() && y.is_nan()) || (x == y && x.is_sign_negative() == y.is_sign_negative());
        assert!(ok, "{a:?} vs {b:?}");
    }
}

#[test]
fn eval_pow() {
    let pow = || bin(BinaryOp::Pow);
    let y = run(
        pow(),
        &[&ft(&[2], &[2.0, 3.0]), &it(DType::I64, &[2], &[3, 2])],
    );
    assert_eq!(y.dtype(), DType::F32);
    close(&y, &[8.0, 9.0], 0.0);
    close(
        &run(pow(), &[&ft(&[2], &[4.0, 2.0]), &ft(&[], &[0.5])]),
        &[2.0, std::f64::consts::SQRT_2],
        1e-7,
    );
    let b = it(DType::I64, &[2], &[2, -3]);
    assert_eq!(
        run(pow(), &[&b, &it(DType::I64, &[2], &[10, 3])]).to_i64_vec(),
        vec![1024, -27]
    );
    let b = it(DType::I32, &[3], &[2, 1, -1]);
    assert_eq!(
        run(pow(), &[&b, &it(DType::I32, &[3], &[-1, -5, -3])]).to_i64_vec(),
        vec![0, 1, -1]
    );
    assert!(
        eval(
            &pow(),
            &[&it(DType::I32, &[1], &[0]), &it(DType::I32, &[1], &[-1])]
        )
        .is_err()
    );
    let y = run(pow(), &[&it(DType::I32, &[1], &[4]), &ft(&[1], &[0.5])]);
    assert_eq!((y.dtype(), y.to_i64_vec()), (DType::I32, vec![2]));
}

#[test]
fn eval_prelu_and_compare() {
    let x = ft(&[2, 3], &[-1.0, 2.0, -3.0, 4.0, -5.0, 6.0]);
    let s = ft(&[3], &[0.5, 1.0, 2.0]);
    close(
        &run(bin(BinaryOp::PRelu), &[&x, &s]),
        &[-0.5, 2.0, -6.0, 4.0, -5.0, 6.0],
        0.0,
    );
    let xi = it(DType::I32, &[3], &[-2, 0, 3]);
    assert_eq!(
        run(bin(BinaryOp::PRelu), &[&xi, &it(DType::I32, &[], &[3])]).to_i64_vec(),
        vec![-6, 0, 3]
    );

    let a = ft(&[3], &[1.0, 2.0, f64::NAN]);
    let b = ft(&[3], &[2.0, 2.0, f64::NAN]);
    let eq = run(bin(BinaryOp::Equal), &[&a, &b]);
    assert_eq!((eq.dtype(), eq.to_i64_vec()), (DType::Bool, vec![0, 1, 0]));
    assert_eq!(
        run(bin(BinaryOp::Less), &[&a, &b]).to_i64_vec(),
        vec![1, 0, 0]
    );
    assert_eq!(
        run(bin(BinaryOp::Greater), &[&b, &a]).to_i64_vec(),
        vec![1, 0, 0]
    );
    let p = bt(&[2, 1], &[1, 0]);
    let q = bt(&[2], &[1, 0]);
    assert_eq!(
        run(bin(BinaryOp::Equal), &[&p, &q]).to_i64_vec(),
        vec![1, 0, 0, 1]
    );
    let i = it(DType::I64, &[2], &[-1, 5]);
    let j = it(DType::I64, &[], &[0]);
    assert_eq!(
        run(bin(BinaryOp::Greater), &[&i, &j]).to_i64_vec(),
        vec![0, 1]
    );
    // u64 compares unsigned: 2^64 - 1 > 1.
    let u = it(DType::U64, &[1], &[-1]);
    let one = it(DType::U64, &[1], &[1]);
    assert_eq!(run(bin(BinaryOp::Less), &[&u, &one]).to_i64_vec(), vec![0]);
}

#[test]
fn eval_variadic() {
    let a = ft(&[2], &[1.0, 2.0]);
    let b = ft(&[], &[10.0]);
    let c = ft(&[2, 1], &[100.0, 200.0]);
    let y = run(Op::Variadic(VariadicOp::Sum), &[&a, &b, &c]);
    assert_eq!(y.shape(), &[2, 2]);
    close(&y, &[111.0, 112.0, 211.0, 212.0], 0.0);
    close(&run(Op::Variadic(VariadicOp::Sum), &[&a]), &[1.0, 2.0], 0.0);
    close(
        &run(
            Op::Variadic(VariadicOp::Mean),
            &[&a, &ft(&[2], &[3.0, 5.0])],
        ),
        &[2.0, 3.5],
        0.0,
    );
    let n = ft(&[3], &[1.0, f64::NAN, -4.0]);
    let m = ft(&[3], &[0.0, 1.0, -5.0]);
    close(
        &run(Op::Variadic(VariadicOp::Max), &[&n, &m]),
        &[1.0, f64::NAN, -4.0],
        0.0,
    );
    close(
        &run(Op::Variadic(VariadicOp::Min), &[&n, &m, &ft(&[], &[-4.5])]),
        &[-4.5, f64::NAN, -5.0],
        0.0,
    );
    let i = it(DType::I32, &[3], &[3, -1, 8]);
    let j = it(DType::I32, &[3], &[2, 4, 8]);
    assert_eq!(
        run(Op::Variadic(VariadicOp::Max), &[&i, &j]).to_i64_vec(),
        vec![3, 4, 8]
    );
    assert_eq!(
        run(Op::Variadic(VariadicOp::Min), &[&i, &j]).to_i64_vec(),
        vec![2, -1, 8]
    );
}

#[test]
fn eval_where() {
    // ONNX spec example.
    let c = bt(&[2, 2], &[1, 0, 1, 1]);
    let x = it(DType::I64, &[2, 2], &[1, 2, 3, 4]);
    let y = it(DType::I64, &[2, 2], &[9, 8, 7, 6]);
    assert_eq!(run(Op::Where, &[&c, &x, &y]).to_i64_vec(), vec![1, 8, 3, 4]);
    // Broadcast: cond [2], x scalar, y [2,1].
    let c = bt(&[2], &[1, 0]);
    let x = ft(&[], &[-1.0]);
    let y = ft(&[2, 1], &[5.0, 6.0]);
    let r = run(Op::Where, &[&c, &x, &y]);
    assert_eq!(r.shape(), &[2, 2]);
    close(&r, &[-1.0, 5.0, -1.0, 6.0], 0.0);
    assert!(eval(&Op::Where, &[&x, &x, &y]).is_err());
}

#[test]
fn eval_cast() {
    let x = ft(&[4], &[1.7, -1.7, 0.0, 300.0]);
    let y = run(Op::cast(DType::I32), &[&x]);
    assert_eq!(
        (y.dtype(), y.to_i64_vec()),
        (DType::I32, vec![1, -1, 0, 300])
    );
    let y = run(Op::cast(DType::Bool), &[&ft(&[3], &[0.0, 0.5, -2.0])]);
    assert_eq!(y.to_i64_vec(), vec![0, 1, 1]);
    let y = run(Op::cast(DType::F32), &[&bt(&[2], &[1, 0])]);
    close(&y, &[1.0, 0.0], 0.0);
    let y = run(Op::cast(DType::F16), &[&it(DType::I64, &[2], &[3, -2049])]);
    close(&y, &[3.0, -2048.0], 0.0);
    let y = run(Op::cast(DType::I8), &[&it(DType::I64, &[2], &[5, 130])]);
    assert_eq!(y.to_i64_vec(), vec![5, -126]);
    let y = run(Op::cast(DType::F64), &[&it(DType::U64, &[1], &[-1])]);
    assert_eq!(y.to_f64_vec(), vec![18446744073709551615.0]);
    let y = run(Op::cast(DType::F64), &[&ft(&[1], &[0.1])]);
    assert_eq!(y.to_f64_vec(), vec![f64::from(0.1f32)]);
}

#[test]
fn erf_matches_reference() {
    // math.erf from CPython (libm), to 17 significant digits.
    let table = [
        (0.0, 0.0),
        (1e-20, 1.1283791670955125e-20),
        (0.1, 0.1124629160182849),
        (0.3, 0.3286267594591274),
        (0.46875, 0.49261347321793797),
        (0.5, 0.5204998778130465),
        (1.0, 0.8427007929497149),
        (1.5, 0.9661051464753108),
        (2.0, 0.9953222650189527),
        (3.0, 0.9999779095030014),
        (3.9, 0.9999999652077514),
        (4.0, 0.9999999845827421),
        (4.5, 0.9999999998033839),
        (5.0, 0.9999999999984626),
        (6.0, 1.0),
        (-2.5, -0.999593047982555),
        (27.0, 1.0),
        (f64::INFINITY, 1.0),
        (f64::NEG_INFINITY, -1.0),
    ];
    for (x, want) in table {
        let got = erf(x);
        assert!(
            (got - want).abs() <= 2.0 * f64::EPSILON * want.abs(),
            "erf({x}) = {got}, want {want}"
        );
    }
    assert!(erf(f64::NAN).is_nan());
}

#[test]
fn names_and_attrs() {
    assert_eq!(name(&un(UnaryOp::HardSwish)), "HardSwish");
    assert_eq!(name(&bin(BinaryOp::Mod { fmod: true })), "Mod");
    assert_eq!(name(&Op::Variadic(VariadicOp::Mean)), "Mean");
    assert_eq!(name(&Op::Where), "Where");
    let clip = UnaryOp::Clip {
        min: Some(0.0),
        max: None,
    };
    assert_eq!(
        attrs(&un(clip)),
        vec![("min", "0.0".to_string()), ("max", "none".to_string())]
    );
    let clip = UnaryOp::Clip {
        min: Some(f64::from(0.1f32)),
        max: Some(0.1),
    };
    assert_eq!(
        attrs(&un(clip)),
        vec![("min", "0.1".to_string()), ("max", "0.1".to_string())]
    );
    assert_eq!(
        attrs(&un(UnaryOp::LeakyRelu { alpha: 0.01 })),
        vec![("alpha", "0.01".to_string())]
    );
    assert_eq!(
        attrs(&un(UnaryOp::Gelu { tanh_approx: true })),
        vec![("approximate", "tanh".to_string())]
    );
    assert_eq!(
        attrs(&bin(BinaryOp::Mod { fmod: false })),
        vec![("fmod", "0".to_string())]
    );
    assert_eq!(
        attrs(&Op::cast(DType::BF16)),
        vec![("to", "bf16".to_string())]
    );
    assert!(attrs(&bin(BinaryOp::Add)).is_empty());
    assert!(matches!(
        infer(&Op::MatMul, &[]),
        Err(OpError::Unsupported(_))
    ));
}
