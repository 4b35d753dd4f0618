//! A residual `Add` fused into the Conv before it (`analysis::fuse::residual`,
//! `ConvParams::accumulate`): ResNet-style blocks `s = Relu(x)`, `v = Relu(Conv(s))`,
//! `z = Add(Conv(v), s)`, `Relu(z)`, on geometries that take each conv path (im2col,
//! pointwise, small-plane pointwise, direct, Winograd), at 1 and 2 threads, against the
//! reference evaluation. The fusion must have happened (no `Add` left), and `z` must be
//! planned over `s` when `s` dies there; when `s` is read again (or is the conv's own input)
//! the residual is copied into the output first, and the result is the same.

use arenac_compiler::analysis::liveness::LivenessOptions;
use arenac_compiler::arena::plan_graph;
use arenac_compiler::ir::graph::ValueKind;
use arenac_compiler::ops::{BinaryOp, Op};
use arenac_compiler::par::Pool;

use crate::common::*;

/// Where the residual comes from and who reads it after the block.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Skip {
    /// The block's input `s`, dead after the Add: the output is planned over it.
    Dies,
    /// `s` is read again after the block (`y = Add(Relu(z), s)`): copied, not in place.
    ReadLater,
    /// The second conv's own input `v` (`z = Add(Conv(v), v)`): copied, not in place.
    ConvInput,
}

/// One block: `c` channels, an `h x w` plane, the second conv's kernel `k` ("same" pads).
#[derive(Clone, Copy, Debug)]
struct Block {
    c: usize,
    h: usize,
    w: usize,
    k: usize,
    skip: Skip,
    /// `Add(s, t)` instead of `Add(t, s)`.
    swapped: bool,
}

fn model(b: &Block, rng: &mut Rng) -> ModelProto {
    let (c, k) = (b.c, b.k);
    let p = (k / 2) as i64;
    let shape = [1, c, b.h, b.w];
    let ints = |v: &[i64]| Attr::Ints(v.to_vec());
    let mut mb = ModelBuilder::new("residual", 14)
        .input("x", DType::F32, &dims(&shape))
        .output("y", DType::F32, &dims(&shape))
        .initializer("w1", &rng.tensor(&[c, c, 3, 3], -0.3, 0.3))
        .initializer("b1", &rng.tensor(&[c], -0.5, 0.5))
        .initializer("w2", &rng.tensor(&[c, c, k, k], -0.3, 0.3))
        .initializer("b2", &rng.tensor(&[c], -0.5, 0.5))
        .node("relu0", "Relu", &["x"], &["s"], vec![])
        .node(
            "conv1",
            "Conv",
            &["s", "w1", "b1"],
            &["u"],
            vec![("pads", ints(&[1, 1, 1, 1]))],
        )
        .node("relu1", "Relu", &["u"], &["v"], vec![])
        .node(
            "conv2",
            "Conv",
            &["v", "w2", "b2"],
            &["t"],
            vec![("pads", ints(&[p, p, p, p]))],
        );
    let r = if b.skip == Skip::ConvInput { "v" } else { "s" };
    let add: [&str; 2] = if b.swapped { [r, "t"] } else { ["t", r] };
    mb = mb
        .node("add", "Add", &add, &["z"], vec![])
        .node("relu2", "Relu", &["z"], &["a"], vec![]);
    mb = match b.skip {
        Skip::ReadLater => mb.node("again", "Add", &["a", "s"], &["y"], vec![]),
        _ => mb.node("neg", "Neg", &["a"], &["y"], vec![]),
    };
    mb.build()
}

