use super::*;
use crate::ops::elementwise::unary_f64;

#[test]
fn bcast_forms() {
    let y = [2, 3, 4, 5];
    assert_eq!(
        bcast(&y, &y),
        Some(Bcast {
            inner: 1,
            count: 120
        })
    );
    assert_eq!(bcast(&[1], &y), Some(Bcast { inner: 1, count: 1 }));
    assert_eq!(bcast(&[], &y), Some(Bcast { inner: 1, count: 1 }));
    assert_eq!(
        bcast(&[1, 3, 1, 1], &y),
        Some(Bcast {
            inner: 20,
            count: 3
        })
    );
    assert_eq!(
        bcast(&[3, 1, 1], &y),
        Some(Bcast {
            inner: 20,
            count: 3
        })
    );
    assert_eq!(bcast(&[5], &y), Some(Bcast { inner: 1, count: 5 }));
    assert_eq!(
        bcast(&[2, 3, 1, 1], &y),
        Some(Bcast {
            inner: 20,
            count: 6
        })
    );
    // A gap (dims 0 and 2 kept, 1 broadcast), a mismatch, more dims than the output.
    assert_eq!(bcast(&[2, 1, 4, 1], &y), None);
    assert_eq!(bcast(&[1, 2, 1, 1], &y), None);
    assert_eq!(bcast(&[1, 2, 3, 4, 5], &y), None);
    // Unit dims of the output inside the block do not break it.
    assert_eq!(
        bcast(&[4, 1, 5], &[4, 1, 5]),
        Some(Bcast {
            inner: 1,
            count: 20
        })
    );
    assert_eq!(
        bcast(&[1, 4, 1, 1], &[2, 4, 1, 3]),
        Some(Bcast { inner: 3, count: 4 })
    );
}

/// Values of a deterministic pseudo-random sequence in about [-4, 4], as 16-bit bits.
fn data(t: N16, n: usize, seed: u32) -> Vec<u16> {
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    let f: Vec<f32> = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s % 8001) as f32 / 1000.0 - 4.0
        })
        .collect();
    let mut b = vec![0u16; n];
    narrow(t, &f, &mut b);
    b
}

fn wide(t: N16, b: &[u16]) -> Vec<f32> {
    let mut f = vec![0f32; b.len()];
    widen(t, b, &mut f);
    f
}

/// Every element of `got` is the f64 reference `want(e)` rounded once to `t` (or within one
/// 16-bit step of it where f32 arithmetic rounds the other way at a tie).
fn check(t: N16, got: &[u16], want: impl Fn(usize) -> f64, what: &str) {
    let g = wide(t, got);
    for (e, &v) in g.iter().enumerate() {
        let w = want(e);
        let mut r = [0u16; 1];
        narrow(t, &[w as f32], &mut r);
        let rw = wide(t, &r)[0];
        let step = match t {
            N16::F16 => 1.0 / 1024.0,
            N16::Bf16 => 1.0 / 128.0,
        } * f64::from(rw.abs()).max(1e-3);
        assert!(
            v == rw || (f64::from(v) - f64::from(rw)).abs() <= step,
            "{what} element {e}: {v}, reference {w} (rounded {rw})"
        );
    }
}

