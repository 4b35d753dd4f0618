//! Logical (And/Or/Xor/Not on bool), bitwise (BitwiseAnd/Or/Xor/Not), BitShift, the ordered
//! comparisons (GreaterOrEqual, LessOrEqual) and CastLike: the JIT against the reference on
//! random broadcast shapes, every integer dtype, compared exactly.

use crate::common::*;
use crate::typed::{INTS, check_exact, float_values, ints};

/// A random output shape (rank 0 to 4) and two input shapes broadcasting to it (dims dropped
/// from the front or set to 1 at random).
fn broadcast_shapes(rng: &mut Rng) -> [Vec<usize>; 3] {
    let rank = (rng.next() % 5) as usize;
    let out: Vec<usize> = (0..rank).map(|_| 1 + (rng.next() % 7) as usize).collect();
    let mut input = || {
        let drop = (rng.next() % (rank as u64 + 1)) as usize;
        out[drop..]
            .iter()
            .map(|&d| if rng.next().is_multiple_of(3) { 1 } else { d })
            .collect::<Vec<usize>>()
    };
    let (a, b) = (input(), input());
    // The output is the broadcast of the two (a dim of `out` that both set to 1 is 1).
    let n = out.len();
    let at = |s: &[usize], k: usize| (k + s.len()).checked_sub(n).map_or(1, |i| s[i]);
    let y = (0..n).map(|k| at(&a, k).max(at(&b, k))).collect();
    [a, b, y]
}

fn model(dt: DType, out: DType, s: &[Vec<usize>; 3], opset: i64) -> ModelBuilder {
    ModelBuilder::new("l", opset)
        .input("a", dt, &dims(&s[0]))
        .input("b", dt, &dims(&s[1]))
        .output("y", out, &dims(&s[2]))
}

fn unary(op: &str, dt: DType, shape: &[usize], opset: i64) -> ModelProto {
    ModelBuilder::new("u", opset)
        .input("x", dt, &dims(shape))
        .output("y", dt, &dims(shape))
        .node("n", op, &["x"], &["y"], vec![])
        .build()
}

#[test]
fn logical_ops_on_bools() {
    let mut rng = Rng(0xb001);
    for _ in 0..6 {
        let s = broadcast_shapes(&mut rng);
        for op in ["And", "Or", "Xor"] {
            let m = model(DType::Bool, DType::Bool, &s, 13)
                .node("n", op, &["a", "b"], &["y"], vec![])
                .build();
            let ins = [
                ints(&mut rng, DType::Bool, &s[0], false),
                ints(&mut rng, DType::Bool, &s[1], false),
            ];
            check_exact(m, &ins);
        }
        // Not is unchanged since opset 1: a model importing opset 1 compiles.
        for opset in [1, 13] {
            let x = ints(&mut rng, DType::Bool, &s[0], false);
            check_exact(unary("Not", DType::Bool, &s[0], opset), &[x]);
        }
    }
}

#[test]
fn bool_bytes_other_than_0_and_1_are_true() {
    let bytes = |v: &[u8]| Tensor::from_bytes(DType::Bool, vec![v.len()], v.to_vec().into());
    let a = bytes(&[0, 1, 2, 255, 0, 2, 64, 1, 128]).expect("bool bytes");
    let b = bytes(&[2, 2, 1, 0, 0, 4, 64, 0, 1]).expect("bool bytes");
    let s = [vec![9], vec![9], vec![9]];
    for op in ["And", "Or", "Xor", "Equal"] {
        let m = model(DType::Bool, DType::Bool, &s, 13)
            .node("n", op, &["a", "b"], &["y"], vec![])
            .build();
        check_exact(m, &[a.clone(), b.clone()]);
    }
    check_exact(
        unary("Not", DType::Bool, &[9], 13),
        std::slice::from_ref(&a),
    );
}

