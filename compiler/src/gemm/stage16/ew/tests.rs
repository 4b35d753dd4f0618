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
    for (planes, len) in [(37, 49), (3, 1500), (1300, 1), (2, 7)] {
        let t = N16::F16;
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
        check(t, &y, want, &format!("gap {planes}x{len}"));
    }
}