#[test]
fn binary_ops_with_broadcasts_against_the_reference() {
    let y = [1usize, 5, 7, 9];
    let n: usize = y.iter().product();
    for t in [N16::F16, N16::Bf16] {
        for (k, bshape) in [
            vec![1, 5, 7, 9],
            vec![1, 5, 1, 1],
            vec![9],
            vec![1],
            vec![5, 7, 1],
        ]
        .into_iter()
        .enumerate()
        {
            let b = bcast(&bshape, &y).unwrap();
            let xa = data(t, n, 7);
            let xb = data(t, b.count, 11 + k as u32);
            let (fa, fb) = (wide(t, &xa), wide(t, &xb));
            for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div] {
                let prog = Program::of(&Op::Binary(op), 2).unwrap();
                let full = Bcast { inner: 1, count: n };
                let mut out = vec![0u16; n];
                // SAFETY: sizes as `run` requires.
                unsafe {
                    run(
                        t,
                        &prog,
                        &[xa.as_ptr(), xb.as_ptr()],
                        &[full, b],
                        n,
                        out.as_mut_ptr(),
                    )
                };
                let r = |e: usize| {
                    let (a, c) = (f64::from(fa[e]), f64::from(fb[(e / b.inner) % b.count]));
                    match op {
                        BinaryOp::Add => a + c,
                        BinaryOp::Sub => a - c,
                        BinaryOp::Mul => a * c,
                        _ => a / c,
                    }
                };
                check(t, &out, r, &format!("{t:?} {op:?} {bshape:?}"));
                // The broadcast operand first, in place over the full one.
                let mut inplace = xa.clone();
                let p = inplace.as_mut_ptr();
                // SAFETY: `y` equals the full input.
                unsafe { run(t, &prog, &[xb.as_ptr(), p], &[b, full], n, p) };
                let r2 = |e: usize| {
                    let (c, a) = (f64::from(fb[(e / b.inner) % b.count]), f64::from(fa[e]));
                    match op {
                        BinaryOp::Add => c + a,
                        BinaryOp::Sub => c - a,
                        BinaryOp::Mul => c * a,
                        _ => c / a,
                    }
                };
                check(
                    t,
                    &inplace,
                    r2,
                    &format!("{t:?} {op:?} {bshape:?} in place"),
                );
            }
        }
    }
}

#[test]
fn fused_silu_and_constants_over_several_chunks() {
    use crate::ir::tensor::Tensor;
    use crate::ops::FusedAttrs;
    let steps = vec![
        FusedStep {
            op: Op::Unary(UnaryOp::Sigmoid),
            args: vec![FusedArg::Input(0)],
        },
        FusedStep {
            op: Op::Binary(BinaryOp::Mul),
            args: vec![FusedArg::Input(0), FusedArg::Step(0)],
        },
        FusedStep {
            op: Op::Binary(BinaryOp::Add),
            args: vec![FusedArg::Step(1), FusedArg::Input(1)],
        },
        FusedStep {
            op: Op::Binary(BinaryOp::Sub),
            args: vec![
                FusedArg::Const(Tensor::f32(vec![], &[0.5])),
                FusedArg::Step(2),
            ],
        },
    ];
    let op = Op::FusedElementwise(FusedAttrs { steps });
    assert!(Program::of(&op, 1).is_none(), "reads input 1");
    let prog = Program::of(&op, 2).unwrap();
    let n = CHUNK * 3 + 13;
    for t in [N16::F16, N16::Bf16] {
        let (xa, xb) = (data(t, n, 3), data(t, 1, 5));
        let (fa, fb) = (wide(t, &xa), wide(t, &xb));
        let mut out = vec![0u16; n];
        let bc = [Bcast { inner: 1, count: n }, Bcast { inner: 1, count: 1 }];
        // SAFETY: sizes as `run` requires.
        unsafe {
            run(
                t,
                &prog,
                &[xa.as_ptr(), xb.as_ptr()],
                &bc,
                n,
                out.as_mut_ptr(),
            )
        };
        let r = |e: usize| {
            let x = f64::from(fa[e]);
            0.5 - (x * unary_f64(UnaryOp::Sigmoid, x) + f64::from(fb[0]))
        };
        check(t, &out, r, &format!("{t:?} fused"));
    }
}

#[test]
fn gap_means_against_the_reference() {
    let cases = [(37, 49), (3, 1500), (1300, 1), (2, 7), (20, 196), (17, 784)];
    for ((planes, len), t) in cases
        .into_iter()
        .flat_map(|c| [(c, N16::F16), (c, N16::Bf16)])
    {
        let x = data(t, planes * len, 9);
        let f = wide(t, &x);
        let mut y = vec![0u16; planes];
        crate::gemm::stage16::gap(t, planes, len, &x, &mut y);
        let want = |p: usize| {
            f[p * len..(p + 1) * len]
                .iter()
                .map(|&v| f64::from(v))
                .sum::<f64>()
                / len as f64
        };
        check(t, &y, want, &format!("gap {t:?} {planes}x{len}"));
    }
}

