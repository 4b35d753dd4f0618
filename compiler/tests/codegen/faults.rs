//! Run-time index faults: an index (or sequence length) out of range at run time is reported
//! through the fault record — the run's error names the node, the op, the value and the valid
//! range — while the kernel clamps it; in-range negative indices work; the same arena serves
//! the next run; a constant bad index is a compile-time error; kernels without run-time
//! indices leave the arena as planned.

use crate::common::*;

/// Imports, plans and compiles `m`; also returns the plan's arena bytes.
fn build(m: &ModelProto) -> (Graph, Executable, usize) {
    let g = import(m);
    let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
    let exe = compile(&g, &plan).unwrap_or_else(|e| panic!("compiles: {e}"));
    (g, exe, plan.arena_bytes)
}

/// Runs `exe` on good inputs in `arena` and compares with the reference.
fn good_run(g: &Graph, exe: &Executable, arena: &mut AlignedBytes, inputs: &[Tensor]) {
    let got = run_in(exe, arena, inputs).unwrap_or_else(|f| panic!("unexpected fault: {f}"));
    let want = eval_graph(g, inputs).expect("reference");
    for (a, b) in got.iter().zip(&want) {
        assert_eq!(a.to_f32_vec(), b.to_f32_vec());
    }
}

#[test]
fn gather_index_out_of_range_is_reported() {
    let mut rng = Rng(0x6a7e);
    for it in [DType::I64, DType::I32] {
        let m = ModelBuilder::new("g", 13)
            .input("table", DType::F32, &dims(&[5, 3]))
            .input("ids", it, &dims(&[4]))
            .output("y", DType::F32, &[])
            .node("lookup", "Gather", &["table", "ids"], &["y"], vec![])
            .build();
        let (g, exe, planned) = build(&m);
        // The record sits after the planned buffers.
        assert_eq!(exe.arena_bytes(), planned.next_multiple_of(64) + 64);
        assert_eq!(exe.checked_nodes().len(), 1);
        let table = rng.tensor(&[5, 3], -1.0, 1.0);
        let ids = |v: &[i64]| Tensor::from_i64(it, vec![4], v);
        let mut arena = AlignedBytes::zeroed(exe.arena_bytes());
        good_run(&g, &exe, &mut arena, &[table.clone(), ids(&[0, -1, 4, -5])]);
        for (bad, value) in [([0, 5, 1, -6], 5), ([-6, 5, 0, 0], -6), ([1, 2, 3, 99], 99)] {
            let e =
                run_in(&exe, &mut arena, &[table.clone(), ids(&bad)]).expect_err("out of range");
            assert_eq!(
                e,
                format!("node 'lookup' (Gather): index {value} is out of range (valid: -5 to 4)")
            );
        }
        // The arena serves the next run.
        good_run(&g, &exe, &mut arena, &[table.clone(), ids(&[3, 3, -2, 0])]);
    }
}

