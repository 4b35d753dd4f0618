//! Dropout beyond an Identity: its all-true mask, and a run-time training_mode that must be
//! false (a true one is the run's fault; with ratio 0 it changes nothing).

use crate::common::*;

fn model(ratio: Option<f32>, mask: bool) -> ModelProto {
    let mut m = ModelBuilder::new("dropout", 13)
        .input("x", DType::F64, &dims(&[2, 3]))
        .input("t", DType::Bool, &[])
        .output("y", DType::F64, &[]);
    if mask {
        m = m.output("m", DType::Bool, &[]);
    }
    let r = Tensor::f32(vec![], &[ratio.unwrap_or(0.5)]);
    m = m.initializer("r", &r);
    let outs: &[&str] = if mask { &["y", "m"] } else { &["y"] };
    m.node("my_drop", "Dropout", &["x", "r", "t"], outs, vec![])
        .build()
}

fn build(m: &ModelProto) -> Executable {
    let g = import(m);
    let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
    compile(&g, &plan).expect("compiles")
}

#[test]
fn dropout_mask_and_run_time_training_mode() {
    let x = Tensor::from_f64(
        DType::F64,
        vec![2, 3],
        &[1.0, -2.5, 3.0, 0.125, 5.0, 1e-300],
    );
    let flag = |b: i64| Tensor::from_i64(DType::Bool, vec![], &[b]);
    for mask in [false, true] {
        let exe = build(&model(Some(0.3), mask));
        let mut arena = AlignedBytes::zeroed(exe.arena_bytes());
        let ys = run_in(&exe, &mut arena, &[x.clone(), flag(0)]).expect("inference");
        assert_eq!(ys[0], x);
        if mask {
            assert_eq!(ys[1].to_i64_vec(), vec![1; 6]);
            assert_eq!(ys[1].dtype(), DType::Bool);
        }
        let e = run_in(&exe, &mut arena, &[x.clone(), flag(1)]).expect_err("training");
        assert!(e.contains("my_drop") && e.contains("training_mode"), "{e}");
    }
    // Ratio 0: training changes nothing.
    let exe = build(&model(Some(0.0), true));
    let mut arena = AlignedBytes::zeroed(exe.arena_bytes());
    let ys = run_in(&exe, &mut arena, &[x.clone(), flag(1)]).expect("ratio 0");
    assert_eq!(ys[0], x);
    assert_eq!(ys[1].to_i64_vec(), vec![1; 6]);
}

#[test]
fn dropout_run_time_ratio_zero_allows_training() {
    let m = ModelBuilder::new("dropout", 13)
        .input("x", DType::F32, &dims(&[4]))
        .input("r", DType::F32, &[])
        .input("t", DType::Bool, &[])
        .output("y", DType::F32, &[])
        .output("m", DType::Bool, &[])
        .node("my_drop", "Dropout", &["x", "r", "t"], &["y", "m"], vec![])
        .build();
    let exe = build(&m);
    let mut arena = AlignedBytes::zeroed(exe.arena_bytes());
    let x = Tensor::f32(vec![4], &[1.0, 2.0, 3.0, 4.0]);
    let r = |v: f32| Tensor::f32(vec![], &[v]);
    let t = Tensor::from_i64(DType::Bool, vec![], &[1]);
    let ys = run_in(&exe, &mut arena, &[x.clone(), r(0.0), t.clone()]).expect("ratio 0");
    assert_eq!(ys[0], x);
    assert_eq!(ys[1].to_i64_vec(), vec![1; 4]);
    let e = run_in(&exe, &mut arena, &[x, r(0.25), t]).expect_err("ratio 0.25");
    assert!(e.contains("my_drop") && e.contains("training_mode"), "{e}");
}