/// The register path (AVX-512) against the chunk path, bit for bit: each binary op alone
/// and before a Relu, the operands in both orders, over every pair of broadcast forms (full,
/// per channel, per row, periodic, scalar) on an odd-sized output whose runs end
/// mid-vector, with NaN, infinities and signed zeros among the values, and in place over a
/// full input; programs of other forms are not taken.
#[cfg(target_arch = "x86_64")]
#[test]
fn register_path_matches_the_chunk_path_bit_for_bit() {
    use crate::gemm::stage16::convert::{Isa, isa};
    use crate::ops::FusedAttrs;
    let step = |op: Op, args: Vec<FusedArg>| FusedStep { op, args };
    let fused = |b: BinaryOp, x: usize, z: usize, relu: bool| {
        let mut steps = vec![step(
            Op::Binary(b),
            vec![FusedArg::Input(x), FusedArg::Input(z)],
        )];
        if relu {
            steps.push(step(Op::Unary(UnaryOp::Relu), vec![FusedArg::Step(0)]));
        }
        Op::FusedElementwise(FusedAttrs { steps })
    };
    // Not taken: a Relu of an input, a second binary step.
    let other = Op::FusedElementwise(FusedAttrs {
        steps: vec![
            step(Op::Unary(UnaryOp::Relu), vec![FusedArg::Input(0)]),
            step(
                Op::Binary(BinaryOp::Add),
                vec![FusedArg::Step(0), FusedArg::Input(1)],
            ),
        ],
    });
    assert!(fast::form(&Program::of(&other, 2).unwrap()).is_none());
    assert!(fast::form(&Program::of(&fused(BinaryOp::Add, 0, 1, false), 2).unwrap()).is_some());
    if isa() != Isa::Avx512
        || !std::arch::is_x86_feature_detected!("avx512bw")
        || !std::arch::is_x86_feature_detected!("avx512vl")
    {
        eprintln!("no AVX-512 here: the register path does not run");
        return;
    }
    let y = [2usize, 5, 7, 9];
    let n: usize = y.iter().product();
    let shapes: [&[usize]; 7] = [
        &y,
        &[1, 5, 1, 1],
        &[9],
        &[1],
        &[5, 7, 1],
        &[2, 5, 1, 1],
        &[7, 9],
    ];
    // The bf16 rounding by AVX512_BF16 too where the CPU has it (the same bits).
    let nes: Vec<bool> = [false, true]
        .into_iter()
        .filter(|&ne| !ne || crate::gemm::stage16::convert::bf16_ne())
        .collect();
    for t in [N16::F16, N16::Bf16] {
        // Subnormal f32 values too (bf16 keeps them; AVX512_BF16 flushes them, so a vector
        // holding one takes the integer rounding).
        let mut special = vec![0u16; 6];
        narrow(
            t,
            &[
                f32::NAN,
                f32::INFINITY,
                -0.0,
                f32::NEG_INFINITY,
                1.0e-39,
                -3.0e-39,
            ],
            &mut special,
        );
        for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div] {
            for (order, relu) in [(false, false), (true, false), (false, true), (true, true)] {
                let (x, z) = if order { (1, 0) } else { (0, 1) };
                let prog = Program::of(&fused(op, x, z, relu), 2).unwrap();
                let f = fast::form(&prog).unwrap();
                for s0 in 0..shapes.len() {
                    for s1 in 0..shapes.len() {
                        let bc = [
                            bcast(shapes[s0], &y).unwrap(),
                            bcast(shapes[s1], &y).unwrap(),
                        ];
                        let xs: Vec<Vec<u16>> = bc
                            .iter()
                            .enumerate()
                            .map(|(i, b)| {
                                let mut v = data(t, b.count, (s0 * 10 + s1 + 100 * i) as u32);
                                if b.count > 8 {
                                    for (k, &s) in special.iter().enumerate() {
                                        let at = (k * 37 + 3 + i) % v.len();
                                        v[at] = s;
                                    }
                                }
                                v
                            })
                            .collect();
                        let ptrs = [xs[0].as_ptr(), xs[1].as_ptr()];
                        let mut a = vec![0u16; n];
                        // SAFETY: sizes as `run` requires.
                        unsafe { run_chunks(t, &prog, &ptrs, &bc, (0, n), a.as_mut_ptr()) };
                        for &ne in &nes {
                            let mut b = vec![0u16; n];
                            // SAFETY: as above; `ne` only where the CPU has the features.
                            unsafe {
                                fast::run_avx512_with(ne, t, f, &ptrs, &bc, (0, n), b.as_mut_ptr())
                            };
                            let what =
                                format!("{t:?} {op:?} relu {relu} order {order} {s0} {s1} ne {ne}");
                            assert_eq!(a, b, "{what}");
                            for k in 0..2 {
                                if bc[k].count != n {
                                    continue;
                                }
                                let mut inplace = xs[k].clone();
                                let mut p2 = ptrs;
                                p2[k] = inplace.as_ptr();
                                let yp = inplace.as_mut_ptr();
                                // SAFETY: `y` equals the full input `k`.
                                unsafe { fast::run_avx512_with(ne, t, f, &p2, &bc, (0, n), yp) };
                                assert_eq!(a, inplace, "{what} in place over {k}");
                            }
                        }
                    }
                }
            }
        }
    }
}

