//! Pow on the types outside the f32 kernels (a host kernel): integer bases, run-time exponents
//! of integer types, broadcasting — against the reference evaluation and Rust's own powers.

use crate::common::*;

fn model(a: DType, ash: &[usize], b: DType, bsh: &[usize]) -> ModelProto {
    ModelBuilder::new("pow", 15)
        .input("x", a, &dims(ash))
        .input("e", b, &dims(bsh))
        .output("y", a, &[])
        .node("my_pow", "Pow", &["x", "e"], &["y"], vec![])
        .build()
}

fn ints(dtype: DType, shape: &[usize], v: &[i64]) -> Tensor {
    Tensor::from_i64(dtype, shape.to_vec(), v)
}

#[test]
fn pow_mixed_and_integer_types_match_the_reference() {
    let mut rng = Rng(0x5eed_0b01);
    let x = rng.tensor(&[2, 3], -2.0, 2.0);
    let small = [0i64, 1, 2, 3, 4, 5];
    for dt in [DType::I32, DType::I64, DType::U32, DType::U64, DType::I8] {
        // f32 ^ int, the exponent broadcast along the rows.
        let e = ints(dt, &[3], &small[..3]);
        check(
            model(DType::F32, &[2, 3], dt, &[3]),
            &[x.clone(), e],
            1e-5,
            1e-6,
        );
    }
    // int ^ f32 (truncated toward zero), int ^ int.
    let base = ints(DType::I32, &[2, 3], &[2, 3, -4, 5, 0, 7]);
    let fe = Tensor::f32(vec![2, 3], &[0.5, 2.0, 3.0, 1.5, 2.0, -1.0]);
    check(
        model(DType::I32, &[2, 3], DType::F32, &[2, 3]),
        &[base.clone(), fe],
        0.0,
        0.0,
    );
    let ie = ints(DType::I32, &[2, 3], &[3, 4, 3, 2, 0, 2]);
    check(
        model(DType::I32, &[2, 3], DType::I32, &[2, 3]),
        &[base, ie],
        0.0,
        0.0,
    );
}

#[test]
fn pow_int64_is_exact_and_wraps_like_numpy() {
    let (bases, exps) = ([3i64, -2, 2, 3, 7, -1], [4i64, 3, 62, 40, 0, -3]);
    let x = ints(DType::I64, &[6], &bases);
    let e = ints(DType::I64, &[6], &exps);
    let g = import(&model(DType::I64, &[6], DType::I64, &[6]));
    let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
    let exe = compile(&g, &plan).expect("compiles");
    let got = run(&exe, &[x, e])[0].to_i64_vec();
    let want: Vec<i64> = bases
        .iter()
        .zip(&exps)
        .map(|(&b, &p)| {
            if p < 0 {
                if p % 2 == 0 { 1 } else { b }
            } else {
                b.wrapping_pow(p as u32)
            }
        })
        .collect();
    assert_eq!(got, want);
}