/// Plans, compiles and runs `g` on `threads` threads; checks the fusion and placement and
/// returns the output.
fn run_block(g: &Graph, b: &Block, x: &Tensor, threads: usize) -> Vec<f32> {
    let mut g2 = g.clone();
    let opts = PlanOptions {
        liveness: LivenessOptions::full().with_threads(threads),
        ..PlanOptions::default()
    };
    let plan = plan_graph(&mut g2, &opts).expect("plans");
    let what = format!("{b:?} at {threads} threads");
    let fused: Vec<_> = g2
        .nodes()
        .filter(|(_, n)| matches!(&n.op, Op::Conv(a) if a.sum))
        .collect();
    assert_eq!(fused.len(), 1, "{what}: one Conv with the residual");
    let adds = g2
        .nodes()
        .filter(|(_, n)| n.op == Op::Binary(BinaryOp::Add))
        .count();
    // (The later `Add(a, s)` joins the Relu in one fused element-wise node.)
    assert_eq!(adds, 0, "{what}: the block's Add is gone");
    let z = g2.find_value("z").expect("z");
    assert!(matches!(g2.value(z).kind, ValueKind::Computed(_)));
    let r = g2
        .find_value(if b.skip == Skip::ConvInput { "v" } else { "s" })
        .expect("r");
    let in_place = plan.value_offset(z) == plan.value_offset(r);
    assert_eq!(
        in_place,
        b.skip == Skip::Dies,
        "{what}: z over the residual"
    );
    let exe = compile(&g2, &plan).unwrap_or_else(|e| panic!("{what}: compiles: {e}"));
    let pool = Pool::new(threads).expect("threads");
    pool.set_eager(true);
    let mut arena = AlignedBytes::zeroed(exe.arena_bytes());
    let slot = &exe.inputs()[0];
    let bytes = x.bytes();
    arena.as_mut_slice()[slot.offset..slot.offset + bytes.len()].copy_from_slice(bytes);
    // SAFETY: the arena is 64-aligned, `arena_bytes` long, ours alone, the input written.
    unsafe { exe.run_with(arena.as_mut_ptr(), Some(&pool)) }.expect("no fault");
    let out = &exe.outputs()[0];
    let n = out.ty.bytes().expect("static");
    let t = Tensor::from_bytes(
        DType::F32,
        out.ty.shape.clone(),
        arena.as_slice()[out.offset..out.offset + n].to_vec().into(),
    )
    .expect("output");
    t.to_f32_vec()
}

fn check(b: Block, seed: u64) {
    let mut rng = Rng(seed);
    let g = import(&model(&b, &mut rng));
    let x = rng.tensor(&[1, b.c, b.h, b.w], -2.0, 2.0);
    let want = eval_graph(&g, std::slice::from_ref(&x)).expect("reference")[0].to_f32_vec();
    let scale = want.iter().fold(1f32, |m, v| m.max(v.abs()));
    for threads in [1, 2] {
        let got = run_block(&g, &b, &x, threads);
        for (i, (a, e)) in got.iter().zip(&want).enumerate() {
            assert!(
                (a - e).abs() <= 1e-4 * scale,
                "{b:?} at {threads} threads: element {i}: got {a}, want {e}"
            );
        }
    }
}

/// Each conv path, the residual dying at the Conv (planned in place).
#[test]
fn residual_in_place_on_every_conv_path() {
    let shapes = [
        // im2col (a small plane of a 3x3), small-plane pointwise, pointwise over a large
        // plane, direct (wide rows), Winograd (64 channels, 28x28).
        (5, 9, 7, 3),
        (24, 9, 11, 1),
        (32, 40, 44, 1),
        (16, 20, 70, 3),
        (64, 28, 28, 3),
    ];
    for (i, &(c, h, w, k)) in shapes.iter().enumerate() {
        let b = Block {
            c,
            h,
            w,
            k,
            skip: Skip::Dies,
            swapped: i % 2 == 1,
        };
        check(b, 0x5e5 + i as u64);
    }
}

/// The residual read again later, or the conv's own input: copied into the output first.
#[test]
fn residual_copied_when_it_lives_on() {
    for (i, skip) in [Skip::ReadLater, Skip::ConvInput].into_iter().enumerate() {
        for &(c, h, w, k) in &[(8, 10, 12, 3), (64, 28, 28, 3), (24, 9, 11, 1)] {
            let b = Block {
                c,
                h,
                w,
                k,
                skip,
                swapped: i == 1,
            };
            check(b, 0xc0 + c as u64);
        }
    }
}
