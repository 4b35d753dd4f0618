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
fn slices_of_long_rows() {
    // Windows whose rows are 64 bytes or more (a patch's crops): copied row by row by a host
    // kernel, exact; whole rows (runs across row ends), and 6-d (its leading dims merged).
    let mut rng = Rng(77);
    for (s, starts, ends, out) in [
        (
            vec![2, 3, 20, 70],
            vec![3, 5],
            vec![17, 60],
            vec![2, 3, 14, 55],
        ),
        (
            vec![1, 4, 9, 16],
            vec![1, 0],
            vec![8, 16],
            vec![1, 4, 7, 16],
        ),
        (
            vec![2, 2, 2, 2, 5, 40],
            vec![1, 2],
            vec![5, 38],
            vec![2, 2, 2, 2, 4, 36],
        ),
    ] {
        let r = s.len() as i64;
        let m = ModelBuilder::new("s", 13)
            .input("x", DType::F32, &dims(&s))
            .initializer("starts", &Tensor::i64(vec![2], &starts))
            .initializer("ends", &Tensor::i64(vec![2], &ends))
            .initializer("axes", &Tensor::i64(vec![2], &[r - 2, r - 1]))
            .output("y", DType::F32, &dims(&out))
            .node(
                "s",
                "Slice",
                &["x", "starts", "ends", "axes"],
                &["y"],
                vec![],
            )
            .build();
        check(m, &[rng.tensor(&s, -1.0, 1.0)], 0.0, 0.0);
    }
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
    let ran = unsafe { exe.run(arena.as_mut_ptr()) };
    assert_eq!(ran, Ok(()), "indices in range");
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

/// A random tensor of `dtype` (floats in [-1, 1), integers in [-50, 50), bools, bytes).
fn typed(rng: &mut Rng, dtype: DType, shape: &[usize]) -> Tensor {
    if dtype == DType::F32 {
        return rng.tensor(shape, -1.0, 1.0);
    }
    let n: usize = shape.iter().product();
    let v: Vec<i64> = (0..n)
        .map(|_| {
            let r = (rng.next() % 100) as i64;
            match dtype {
                DType::Bool => r % 2,
                DType::U8 => r + 100,
                _ => r - 50,
            }
        })
        .collect();
    Tensor::from_i64(dtype, shape.to_vec(), &v)
}

const DTYPES: [DType; 5] = [DType::F32, DType::I64, DType::I32, DType::Bool, DType::U8];

fn rand_shape(rng: &mut Rng, rank: usize, max: u64) -> Vec<usize> {
    (0..rank).map(|_| 1 + (rng.next() % max) as usize).collect()
}

#[test]
fn transpose_slice_concat_split_any_dtype() {
    let mut rng = Rng(77);
    for (t, &dt) in DTYPES.iter().enumerate() {
        let s = rand_shape(&mut rng, 3, 5);
        let b = vec![s[0], 2, s[2]];
        let m = ModelBuilder::new("mv", 13)
            .input("x", dt, &dims(&s))
            .input("b", dt, &dims(&b))
            .initializer("starts", &Tensor::i64(vec![1], &[(t % 2) as i64]))
            .initializer("ends", &Tensor::i64(vec![1], &[i64::MAX]))
            .initializer("axes", &Tensor::i64(vec![1], &[2]))
            .initializer("split", &Tensor::i64(vec![2], &[1, s[1] as i64 + 1]))
            .initializer("shape", &Tensor::i64(vec![1], &[-1]))
            .output("p", dt, &dims(&[1]))
            .output("q", dt, &dims(&[1]))
            .output("tr", dt, &dims(&[1]))
            .output("fl", dt, &dims(&[1]))
            .node(
                "cat",
                "Concat",
                &["x", "b"],
                &["c"],
                vec![("axis", Attr::Int(1))],
            )
            .node(
                "sl",
                "Slice",
                &["c", "starts", "ends", "axes"],
                &["sc"],
                vec![],
            )
            .node(
                "sp",
                "Split",
                &["sc", "split"],
                &["p", "q"],
                vec![("axis", Attr::Int(1))],
            )
            .node(
                "t",
                "Transpose",
                &["q"],
                &["tr"],
                vec![("perm", Attr::Ints(vec![2, 0, 1]))],
            )
            .node("r", "Reshape", &["tr", "shape"], &["fl"], vec![])
            .build();
        let ins = [typed(&mut rng, dt, &s), typed(&mut rng, dt, &b)];
        check(m, &ins, 0.0, 0.0);
    }
}

#[test]
fn gather_any_dtype() {
    let mut rng = Rng(78);
    for &dt in &DTYPES {
        let s = rand_shape(&mut rng, 3, 5);
        let idx: Vec<i64> = (0..4)
            .map(|_| (rng.next() % s[1] as u64) as i64 - 1)
            .collect();
        let m = ModelBuilder::new("g", 13)
            .input("x", dt, &dims(&s))
            .initializer("i", &Tensor::i64(vec![2, 2], &idx))
            .output("y", dt, &dims(&[1]))
            .node(
                "g",
                "Gather",
                &["x", "i"],
                &["y"],
                vec![("axis", Attr::Int(1))],
            )
            .build();
        check(m, &[typed(&mut rng, dt, &s)], 0.0, 0.0);
    }
}

#[test]
fn pad_every_mode_random() {
    let mut rng = Rng(4242);
    let modes = ["constant", "reflect", "edge", "wrap"];
    for case in 0..48 {
        let dt = DTYPES[case % DTYPES.len()];
        let mode = modes[(case / DTYPES.len()) % modes.len()];
        let rank = 1 + (rng.next() % 4) as usize;
        let s = rand_shape(&mut rng, rank, 5);
        let mut pads = vec![0i64; 2 * rank];
        for d in 0..rank {
            for side in [d, d + rank] {
                pads[side] = (rng.next() % 5) as i64 - 1;
            }
            // Keep at least one element where reading modes pad.
            while (s[d] as i64) + pads[d].min(0) + pads[d + rank].min(0) < 1 {
                let side = if pads[d] < 0 { d } else { d + rank };
                pads[side] += 1;
            }
        }
        let value = typed(&mut rng, dt, &[]);
        let m = ModelBuilder::new("pad", 19)
            .input("x", dt, &dims(&s))
            .initializer("pads", &Tensor::i64(vec![2 * rank], &pads))
            .initializer("v", &value)
            .output("y", dt, &dims(&[1]))
            .node(
                "p",
                "Pad",
                &["x", "pads", "v"],
                &["y"],
                vec![("mode", Attr::Str(mode.to_string()))],
            )
            .build();
        check(m, &[typed(&mut rng, dt, &s)], 0.0, 0.0);
    }
    // Opset 2 (attribute pads, float value), with axes at opset 18.
    let m = ModelBuilder::new("pad2", 7)
        .input("x", DType::F32, &dims(&[2, 3]))
        .output("y", DType::F32, &dims(&[1]))
        .node(
            "p",
            "Pad",
            &["x"],
            &["y"],
            vec![
                ("pads", Attr::Ints(vec![1, 0, 0, 2])),
                ("value", Attr::Float(2.5)),
            ],
        )
        .build();
    check(m, &[rng.tensor(&[2, 3], -1.0, 1.0)], 0.0, 0.0);
    let m = ModelBuilder::new("pad18", 18)
        .input("x", DType::I64, &dims(&[2, 3, 4]))
        .initializer("pads", &Tensor::i64(vec![2], &[2, -1]))
        .initializer("axes", &Tensor::i64(vec![1], &[-1]))
        .output("y", DType::I64, &dims(&[1]))
        .node(
            "p",
            "Pad",
            &["x", "pads", "", "axes"],
            &["y"],
            vec![("mode", Attr::Str("reflect".into()))],
        )
        .build();
    check(m, &[typed(&mut rng, DType::I64, &[2, 3, 4])], 0.0, 0.0);
}

#[test]
fn expand_and_tile_random() {
    let mut rng = Rng(99);
    for case in 0..30 {
        let dt = DTYPES[case % DTYPES.len()];
        let rank = 1 + (rng.next() % 4) as usize;
        let s: Vec<usize> = (0..rank)
            .map(|_| {
                if rng.next().is_multiple_of(2) {
                    1
                } else {
                    1 + (rng.next() % 4) as usize
                }
            })
            .collect();
        // Expand to a shape with maybe one more leading dim; size-1 dims grow.
        let extra = (rng.next() % 2) as usize;
        let mut target: Vec<i64> = (0..extra).map(|_| 2).collect();
        for &d in &s {
            target.push(if d == 1 {
                1 + (rng.next() % 3) as i64
            } else {
                d as i64
            });
        }
        let reps: Vec<i64> = (0..rank).map(|_| 1 + (rng.next() % 3) as i64).collect();
        let m = ModelBuilder::new("et", 13)
            .input("x", dt, &dims(&s))
            .initializer("shape", &Tensor::i64(vec![target.len()], &target))
            .initializer("reps", &Tensor::i64(vec![rank], &reps))
            .output("e", dt, &dims(&[1]))
            .output("t", dt, &dims(&[1]))
            .node("e", "Expand", &["x", "shape"], &["e"], vec![])
            .node("t", "Tile", &["x", "reps"], &["t"], vec![])
            .build();
        check(m, &[typed(&mut rng, dt, &s)], 0.0, 0.0);
    }
}
