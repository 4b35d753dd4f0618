//! BitCast: a view whose output reads the input's bytes as another element type of the same
//! size — the JIT (a copy, or nothing when the buffers coincide) against Rust's own bit casts.

use crate::common::*;

fn model(from: DType, to: i64, shape: &[usize]) -> ModelProto {
    ModelBuilder::new("bitcast", 26)
        .input("x", from, &dims(shape))
        .output("y", DType::F32, &[])
        .node(
            "my_cast",
            "BitCast",
            &["x"],
            &["y"],
            vec![("to", Attr::Int(to))],
        )
        .build()
}

#[test]
fn bitcast_reinterprets_the_bytes() {
    let v = [1.5f32, -0.0, f32::INFINITY, 3.25e-39, -7.0, 1e30];
    let x = Tensor::f32(vec![2, 3], &v);
    // float -> int32 (6)
    let exe = check(
        model(DType::F32, 6, &[2, 3]),
        std::slice::from_ref(&x),
        0.0,
        0.0,
    );
    let y = run(&exe, &[x])[0].clone();
    assert_eq!(y.dtype(), DType::I32);
    let want: Vec<i64> = v.iter().map(|f| i64::from(f.to_bits() as i32)).collect();
    assert_eq!(y.to_i64_vec(), want);
    // int64 -> double (11), a scalar.
    let x = Tensor::i64(vec![], &[0x4009_21fb_5444_2d18]);
    let exe = check(
        model(DType::I64, 11, &[]),
        std::slice::from_ref(&x),
        0.0,
        0.0,
    );
    let y = run(&exe, &[x])[0].to_f64_vec();
    assert_eq!(y, vec![std::f64::consts::PI]);
}

#[test]
fn bitcast_errors_name_the_node() {
    for (from, to, want) in [
        (DType::F32, 7, "8 bytes"),
        (DType::U8, 9, "to bool"),
        (DType::F32, 1000, "element type 1000"),
    ] {
        let err = import_model(&model(from, to, &[4]), None, &ImportOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("my_cast") && err.contains("BitCast") && err.contains(want),
            "{err}"
        );
    }
}