/// GELU as exporters write it after a MatMul: `(x + b) * 0.5 * (1 + erf((x + b) / sqrt 2))`,
/// the bias broadcast over rows.
fn gelu_program() -> Program {
    use crate::ir::tensor::Tensor;
    use crate::ops::FusedAttrs;
    let k = |v: f32| FusedArg::Const(Tensor::f32(vec![], &[v]));
    let step = |op, args| FusedStep { op, args };
    let steps = vec![
        step(
            Op::Binary(BinaryOp::Add),
            vec![FusedArg::Input(0), FusedArg::Input(1)],
        ),
        step(
            Op::Binary(BinaryOp::Div),
            vec![FusedArg::Step(0), k(std::f32::consts::SQRT_2)],
        ),
        step(Op::Unary(UnaryOp::Erf), vec![FusedArg::Step(1)]),
        step(Op::Binary(BinaryOp::Add), vec![FusedArg::Step(2), k(1.0)]),
        step(
            Op::Binary(BinaryOp::Mul),
            vec![FusedArg::Step(0), FusedArg::Step(3)],
        ),
        step(Op::Binary(BinaryOp::Mul), vec![FusedArg::Step(4), k(0.5)]),
    ];
    Program::of(&Op::FusedElementwise(FusedAttrs { steps }), 2).unwrap()
}

#[test]
fn f32_programs_native_where_the_jit_is_slow() {
    assert!(native_f32(&gelu_program()));
    let one = |u| Program {
        steps: vec![Step::Unary(u, Arg::Input(0))],
    };
    assert!(native_f32(&one(UnaryOp::Sigmoid)));
    assert!(native_f32(&one(UnaryOp::Tanh)));
    // Cheap in the JIT, or per-element f64 math here: the JIT keeps them.
    assert!(!native_f32(
        &Program::of(&Op::Binary(BinaryOp::Add), 2).unwrap()
    ));
    assert!(!native_f32(&one(UnaryOp::Relu)));
    assert!(!native_f32(&one(UnaryOp::Exp)));
    let with_exp = Program {
        steps: vec![
            Step::Unary(UnaryOp::Erf, Arg::Input(0)),
            Step::Unary(UnaryOp::Exp, Arg::Step(0)),
        ],
    };
    assert!(!native_f32(&with_exp));
}

