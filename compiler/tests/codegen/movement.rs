//! Views and data movement: Reshape-like views, Transpose/Slice/Concat/Split, Gather.

use crate::common::*;

#[test]
fn views_of_inputs() {
    let mut rng = Rng(8);
    let m = ModelBuilder::new("views", 13)
        .input("x", DType::F32, &dims(&[3, 4]))
        .initializer("shape", &Tensor::i64(vec![2], &[4, 3]))
        .output("y", DType::F32, &dims(&[12]))
        .node("r", "Reshape", &["x", "shape"], &["xr"], vec![])
        .node("relu", "Relu", &["xr"], &["yr"], vec![])
        .node(
            "f",
            "Flatten",
            &["yr"],
            &["yf"],
            vec![("axis", Attr::Int(0))],
        )
        .node("s", "Squeeze", &["yf"], &["y"], vec![])
        .build();
    check(m, &[rng.tensor(&[3, 4], -1.0, 1.0)], RTOL, ATOL);
}

#[test]
fn movement_ops() {
    let mut rng = Rng(123);
    let ints = |v: &[i64]| Attr::Ints(v.to_vec());
    // Transpose.
    for (s, perm, out) in [
        (vec![2, 3, 4], vec![2, 0, 1], vec![4, 2, 3]),
        (vec![5, 8], vec![1, 0], vec![8, 5]),
        (vec![2, 3, 4, 5], vec![0, 2, 1, 3], vec![2, 4, 3, 5]),
    ] {
        let m = ModelBuilder::new("t", 13)
            .input("x", DType::F32, &dims(&s))
            .output("y", DType::F32, &dims(&out))
            .node(
                "t",
                "Transpose",
                &["x"],
                &["y"],
                vec![("perm", ints(&perm))],
            )
            .build();
        check(m, &[rng.tensor(&s, -1.0, 1.0)], 0.0, 0.0);
    }
    // Slice with a negative step.
    let m = ModelBuilder::new("s", 13)
        .input("x", DType::F32, &dims(&[6, 10]))
        .initializer("starts", &Tensor::i64(vec![2], &[1, 9]))
        .initializer("ends", &Tensor::i64(vec![2], &[5, 0]))
        .initializer("axes", &Tensor::i64(vec![2], &[0, 1]))
        .initializer("steps", &Tensor::i64(vec![2], &[2, -2]))
        .output("y", DType::F32, &dims(&[2, 5]))
        .node(
            "s",
            "Slice",
            &["x", "starts", "ends", "axes", "steps"],
            &["y"],
            vec![],
        )
        .build();
    check(m, &[rng.tensor(&[6, 10], -1.0, 1.0)], 0.0, 0.0);
    // Concat with a constant operand, then Split.
    let c = rng.tensor(&[2, 1, 5], -1.0, 1.0);
    let m = ModelBuilder::new("c", 13)
        .input("a", DType::F32, &dims(&[2, 3, 5]))
        .input("b", DType::F32, &dims(&[2, 2, 5]))
        .initializer("c", &c)
        .initializer("split", &Tensor::i64(vec![2], &[4, 2]))
        .output("p", DType::F32, &dims(&[2, 4, 5]))
        .output("q", DType::F32, &dims(&[2, 2, 5]))
        .node(
            "cat",
            "Concat",
            &["a", "b", "c"],
            &["y"],
            vec![("axis", Attr::Int(1))],
        )
        .node(
            "sp",
            "Split",
            &["y", "split"],
            &["p", "q"],
            vec![("axis", Attr::Int(1))],
        )
        .build();
    let ins = [
        rng.tensor(&[2, 3, 5], -1.0, 1.0),
        rng.tensor(&[2, 2, 5], -1.0, 1.0),
    ];
    check(m, &ins, 0.0, 0.0);
}

#[test]
fn gather_embeddings_and_axis() {
    let mut rng = Rng(55);
    // Embedding lookup: constant table, runtime i64 indices (one negative).
    let table = rng.tensor(&[10, 6], -1.0, 1.0);
    let m = ModelBuilder::new("g", 13)
        .input("ids", DType::I64, &dims(&[2, 3]))
        .initializer("table", &table)
        .output("y", DType::F32, &dims(&[2, 3, 6]))
        .node("g", "Gather", &["table", "ids"], &["y"], vec![])
        .build();
    let ids = Tensor::i64(vec![2, 3], &[0, 9, -1, 4, 4, 2]);
    let g = import(&m);
    let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
    let exe = compile(&g, &plan).expect("compiles");
    let mut arena = AlignedBytes::zeroed(exe.arena_bytes());
    let slot = &exe.inputs()[0];
    // SAFETY: the slot lies inside the arena (planned for this input's 48 bytes).
    unsafe {
        std::ptr::copy_nonoverlapping(
            ids.bytes().as_ptr(),
            arena.as_mut_ptr().add(slot.offset),
            48,
        )
    };
    // SAFETY: aligned, sized arena with the input written.
    unsafe { exe.run(arena.as_mut_ptr()) };
    let out = &exe.outputs()[0];
    // SAFETY: the output slot holds 36 floats inside the arena.
    let got: &[f32] =
        unsafe { std::slice::from_raw_parts(arena.as_ptr().add(out.offset) as *const f32, 36) };
    let want = eval_graph(&g, &[ids]).expect("reference")[0].to_f32_vec();
    assert_eq!(got, &want[..]);
    // Runtime data, constant indices, inner axis.
    let m = ModelBuilder::new("g2", 13)
        .input("x", DType::F32, &dims(&[3, 5, 4]))
        .initializer("i", &Tensor::i64(vec![2], &[4, 0]))
        .output("y", DType::F32, &dims(&[3, 2, 4]))
        .node(
            "g",
            "Gather",
            &["x", "i"],
            &["y"],
            vec![("axis", Attr::Int(1))],
        )
        .build();
    check(m, &[rng.tensor(&[3, 5, 4], -1.0, 1.0)], 0.0, 0.0);
}
