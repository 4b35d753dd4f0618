//! The residual fusion on 16-bit activations (`--activations f16|bf16`,
//! `analysis::fuse::residual`, `gemm::stage16::conv::residual`): blocks `s = Relu(x)`,
//! `r = Relu(q)`, `z = Add(Conv(s), r)`, `Neg(Relu(z))` on geometries that take each 16-bit
//! conv path (the unstaged small-plane and GEMM-path pointwise kernels, staged row bands on
//! the im2col and direct kernels, a 1x1 stride-2 downsample, Winograd bands), f16 and bf16,
//! at 1 and 2 threads. The fusion must have happened (one Conv with the residual, no Add
//! left) with `z` planned over `r`; the output is compared with the unfused 16-bit program
//! (`fuse_elementwise: false`: the Conv's output rounded, then the Add's: within one 16-bit
//! rounding of the magnitudes) and with the f32 reference (16-bit tolerance). A first layer
//! (at most 4 input channels: the unstaged row kernel) keeps its Add.

use arenac_compiler::analysis::act_type::ActType;
use arenac_compiler::analysis::liveness::LivenessOptions;
use arenac_compiler::arena::plan_graph;
use arenac_compiler::gemm::conv::ConvParams;
use arenac_compiler::gemm::stage16::conv::{pw_big_direct, pw_direct};
use arenac_compiler::ops::{BinaryOp, Op};
use arenac_compiler::par::Pool;

use crate::common::*;

/// One block: `c -> m` channels, an `h x w` input plane, the conv's kernel `k` ("same"
/// pads) and stride `s`.
#[derive(Clone, Copy, Debug)]
struct Block {
    c: usize,
    m: usize,
    h: usize,
    w: usize,
    k: usize,
    s: usize,
    /// `Add(r, t)` instead of `Add(t, r)`.
    swapped: bool,
}

impl Block {
    fn out(&self) -> [usize; 4] {
        let p = self.k / 2;
        let o = |d: usize| (d + 2 * p - self.k) / self.s + 1;
        [1, self.m, o(self.h), o(self.w)]
    }

    fn params(&self) -> ConvParams {
        let (p, k, s) = (self.k / 2, self.k, self.s);
        ConvParams::from_shapes(
            &[1, self.c, self.h, self.w],
            &self.out(),
            &[k, k],
            &[s, s],
            &[1, 1],
            &[p, p, p, p],
            1,
        )
        .expect("a 2-d conv")
    }
}

fn model(b: &Block, rng: &mut Rng) -> ModelProto {
    let (p, k, s) = ((b.k / 2) as i64, b.k as i64, b.s as i64);
    let out = b.out();
    let add: [&str; 2] = if b.swapped { ["r", "t"] } else { ["t", "r"] };
    ModelBuilder::new("residual16", 14)
        .input("x", DType::F32, &dims(&[1, b.c, b.h, b.w]))
        .input("q", DType::F32, &dims(&out))
        .output("y", DType::F32, &dims(&out))
        .initializer("w", &rng.tensor(&[b.m, b.c, b.k, b.k], -0.3, 0.3))
        .initializer("b", &rng.tensor(&[b.m], -0.5, 0.5))
        .node("relu_x", "Relu", &["x"], &["s"], vec![])
        .node("relu_q", "Relu", &["q"], &["r"], vec![])
        .node(
            "conv",
            "Conv",
            &["s", "w", "b"],
            &["t"],
            vec![
                ("kernel_shape", Attr::Ints(vec![k, k])),
                ("strides", Attr::Ints(vec![s, s])),
                ("pads", Attr::Ints(vec![p, p, p, p])),
            ],
        )
        .node("add", "Add", &add, &["z"], vec![])
        .node("relu_z", "Relu", &["z"], &["a"], vec![])
        .node("neg", "Neg", &["a"], &["y"], vec![])
        .build()
}

/// Plans `g` with `act` activations on `threads` threads (the residual fusion on when
/// `fuse`), checks the fusion and the placement, compiles and runs it: the output.
fn run_block(
    g: &Graph,
    what: &str,
    inputs: &[Tensor],
    act: ActType,
    threads: usize,
    fuse: bool,
    expect_fused: bool,
) -> Vec<f32> {
    let mut g2 = g.clone();
    let opts = PlanOptions {
        activations: act,
        fuse_elementwise: fuse,
        liveness: LivenessOptions::full().with_threads(threads),
        ..PlanOptions::default()
    };
    let plan = plan_graph(&mut g2, &opts).expect("plans");
    let sums = g2
        .nodes()
        .filter(|(_, n)| matches!(&n.op, Op::Conv(a) if a.sum))
        .count();
    let adds = g2
        .nodes()
        .filter(|(_, n)| n.op == Op::Binary(BinaryOp::Add))
        .count();
    let fused = fuse && expect_fused;
    assert_eq!(sums, usize::from(fused), "{what}: Convs with the residual");
    if fused {
        assert_eq!(adds, 0, "{what}: the Add is gone");
        let (z, r) = (
            g2.find_value("z").expect("z"),
            g2.find_value("r").expect("r"),
        );
        assert_eq!(act.dtype(), g2.value(z).ty.dtype, "{what}: 16-bit output");
        assert_eq!(
            plan.value_offset(z),
            plan.value_offset(r),
            "{what}: z over the residual"
        );
    }
    let exe = compile(&g2, &plan).unwrap_or_else(|e| panic!("{what}: compiles: {e}"));
    let pool = Pool::new(threads).expect("threads");
    pool.set_eager(true);
    let mut arena = AlignedBytes::zeroed(exe.arena_bytes());
    for (slot, t) in exe.inputs().iter().zip(inputs) {
        let n = slot.stored_bytes().expect("static");
        slot.store(
            t.bytes(),
            &mut arena.as_mut_slice()[slot.offset..slot.offset + n],
        );
    }
    // SAFETY: the arena is 64-aligned, `arena_bytes` long, ours alone, the inputs written.
    unsafe { exe.run_with(arena.as_mut_ptr(), Some(&pool)) }.expect("no fault");
    let out = &exe.outputs()[0];
    let n = out.ty.bytes().expect("static");
    Tensor::from_bytes(
        DType::F32,
        out.ty.shape.clone(),
        arena.as_slice()[out.offset..out.offset + n].to_vec().into(),
    )
    .expect("output")
    .to_f32_vec()
}

