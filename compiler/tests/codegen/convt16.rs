//! ConvTranspose on 16-bit activations (`gemm::stage16::convt`): every output is the f32
//! ConvTranspose's f32 bits (the JIT col2im kernel, on inputs exact in 16 bits) rounded once,
//! bit for bit, for f16 and bf16 at 1 to 3 threads, over strides, kernels larger than the
//! stride, pads (asymmetric), output padding, dilation, groups, odd sizes, 1-d and 2-d,
//! several tiles and bands; the node must run staged (none kept in f32).

use arenac_compiler::analysis::act_type::ActType;
use arenac_compiler::arena::plan_graph;

use crate::common::*;

/// `[c, mg, groups, stride, dilation, output padding]` and the pads (begin then end per dim).
struct Case {
    spatial: Vec<usize>,
    k: Vec<usize>,
    c: usize,
    mg: usize,
    groups: usize,
    stride: usize,
    dil: usize,
    out_pad: usize,
    pads: Vec<usize>,
    bias: bool,
}

fn model(rng: &mut Rng, cs: &Case) -> (ModelProto, Vec<Tensor>) {
    let d = cs.spatial.len();
    let mut xs = vec![2, cs.c];
    xs.extend_from_slice(&cs.spatial);
    let mut ws = vec![cs.c, cs.mg];
    ws.extend_from_slice(&cs.k);
    // Inputs k/64 (|k| <= 64): exact in f16 and bf16, so both runs read the same values.
    let n: usize = xs.iter().product();
    let xv: Vec<f32> = (0..n)
        .map(|_| ((rng.next() % 129) as f32 - 64.0) / 64.0)
        .collect();
    let x = Tensor::f32(xs.clone(), &xv);
    let w = rng.tensor(&ws, -1.0, 1.0);
    let mut b = ModelBuilder::new("ct16", 17)
        .input("x", DType::F32, &dims(&xs))
        .initializer("w", &w)
        .output("z", DType::F32, &dims(&[1]));
    let mut ins = vec!["x", "w"];
    if cs.bias {
        b = b.initializer("b", &rng.tensor(&[cs.mg * cs.groups], -1.0, 1.0));
        ins.push("b");
    }
    let m = b
        .node(
            "ct",
            "ConvTranspose",
            &ins,
            &["y"],
            vec![
                ("group", Attr::Int(cs.groups as i64)),
                (
                    "kernel_shape",
                    Attr::Ints(cs.k.iter().map(|&k| k as i64).collect()),
                ),
                ("strides", Attr::Ints(vec![cs.stride as i64; d])),
                (
                    "pads",
                    Attr::Ints(cs.pads.iter().map(|&p| p as i64).collect()),
                ),
                ("dilations", Attr::Ints(vec![cs.dil as i64; d])),
                ("output_padding", Attr::Ints(vec![cs.out_pad as i64; d])),
            ],
        )
        // Neg (exact) keeps the ConvTranspose's output an intermediate.
        .node("neg", "Neg", &["y"], &["z"], vec![])
        .build();
    (m, vec![x])
}

fn run_with(g: &Graph, inputs: &[Tensor], act: ActType, threads: usize) -> (Vec<f32>, usize) {
    let mut g = g.clone();
    let opts = PlanOptions {
        activations: act,
        liveness: arenac_compiler::analysis::liveness::LivenessOptions::full()
            .with_threads(threads),
        ..PlanOptions::default()
    };
    let plan = plan_graph(&mut g, &opts).expect("plans");
    let r = &plan.activations;
    if act != ActType::F32 {
        assert!(
            r.kept.is_empty(),
            "{}: kept in f32: {:?}",
            act.name(),
            r.kept
        );
        assert_eq!(r.staged_nodes, 1, "{}: {r:?}", act.name());
    }
    let exe = compile(&g, &plan).unwrap_or_else(|e| panic!("compiles ({}): {e}", act.name()));
    (run(&exe, inputs)[0].to_f32_vec(), plan.arena_bytes)
}

