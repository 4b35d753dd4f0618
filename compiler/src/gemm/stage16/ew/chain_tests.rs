//! The linear-chain register path ([`super::chain`]) against the chunk path, bit for bit.

use super::*;
use crate::ops::{FusedAttrs, FusedStep};

fn step(op: Op, args: Vec<FusedArg>) -> FusedStep {
    FusedStep { op, args }
}

fn bin(b: BinaryOp, x: FusedArg, z: FusedArg) -> FusedStep {
    step(Op::Binary(b), vec![x, z])
}

fn konst(v: f32) -> FusedArg {
    FusedArg::Const(crate::ir::tensor::Tensor::f32(vec![], &[v]))
}

/// 16-bit values of `n` elements (pseudo-random in about [-4, 4], NaN, infinities and
/// signed zeros among them when `n > 8`).
fn values(t: N16, n: usize, seed: u32) -> Vec<u16> {
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(7);
    let mut f: Vec<f32> = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s % 8001) as f32 / 1000.0 - 4.0
        })
        .collect();
    if n > 8 {
        for (k, v) in [f32::NAN, f32::INFINITY, -0.0, f32::NEG_INFINITY, 0.0]
            .into_iter()
            .enumerate()
        {
            let at = (k * 37 + 3 + seed as usize) % n;
            f[at] = v;
        }
    }
    let mut b = vec![0u16; n];
    narrow(t, &f, &mut b);
    b
}

/// The chains a transformer's fused nodes take (the residual `bias + x + y`, a scaled sum,
/// a Relu at either end, the running value on either side of Sub and Div) and programs
/// that are not linear chains (not taken).
#[test]
fn chains_taken_and_not() {
    use FusedArg::{Input, Step as S};
    let prog = |steps: Vec<FusedStep>, k: usize| {
        Program::of(&Op::FusedElementwise(FusedAttrs { steps }), k).expect("a program")
    };
    let add_add = prog(
        vec![
            bin(BinaryOp::Add, Input(0), Input(1)),
            bin(BinaryOp::Add, S(0), Input(2)),
        ],
        3,
    );
    assert!(chain::chain(&add_add).is_some());
    // Step 2 reads step 0, not step 1: not linear.
    let fork = prog(
        vec![
            bin(BinaryOp::Add, Input(0), Input(1)),
            bin(BinaryOp::Mul, S(0), Input(1)),
            bin(BinaryOp::Sub, S(1), S(0)),
        ],
        2,
    );
    assert!(chain::chain(&fork).is_none());
    // An Erf step: not a chain step.
    let erf = prog(
        vec![
            bin(BinaryOp::Add, Input(0), Input(1)),
            step(Op::Unary(UnaryOp::Erf), vec![S(0)]),
        ],
        2,
    );
    assert!(chain::chain(&erf).is_none());
}

#[cfg(target_arch = "x86_64")]
#[test]
fn chain_register_path_matches_the_chunk_path_bit_for_bit() {
    use crate::gemm::stage16::convert::{Isa, isa};
    use FusedArg::{Input, Step as S};
    if isa() != Isa::Avx512
        || !std::arch::is_x86_feature_detected!("avx512bw")
        || !std::arch::is_x86_feature_detected!("avx512vl")
    {
        eprintln!("no AVX-512 here: the register path does not run");
        return;
    }
    let programs: Vec<(Vec<FusedStep>, usize)> = vec![
        (
            vec![
                bin(BinaryOp::Add, Input(0), Input(1)),
                bin(BinaryOp::Add, S(0), Input(2)),
            ],
            3,
        ),
        (
            vec![
                bin(BinaryOp::Sub, Input(1), Input(0)),
                bin(BinaryOp::Div, Input(2), S(0)),
                bin(BinaryOp::Mul, S(1), konst(0.5)),
                step(Op::Unary(UnaryOp::Relu), vec![S(2)]),
            ],
            3,
        ),
        (
            vec![
                step(Op::Unary(UnaryOp::Relu), vec![Input(0)]),
                bin(BinaryOp::Sub, konst(3.0), S(0)),
                bin(BinaryOp::Mul, S(1), Input(1)),
                bin(BinaryOp::Add, Input(2), S(2)),
                bin(BinaryOp::Div, S(3), Input(3)),
            ],
            4,
        ),
    ];
    let y = [2usize, 5, 7, 9];
    let n: usize = y.iter().product();
    let shapes: [&[usize]; 6] = [&y, &[1, 5, 1, 1], &[9], &[1], &[5, 7, 1], &[7, 9]];
    for t in [N16::F16, N16::Bf16] {
        for (pi, (steps, k)) in programs.iter().enumerate() {
            let prog = Program::of(
                &Op::FusedElementwise(FusedAttrs {
                    steps: steps.clone(),
                }),
                *k,
            )
            .expect("a program");
            let c = chain::chain(&prog).expect("a chain");
            for rot in 0..shapes.len() {
                // Input i takes shape (rot + 2 i) mod 6: every input in several forms.
                let bc: Vec<Bcast> = (0..*k)
                    .map(|i| bcast(shapes[(rot + 2 * i) % shapes.len()], &y).expect("bcast"))
                    .collect();
                let xs: Vec<Vec<u16>> = bc
                    .iter()
                    .enumerate()
                    .map(|(i, b)| values(t, b.count, (pi * 100 + rot * 10 + i) as u32))
                    .collect();
                let ptrs: Vec<*const u16> = xs.iter().map(|x| x.as_ptr()).collect();
                let (mut a, mut b) = (vec![0u16; n], vec![0u16; n]);
                // A range starting mid-run as well as the whole output.
                for e0 in [0, 13] {
                    // SAFETY: inputs of their `count` values, outputs of `n`, apart.
                    unsafe {
                        run_chunks(t, &prog, &ptrs, &bc, (e0, n), a.as_mut_ptr());
                        chain::run_avx512(t, &c, &ptrs, &bc, (e0, n), b.as_mut_ptr());
                    }
                    assert_eq!(a, b, "{t:?} program {pi} shapes {rot} from {e0}");
                }
                for (i, b0) in bc.iter().enumerate() {
                    if b0.count != n {
                        continue;
                    }
                    let mut inplace = xs[i].clone();
                    let mut p2 = ptrs.clone();
                    p2[i] = inplace.as_ptr();
                    let yp = inplace.as_mut_ptr();
                    // SAFETY: `y` equals the full input `i`.
                    unsafe { chain::run_avx512(t, &c, &p2, &bc, (0, n), yp) };
                    assert_eq!(
                        a, inplace,
                        "{t:?} program {pi} shapes {rot} in place over {i}"
                    );
                }
            }
        }
    }
}
