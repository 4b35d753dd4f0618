//! Logical, bitwise, shift and ordered-comparison ops, CastLike and the bf16 Cast rounding.

use super::*;

#[test]
fn convert_logical_and_bitwise() {
    let b = || data("x", tt(DType::Bool, &[2]));
    let (op, ins) = convert("Not", 1, vec![], vec![b()]).unwrap();
    assert_eq!((op, ins), (un(UnaryOp::Not), vec![0]));
    assert_eq!(
        convert("And", 7, vec![], vec![b(), b()]).unwrap().0,
        bin(BinaryOp::And)
    );
    assert!(
        lookup("And", 6).is_none(),
        "And-1 has a broadcast attribute"
    );
    assert!(lookup("BitwiseAnd", 17).is_none());
    assert!(lookup("GreaterOrEqual", 11).is_none());
    let i = || data("x", tt(DType::U8, &[2]));
    for (dir, left) in [("LEFT", true), ("RIGHT", false)] {
        let (op, _) = convert(
            "BitShift",
            11,
            vec![attr_s("direction", dir)],
            vec![i(), i()],
        )
        .unwrap();
        assert_eq!(op, bin(BinaryOp::BitShift { left }));
    }
    for attrs in [vec![], vec![attr_s("direction", "UP")]] {
        assert!(matches!(
            convert("BitShift", 11, attrs, vec![i(), i()]),
            Err(OpError::InvalidAttribute { .. })
        ));
    }
}

#[test]
fn cast_like_is_a_cast_to_the_second_inputs_dtype() {
    let like = data("like", tt(DType::F16, &[7, 7]));
    let (op, ins) = convert("CastLike", 15, vec![], vec![x_f32(), like]).unwrap();
    assert_eq!(op, Op::cast(DType::F16));
    assert_eq!(
        ins,
        vec![0],
        "the target's values are not an input of the Cast"
    );
    assert!(matches!(
        convert("CastLike", 15, vec![], vec![x_f32()]),
        Err(OpError::Arity { .. })
    ));
}

#[test]
fn infer_rejects_wrong_dtypes() {
    let f = tt(DType::F32, &[2]);
    let b = tt(DType::Bool, &[2]);
    let i = tt(DType::I32, &[2]);
    let bad = |op: Op, ins: &[TensorType]| matches!(infer(&op, ins), Err(OpError::DType { .. }));
    assert!(bad(un(UnaryOp::Not), std::slice::from_ref(&f)));
    assert!(bad(un(UnaryOp::Not), std::slice::from_ref(&i)));
    assert!(bad(un(UnaryOp::BitwiseNot), std::slice::from_ref(&b)));
    assert!(bad(un(UnaryOp::BitwiseNot), std::slice::from_ref(&f)));
    assert!(bad(bin(BinaryOp::And), &[i.clone(), i.clone()]));
    assert!(bad(bin(BinaryOp::Or), &[b.clone(), i.clone()]));
    assert!(bad(bin(BinaryOp::BitwiseXor), &[f.clone(), f.clone()]));
    assert!(bad(
        bin(BinaryOp::BitShift { left: true }),
        &[b.clone(), b.clone()]
    ));
    assert!(bad(bin(BinaryOp::GreaterOrEqual), &[b.clone(), b]));
    assert_eq!(
        infer(&bin(BinaryOp::LessOrEqual), &[f, tt(DType::F32, &[3, 1])]).unwrap(),
        vec![tt(DType::Bool, &[3, 2])]
    );
}

#[test]
fn eval_logical() {
    let p = bt(&[4], &[0, 0, 1, 1]);
    let q = bt(&[4], &[0, 1, 0, 1]);
    let cases = [
        (BinaryOp::And, [0, 0, 0, 1]),
        (BinaryOp::Or, [0, 1, 1, 1]),
        (BinaryOp::Xor, [0, 1, 1, 0]),
    ];
    for (op, want) in cases {
        let y = run(bin(op), &[&p, &q]);
        assert_eq!((y.dtype(), y.to_i64_vec()), (DType::Bool, want.to_vec()));
    }
    let y = run(un(UnaryOp::Not), &[&p]);
    assert_eq!(y.to_i64_vec(), vec![1, 1, 0, 0]);
    // Broadcast.
    let y = run(bin(BinaryOp::And), &[&p, &bt(&[2, 1], &[0, 1])]);
    assert_eq!(y.to_i64_vec(), vec![0, 0, 0, 0, 0, 0, 1, 1]);
}