fn check(rng: &mut Rng, cs: &Case) {
    let (m, inputs) = model(rng, cs);
    let g = import(&m);
    let (want, _) = run_with(&g, &inputs, ActType::F32, 1);
    for act in [ActType::F16, ActType::Bf16] {
        let round = |v: f32| match act {
            ActType::F16 => half::f16::from_f32(v).to_f32(),
            _ => half::bf16::from_f32(v).to_f32(),
        };
        for threads in 1..=3 {
            let (got, _) = run_with(&g, &inputs, act, threads);
            assert_eq!(got.len(), want.len());
            for (i, (&a, &b)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    a.to_bits(),
                    round(b).to_bits(),
                    "{} at {threads} threads, element {i}: {a} vs f32 {b} rounded {}; \
                     spatial {:?} k {:?} c {} mg {} groups {} stride {} dil {} out_pad {} \
                     pads {:?}",
                    act.name(),
                    round(b),
                    cs.spatial,
                    cs.k,
                    cs.c,
                    cs.mg,
                    cs.groups,
                    cs.stride,
                    cs.dil,
                    cs.out_pad,
                    cs.pads
                );
            }
        }
    }
}

#[test]
fn convt16_bit_identical_grid() {
    let mut rng = Rng(0xc716);
    let pick = |rng: &mut Rng, lo: usize, hi: usize| lo + (rng.next() as usize) % (hi - lo + 1);
    let mut n = 0;
    while n < 36 {
        let d = if n % 4 == 3 { 1 } else { 2 };
        let groups = pick(&mut rng, 1, 3);
        let (stride, dil) = (pick(&mut rng, 1, 3), pick(&mut rng, 1, 2));
        let k: Vec<usize> = (0..d).map(|_| pick(&mut rng, 1, 4)).collect();
        let spatial: Vec<usize> = (0..d).map(|_| pick(&mut rng, 1, 23)).collect();
        let out_pad = pick(&mut rng, 0, stride.max(dil) - 1);
        let pads: Vec<usize> = (0..2 * d).map(|_| pick(&mut rng, 0, 2)).collect();
        let ok = (0..d).all(|i| {
            stride * (spatial[i] - 1) + (k[i] - 1) * dil + 1 + out_pad > pads[i] + pads[d + i]
        });
        if !ok {
            continue;
        }
        let cs = Case {
            spatial,
            k,
            c: groups * pick(&mut rng, 1, 5),
            mg: pick(&mut rng, 1, 9),
            groups,
            stride,
            dil,
            out_pad,
            pads,
            bias: n % 3 != 0,
        };
        check(&mut rng, &cs);
        n += 1;
    }
}

#[test]
fn convt16_bands_and_tiles() {
    let mut rng = Rng(0xc717);
    let case = |spatial: &[usize], k: usize, c: usize, mg: usize, stride: usize, pad: usize| {
        let d = spatial.len();
        Case {
            spatial: spatial.to_vec(),
            k: vec![k; d],
            c,
            mg,
            groups: 1,
            stride,
            dil: 1,
            out_pad: 0,
            pads: vec![pad; 2 * d],
            bias: true,
        }
    };
    for cs in [
        // DBNet's 2x2 stride-2 upsampling: many bands, tiles of 3 input rows.
        case(&[40, 80], 2, 16, 64, 2, 0),
        // Overlapping kernels over several bands and tiles (GAN/super-resolution 4x4/s2/p1).
        case(&[37, 45], 4, 8, 48, 2, 1),
        case(&[30, 70], 3, 5, 40, 1, 1),
        // A row wider than one tile.
        case(&[5, 300], 3, 3, 24, 2, 1),
        // 1-d, long.
        case(&[700], 5, 6, 7, 3, 2),
        // Kernel = stride along the row (interleaved col2im), stride 3.
        case(&[11, 13], 3, 4, 5, 3, 0),
    ] {
        check(&mut rng, &cs);
    }
    // Kernel = stride with output padding (a last column of bias alone), two groups, dilated
    // rows.
    for groups in [1, 2] {
        let cs = Case {
            spatial: vec![9, 14],
            k: vec![2, 2],
            c: 3 * groups,
            mg: 4,
            groups,
            stride: 2,
            dil: 1,
            out_pad: 1,
            pads: vec![1, 0, 0, 0],
            bias: true,
        };
        check(&mut rng, &cs);
    }
}