#[test]
fn bitwise_every_int_dtype() {
    let mut rng = Rng(0xb17);
    for dt in INTS {
        for _ in 0..3 {
            let s = broadcast_shapes(&mut rng);
            for op in ["BitwiseAnd", "BitwiseOr", "BitwiseXor"] {
                let m = model(dt, dt, &s, 18)
                    .node("n", op, &["a", "b"], &["y"], vec![])
                    .build();
                let ins = [
                    ints(&mut rng, dt, &s[0], false),
                    ints(&mut rng, dt, &s[1], false),
                ];
                check_exact(m, &ins);
            }
            let x = ints(&mut rng, dt, &s[2], false);
            check_exact(unary("BitwiseNot", dt, &s[2], 18), &[x]);
        }
    }
}

#[test]
fn bit_shift_every_int_dtype_and_amounts_out_of_range() {
    let mut rng = Rng(0x5417);
    for dt in INTS {
        let bits = 8 * dt.size() as u64;
        for _ in 0..3 {
            let s = broadcast_shapes(&mut rng);
            for dir in ["LEFT", "RIGHT"] {
                let m = model(dt, dt, &s, 11)
                    .node(
                        "n",
                        "BitShift",
                        &["a", "b"],
                        &["y"],
                        vec![("direction", Attr::Str(dir.into()))],
                    )
                    .build();
                // Amounts from -3 to bits + 3 (negative ones wrap for unsigned dtypes).
                let n: usize = s[1].iter().product();
                let amounts: Vec<i64> = (0..n)
                    .map(|_| (rng.next() % (bits + 7)) as i64 - 3)
                    .collect();
                let ins = [
                    ints(&mut rng, dt, &s[0], false),
                    Tensor::from_i64(dt, s[1].clone(), &amounts),
                ];
                check_exact(m, &ins);
            }
        }
    }
}

#[test]
fn ordered_comparisons_every_dtype() {
    let mut rng = Rng(0x6e9);
    let dtypes = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
    ];
    for dt in dtypes {
        for _ in 0..3 {
            let s = broadcast_shapes(&mut rng);
            let make = |rng: &mut Rng, shape: &[usize]| {
                // Few distinct values so that equal pairs occur; NaN among floats.
                let n: usize = shape.iter().product();
                if dt.is_float() {
                    let v: Vec<f64> = (0..n)
                        .map(|_| match rng.next() % 6 {
                            5 => f64::NAN,
                            k => k as f64 - 2.0,
                        })
                        .collect();
                    Tensor::from_f64(dt, shape.to_vec(), &v)
                } else {
                    let v: Vec<i64> = (0..n).map(|_| (rng.next() % 5) as i64 - 2).collect();
                    Tensor::from_i64(dt, shape.to_vec(), &v)
                }
            };
            for op in ["GreaterOrEqual", "LessOrEqual"] {
                let m = model(dt, DType::Bool, &s, 16)
                    .node("n", op, &["a", "b"], &["y"], vec![])
                    .build();
                let ins = [make(&mut rng, &s[0]), make(&mut rng, &s[1])];
                check_exact(m, &ins);
            }
        }
    }
}

#[test]
fn cast_like_casts_to_the_second_inputs_dtype() {
    let mut rng = Rng(0xca571);
    for (from, to) in [
        (DType::F32, DType::BF16),
        (DType::BF16, DType::F32),
        (DType::F64, DType::F16),
        (DType::F32, DType::I32),
        (DType::I64, DType::F64),
    ] {
        let n = 45;
        let x = if from.is_float() {
            Tensor::from_f64(from, vec![n], &float_values(&mut rng, n))
        } else {
            ints(&mut rng, from, &[n], false)
        };
        let like = Tensor::from_i64(to, vec![2], &[0, 0]);
        let m = ModelBuilder::new("c", 15)
            .input("x", from, &dims(&[n]))
            .input("like", to, &dims(&[2]))
            .output("y", to, &dims(&[n]))
            .node("n", "CastLike", &["x", "like"], &["y"], vec![])
            .build();
        check_exact(m, &[x, like]);
    }
}