#[test]
fn eval_bitwise() {
    let a = it(DType::I8, &[3], &[0b0101, -1, -128]);
    let b = it(DType::I8, &[3], &[0b0011, 0x0f, 1]);
    assert_eq!(
        run(bin(BinaryOp::BitwiseAnd), &[&a, &b]).to_i64_vec(),
        vec![1, 15, 0]
    );
    assert_eq!(
        run(bin(BinaryOp::BitwiseOr), &[&a, &b]).to_i64_vec(),
        vec![7, -1, -127]
    );
    assert_eq!(
        run(bin(BinaryOp::BitwiseXor), &[&a, &b]).to_i64_vec(),
        vec![6, -16, -127]
    );
    assert_eq!(
        run(un(UnaryOp::BitwiseNot), &[&a]).to_i64_vec(),
        vec![-6, 0, 127]
    );
    let u = it(DType::U16, &[2], &[0, 0x00ff]);
    assert_eq!(
        run(un(UnaryOp::BitwiseNot), &[&u]).to_i64_vec(),
        vec![0xffff, 0xff00]
    );
    let u = it(DType::U64, &[1], &[0]);
    assert_eq!(run(un(UnaryOp::BitwiseNot), &[&u]).to_i64_vec(), vec![-1]);
}

#[test]
fn eval_bit_shift() {
    let shl = || bin(BinaryOp::BitShift { left: true });
    let shr = || bin(BinaryOp::BitShift { left: false });
    // u8: wraps to 8 bits; 8 and more is out of range (0).
    let a = it(DType::U8, &[4], &[16, 4, 1, 255]);
    let b = it(DType::U8, &[4], &[1, 2, 8, 7]);
    assert_eq!(run(shl(), &[&a, &b]).to_i64_vec(), vec![32, 16, 0, 128]);
    assert_eq!(run(shr(), &[&a, &b]).to_i64_vec(), vec![8, 1, 0, 1]);
    // i8: arithmetic right shift; a negative or too large amount gives 0, or -1 shifting a
    // negative value right.
    let a = it(DType::I8, &[5], &[-16, -16, 64, -1, 5]);
    let b = it(DType::I8, &[5], &[2, -1, 1, 9, 8]);
    assert_eq!(run(shr(), &[&a, &b]).to_i64_vec(), vec![-4, -1, 32, -1, 0]);
    assert_eq!(run(shl(), &[&a, &b]).to_i64_vec(), vec![-64, 0, -128, 0, 0]);
    // u64 above i64::MAX shifts as unsigned.
    let a = it(DType::U64, &[2], &[-1, -1]);
    let b = it(DType::U64, &[2], &[60, 64]);
    assert_eq!(run(shr(), &[&a, &b]).to_i64_vec(), vec![15, 0]);
    assert_eq!(run(shl(), &[&a, &b]).to_i64_vec(), vec![-1 << 60, 0]);
}

#[test]
fn eval_ordered_comparisons() {
    let a = ft(&[4], &[1.0, 2.0, f64::NAN, -1.0]);
    let b = ft(&[4], &[1.0, 1.0, 0.0, 0.0]);
    let ge = run(bin(BinaryOp::GreaterOrEqual), &[&a, &b]);
    assert_eq!(
        (ge.dtype(), ge.to_i64_vec()),
        (DType::Bool, vec![1, 1, 0, 0])
    );
    let le = run(bin(BinaryOp::LessOrEqual), &[&a, &b]);
    assert_eq!(le.to_i64_vec(), vec![1, 0, 0, 1]);
    // u64 compares as unsigned.
    let a = it(DType::U64, &[2], &[-1, 3]);
    let b = it(DType::U64, &[2], &[1, 3]);
    assert_eq!(
        run(bin(BinaryOp::GreaterOrEqual), &[&a, &b]).to_i64_vec(),
        vec![1, 1]
    );
    assert_eq!(
        run(bin(BinaryOp::LessOrEqual), &[&a, &b]).to_i64_vec(),
        vec![0, 1]
    );
}

#[test]
fn eval_cast_to_bf16_rounds_to_nearest_even_from_f32() {
    // A tie plus the lowest f32 bit: up (`half`'s from_f64 would drop that bit, then go even).
    let tie_up = f64::from(f32::from_bits(0x3f80_8001));
    let x = ft(
        &[6],
        &[
            1.0 + 2f64.powi(-8),       // a tie: to even (1.0)
            1.0 + 3.0 * 2f64.powi(-8), // a tie: to even (1 + 2^-6)
            tie_up,
            f64::from(f32::MAX), // overflows to inf
            f64::NAN,
            -0.0,
        ],
    );
    let y = run(Op::cast(DType::BF16), &[&x]);
    let v = y.to_f64_vec();
    assert_eq!(v[0], 1.0);
    assert_eq!(v[1], 1.0 + 2f64.powi(-6));
    assert_eq!(
        v[2],
        1.0 + 2f64.powi(-7),
        "{tie_up}: the sticky bit rounds up"
    );
    assert_eq!(v[3], f64::INFINITY);
    assert!(v[4].is_nan());
    assert!(v[5] == 0.0 && v[5].is_sign_negative());
    // An f64 is rounded to f32 first (ml_dtypes): a tie plus 2^-40 lands on the tie, then even.
    let d = dt(&[1], &[1.0 + 2f64.powi(-8) + 2f64.powi(-40)]);
    assert_eq!(run(Op::cast(DType::BF16), &[&d]).to_f64_vec(), vec![1.0]);
}