#[test]
fn f32_gelu_against_the_reference_in_place_and_apart() {
    let prog = gelu_program();
    let cols = 67;
    for rows in [1usize, 3, 40] {
        let n = rows * cols;
        let x: Vec<f32> = wide(N16::F16, &data(N16::F16, n, 9));
        let b: Vec<f32> = wide(N16::F16, &data(N16::F16, cols, 4));
        let want = |e: usize| {
            let v = f64::from(x[e]) + f64::from(b[e % cols]);
            v * 0.5 * (1.0 + unary_f64(UnaryOp::Erf, v / std::f64::consts::SQRT_2))
        };
        let bc = [
            Bcast { inner: 1, count: n },
            bcast(&[cols], &[rows, cols]).unwrap(),
        ];
        let mut apart = vec![f32::NAN; n];
        let mut inplace = x.clone();
        let p = inplace.as_mut_ptr();
        // SAFETY: `x` holds `n` floats, `b` `cols`; `y` apart from both, then equal to the
        // full input.
        unsafe {
            run(
                F32,
                &prog,
                &[x.as_ptr(), b.as_ptr()],
                &bc,
                n,
                apart.as_mut_ptr(),
            );
            run(F32, &prog, &[p, b.as_ptr()], &bc, n, p);
        }
        for (e, (&a, &i)) in apart.iter().zip(&inplace).enumerate() {
            let w = want(e);
            assert!(
                (f64::from(a) - w).abs() <= 1e-6 * w.abs().max(1.0),
                "rows {rows} element {e}: {a}, reference {w}"
            );
            assert_eq!(a.to_bits(), i.to_bits(), "in place differs at {e}");
        }
    }
}

/// GELU's tanh form as GPT-2 exports write it: `0.5 x (1 + tanh(c (x + 0.044715 Pow(x, 3))))`.
#[test]
fn f32_tanh_gelu_with_pow_against_the_reference() {
    use crate::ir::tensor::Tensor;
    use crate::ops::FusedAttrs;
    let k = |v: f32| FusedArg::Const(Tensor::f32(vec![], &[v]));
    let step = |op, args| FusedStep { op, args };
    let x = FusedArg::Input(0);
    let steps = vec![
        step(Op::Binary(BinaryOp::Pow), vec![x.clone(), k(3.0)]),
        step(
            Op::Binary(BinaryOp::Mul),
            vec![k(0.044_715), FusedArg::Step(0)],
        ),
        step(
            Op::Binary(BinaryOp::Add),
            vec![x.clone(), FusedArg::Step(1)],
        ),
        step(
            Op::Binary(BinaryOp::Mul),
            vec![k(0.797_884_6), FusedArg::Step(2)],
        ),
        step(Op::Unary(UnaryOp::Tanh), vec![FusedArg::Step(3)]),
        step(Op::Binary(BinaryOp::Add), vec![k(1.0), FusedArg::Step(4)]),
        step(
            Op::Binary(BinaryOp::Mul),
            vec![x.clone(), FusedArg::Step(5)],
        ),
        step(Op::Binary(BinaryOp::Mul), vec![FusedArg::Step(6), k(0.5)]),
    ];
    let op = Op::FusedElementwise(FusedAttrs { steps });
    let prog = Program::of(&op, 1).unwrap();
    assert!(native_f32(&prog));
    // A fractional power is not a Powi step.
    let frac = Op::FusedElementwise(FusedAttrs {
        steps: vec![step(Op::Binary(BinaryOp::Pow), vec![x, k(2.5)])],
    });
    assert!(Program::of(&frac, 1).is_none());
    let n = CHUNK * 2 + 5;
    let xs: Vec<f32> = wide(N16::F16, &data(N16::F16, n, 21));
    let mut y = vec![f32::NAN; n];
    let full = [Bcast { inner: 1, count: n }];
    // SAFETY: `xs` and `y` hold `n` floats, apart.
    unsafe { run(F32, &prog, &[xs.as_ptr()], &full, n, y.as_mut_ptr()) };
    for (e, (&x, &g)) in xs.iter().zip(&y).enumerate() {
        let v = f64::from(x);
        let w = 0.5 * v * (1.0 + (0.797_884_6 * (v + 0.044_715 * v.powi(3))).tanh());
        assert!(
            (f64::from(g) - w).abs() <= 2e-6 * w.abs().max(1.0),
            "element {e}: gelu({x}) = {g}, reference {w}"
        );
    }
}