/// A model with one node `n` of `op` over graph inputs `ins` (with good and bad values).
struct Case {
    op: &'static str,
    attrs: Vec<(&'static str, Attr)>,
    ins: Vec<(&'static str, Tensor)>,
    /// The input to replace for the bad run, its bad value and the message's value part.
    bad: (usize, Tensor, &'static str),
}

fn cases() -> Vec<Case> {
    let f = |shape: &[usize]| {
        let n: usize = shape.iter().product();
        Tensor::f32(
            shape.to_vec(),
            &(0..n).map(|i| i as f32 * 0.5 - 2.0).collect::<Vec<_>>(),
        )
    };
    let i = |shape: &[usize], v: &[i64]| Tensor::i64(shape.to_vec(), v);
    vec![
        Case {
            op: "GatherElements",
            attrs: vec![("axis", Attr::Int(1))],
            ins: vec![("x", f(&[3, 4])), ("i", i(&[3, 2], &[0, 3, -1, -4, 2, 1]))],
            bad: (
                1,
                i(&[3, 2], &[0, 3, -1, 4, 2, 1]),
                "index 4 is out of range (valid: -4 to 3)",
            ),
        },
        Case {
            op: "ScatterElements",
            attrs: vec![("axis", Attr::Int(0))],
            ins: vec![
                ("x", f(&[3, 4])),
                ("i", i(&[1, 4], &[0, -1, 2, 1])),
                ("u", f(&[1, 4])),
            ],
            bad: (
                1,
                i(&[1, 4], &[0, -4, 2, 1]),
                "index -4 is out of range (valid: -3 to 2)",
            ),
        },
        Case {
            op: "GatherND",
            attrs: vec![],
            ins: vec![("x", f(&[3, 4])), ("i", i(&[2, 2], &[2, 3, -3, -4]))],
            bad: (
                1,
                i(&[2, 2], &[2, 3, 1, 7]),
                "index 7 is out of range (valid: -4 to 3)",
            ),
        },
        Case {
            op: "ScatterND",
            attrs: vec![],
            ins: vec![
                ("x", f(&[4, 3])),
                ("i", i(&[2, 1], &[3, -4])),
                ("u", f(&[2, 3])),
            ],
            bad: (
                1,
                i(&[2, 1], &[1, 4]),
                "index 4 is out of range (valid: -4 to 3)",
            ),
        },
        Case {
            op: "ReverseSequence",
            attrs: vec![("time_axis", Attr::Int(0)), ("batch_axis", Attr::Int(1))],
            ins: vec![("x", f(&[4, 2, 3])), ("l", i(&[2], &[4, 0]))],
            bad: (
                1,
                i(&[2], &[2, 5]),
                "sequence length 5 is out of range (valid: 0 to 4)",
            ),
        },
    ]
}

#[test]
fn every_index_kernel_reports() {
    for c in cases() {
        let mut b = ModelBuilder::new("t", 18);
        for (name, t) in &c.ins {
            b = b.input(name, t.dtype(), &dims(t.shape()));
        }
        let names: Vec<&str> = c.ins.iter().map(|(n, _)| *n).collect();
        let m = b
            .output("y", DType::F32, &[])
            .node("n", c.op, &names, &["y"], c.attrs.clone())
            .build();
        let (g, exe, _) = build(&m);
        let good: Vec<Tensor> = c.ins.iter().map(|(_, t)| t.clone()).collect();
        let mut arena = AlignedBytes::zeroed(exe.arena_bytes());
        good_run(&g, &exe, &mut arena, &good);
        let mut bad = good.clone();
        bad[c.bad.0] = c.bad.1.clone();
        let e = run_in(&exe, &mut arena, &bad).expect_err(c.op);
        assert_eq!(e, format!("node 'n' ({}): {}", c.op, c.bad.2));
        // The reference refuses the same input.
        assert!(eval_graph(&g, &bad).is_err(), "{}", c.op);
        good_run(&g, &exe, &mut arena, &good);
    }
}

#[test]
fn constant_bad_indices_are_compile_errors() {
    for c in cases() {
        // The bad operand as an initializer, the other inputs at run time.
        let (pos, value, what) = &c.bad;
        let mut b = ModelBuilder::new("t", 18);
        for (k, (name, t)) in c.ins.iter().enumerate() {
            if k != *pos {
                b = b.input(name, t.dtype(), &dims(t.shape()));
            }
        }
        let names: Vec<&str> = c.ins.iter().map(|(n, _)| *n).collect();
        let m = b
            .initializer(c.ins[*pos].0, value)
            .output("y", DType::F32, &[])
            .node("n", c.op, &names, &["y"], c.attrs.clone())
            .build();
        let e = import_model(&m, None, &ImportOptions::default())
            .expect_err("a constant out-of-range index")
            .to_string();
        assert!(
            e.starts_with(&format!("node 'n' ({}): input 1: ", c.op)) && e.contains(what),
            "{e}"
        );
        // The good constant compiles to a kernel that checks nothing at run time.
        let good = &c.ins[*pos].1;
        let mut b = ModelBuilder::new("t", 18);
        for (k, (name, t)) in c.ins.iter().enumerate() {
            if k != *pos {
                b = b.input(name, t.dtype(), &dims(t.shape()));
            }
        }
        let m = b
            .initializer(c.ins[*pos].0, good)
            .output("y", DType::F32, &[])
            .node("n", c.op, &names, &["y"], c.attrs.clone())
            .build();
        let (g, exe, planned) = build(&m);
        assert_eq!(exe.arena_bytes(), planned, "{}: no fault record", c.op);
        assert!(exe.checked_nodes().is_empty());
        let inputs: Vec<Tensor> = c
            .ins
            .iter()
            .enumerate()
            .filter(|(k, _)| k != pos)
            .map(|(_, (_, t))| t.clone())
            .collect();
        let mut arena = AlignedBytes::zeroed(exe.arena_bytes());
        good_run(&g, &exe, &mut arena, &inputs);
    }
    // A Gather whose indices and data are both constant folds: the same error, at import.
    let m = ModelBuilder::new("g", 13)
        .initializer("table", &Tensor::f32(vec![2, 2], &[1.0, 2.0, 3.0, 4.0]))
        .initializer("ids", &Tensor::i64(vec![1], &[-3]))
        .output("y", DType::F32, &[])
        .node("lookup", "Gather", &["table", "ids"], &["y"], vec![])
        .build();
    let e = import_model(&m, None, &ImportOptions::default())
        .expect_err("folds into an error")
        .to_string();
    assert!(
        e.contains("node 'lookup' (Gather)") && e.contains("index -3") && e.contains("-2 to 1"),
        "{e}"
    );
}