fn check(b: Block, seed: u64, expect_fused: bool) {
    let mut rng = Rng(seed);
    let g = import(&model(&b, &mut rng));
    let x = rng.tensor(&[1, b.c, b.h, b.w], -2.0, 2.0);
    let q = rng.tensor(&b.out(), -2.0, 2.0);
    let inputs = [x, q];
    let want = eval_graph(&g, &inputs).expect("reference")[0].to_f32_vec();
    let zmax = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    let scale = zmax.max(1.0);
    // |t| <= |z| + |r|: the magnitudes either program rounds.
    let mag = zmax + 2.0;
    for (act, ulp, tol) in [
        (ActType::F16, 2f32.powi(-10), 1e-2f32),
        (ActType::Bf16, 2f32.powi(-7), 4e-2),
    ] {
        for threads in [1, 2] {
            let what = format!("{b:?} {} at {threads} threads", act.name());
            let got = run_block(&g, &what, &inputs, act, threads, true, expect_fused);
            let unfused = run_block(&g, &what, &inputs, act, threads, false, expect_fused);
            for (i, ((a, u), e)) in got.iter().zip(&unfused).zip(&want).enumerate() {
                assert!(
                    (a - u).abs() <= ulp * mag,
                    "{what}: element {i}: fused {a}, unfused {u}"
                );
                assert!(
                    (a - e).abs() <= tol * scale,
                    "{what}: element {i}: got {a}, f32 reference {e}"
                );
            }
        }
    }
}

/// Each 16-bit conv path with the residual dying at the Conv (planned in place).
#[test]
fn residual16_in_place_on_every_conv_path() {
    let blocks = [
        // The small-plane pointwise kernel, unstaged (7x7: ResNet-50's last stage's conv3;
        // 1x1 planes: the chunked tasks at 2 threads).
        (
            Block {
                c: 64,
                m: 96,
                h: 7,
                w: 7,
                k: 1,
                s: 1,
                swapped: false,
            },
            Some(true),
        ),
        (
            Block {
                c: 96,
                m: 48,
                h: 1,
                w: 1,
                k: 1,
                s: 1,
                swapped: true,
            },
            Some(true),
        ),
        (
            Block {
                c: 256,
                m: 64,
                h: 14,
                w: 14,
                k: 1,
                s: 1,
                swapped: false,
            },
            Some(true),
        ),
        // The GEMM path's pointwise kernel, unstaged (28x28; more channels than one block).
        (
            Block {
                c: 32,
                m: 40,
                h: 28,
                w: 28,
                k: 1,
                s: 1,
                swapped: true,
            },
            Some(false),
        ),
        (
            Block {
                c: 64,
                m: 200,
                h: 14,
                w: 18,
                k: 1,
                s: 1,
                swapped: false,
            },
            Some(false),
        ),
        // Staged row bands: a 1x1 stride-2 downsample, im2col on a small plane, the direct
        // kernel on wide rows, Winograd bands (64 channels, 28x28).
        (
            Block {
                c: 64,
                m: 128,
                h: 28,
                w: 28,
                k: 1,
                s: 2,
                swapped: false,
            },
            None,
        ),
        (
            Block {
                c: 5,
                m: 7,
                h: 9,
                w: 7,
                k: 3,
                s: 1,
                swapped: true,
            },
            None,
        ),
        (
            Block {
                c: 16,
                m: 16,
                h: 20,
                w: 70,
                k: 3,
                s: 1,
                swapped: false,
            },
            None,
        ),
        (
            Block {
                c: 64,
                m: 64,
                h: 28,
                w: 28,
                k: 3,
                s: 1,
                swapped: true,
            },
            None,
        ),
    ];
    for (i, &(b, small)) in blocks.iter().enumerate() {
        // The pointwise geometries take the unstaged kernels they are meant to cover.
        if let Some(small) = small {
            let p = b.params();
            let direct = if small {
                pw_direct(&p)
            } else {
                pw_big_direct(&p)
            };
            let avx512bw = std::arch::is_x86_feature_detected!("avx512bw");
            assert!(
                direct || (small && !avx512bw),
                "{b:?}: not on the kernel it covers"
            );
        }
        check(b, 0x16_5e5 + i as u64, true);
    }
}

/// A first layer (3 input channels: the unstaged row kernel, which adds no residual) keeps
/// its Add under 16-bit activations; the results still agree.
#[test]
fn residual16_not_fused_on_a_first_layer() {
    let b = Block {
        c: 3,
        m: 16,
        h: 24,
        w: 40,
        k: 3,
        s: 1,
        swapped: false,
    };
    check(b, 0x3f, false);
}
