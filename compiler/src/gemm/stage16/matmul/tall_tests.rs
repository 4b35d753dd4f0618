//! The tall row blocks of a reduced constant B ([`super::tall`]) against the planned blocks
//! (`matmul_with(.., false)`): the same bits for f16/bf16/int8 weights on f16 and bf16
//! activations, with and without a bias, K in one or several blocks, rows and columns off
//! the kernels' units, on 1 thread and on an eager 2-thread pool; the scratch stays inside
//! what the planned block asked (a canary after it); and the f16 product near an f64
//! reference.

use super::super::{N16, narrow, widen};
use super::{MmStage, matmul_with, tall};
use crate::gemm::lowp::{WeightType, lowp_b_bytes, pack_b_lowp};
use crate::gemm::selected_kernel;
use crate::par::{Pool, with_pool};

/// A canary value after the scratch.
const CANARY: f32 = -7.25;

/// The staged product of `s` at `block` rows, the tall blocks allowed or not; asserts the
/// scratch's canary.
#[allow(clippy::too_many_arguments)]
fn run(
    t: N16,
    s: &MmStage,
    wt: WeightType,
    block: usize,
    a: &[u16],
    packed: &[u8],
    bias: Option<&[f32]>,
    tall_ok: bool,
) -> Vec<u16> {
    let mut y = vec![0u16; s.m * s.n];
    let floats = s.scratch_bytes_at(block) / 4;
    let mut scratch = vec![CANARY; floats + 32];
    let off = scratch.as_ptr().align_offset(64);
    let bias = bias.map_or(std::ptr::null(), |b| b.as_ptr());
    let ops = (
        a.as_ptr(),
        std::ptr::null(),
        packed.as_ptr().cast(),
        bias,
        y.as_mut_ptr(),
        // SAFETY: `off + floats` is inside the vector.
        unsafe { scratch.as_mut_ptr().add(off) },
    );
    // SAFETY: operands of the sizes the contract asks; B packed reduced as `wt`; the
    // scratch 64-aligned, `scratch_bytes_at(block)` bytes.
    unsafe { matmul_with(t, s, wt.code(), block, ops, tall_ok) };
    assert!(
        scratch[off + floats..off + floats + 16]
            .iter()
            .all(|&x| x == CANARY),
        "{s:?} block {block}: wrote past its scratch"
    );
    y
}

/// `len` 16-bit values of type `t`.
fn data(t: N16, len: usize, seed: usize) -> Vec<u16> {
    let v: Vec<f32> = (0..len)
        .map(|i| ((i * seed % 113) as f32 - 56.0) / 32.0)
        .collect();
    let mut x = vec![0u16; len];
    narrow(t, &v, &mut x);
    x
}

/// `B` (`k x n`) packed in `wt`, 64-aligned in the returned buffer from the returned offset.
fn packed_b(wt: WeightType, k: usize, n: usize) -> (Vec<u8>, usize, Vec<f32>) {
    let b32: Vec<f32> = (0..k * n)
        .map(|i| ((i * 13 % 97) as f32 - 48.0) / 64.0)
        .collect();
    let mut packed = vec![0u8; lowp_b_bytes(wt, k, n) + 64];
    let po = packed.as_ptr().align_offset(64);
    pack_b_lowp(wt, k, n, |i| b32[i], n, 1, &mut packed[po..], &mut |_| {});
    (packed, po, b32)
}

/// The slots [`tall::run`] cuts the scratch of `s` at `block` rows into.
fn slots(s: &MmStage, block: usize) -> usize {
    if s.threads <= 1 {
        1
    } else {
        super::slot_count(s.tasks(block), s.threads)
    }
}

/// The region of each slot [`tall::run`] cuts the scratch of `s` at `block` rows into.
fn region(s: &MmStage, block: usize) -> usize {
    let [pa, pc, ps, _, _] = s.parts(block);
    tall::region_floats(pa + pc + ps, slots(s, block))
}

#[test]
fn tall_blocks_give_the_planned_blocks_bits() {
    let shapes = [
        // The transformer's first FFN product, fewer columns: K in one block.
        (128, 256, 512),
        // K in three blocks, rows and columns off the units.
        (100, 900, 200),
        (61, 70, 48),
        (45, 400, 40),
    ];
    let mr = selected_kernel().mr;
    let mut tall_runs = 0;
    for (m, k, n) in shapes {
        for threads in [1, 2] {
            let s = MmStage {
                batch: 1,
                m,
                k,
                n,
                runtime_b: false,
                threads,
            };
            for wt in [WeightType::F16, WeightType::Bf16, WeightType::I8] {
                let (packed, po, _) = packed_b(wt, k, n);
                let packed = &packed[po..];
                for t in [N16::F16, N16::Bf16] {
                    let a = data(t, m * k, 7);
                    let bias: Vec<f32> = (0..n).map(|j| j as f32 / 32.0 - 1.0).collect();
                    for block in s.blocks() {
                        let cols = s.cols_at(block);
                        if tall::plan(&s, (cols, slots(&s, block)), block, region(&s, block), mr)
                            .is_some()
                        {
                            tall_runs += 1;
                        }
                        for bias in [None, Some(&bias[..])] {
                            let go = |tall_ok: bool| {
                                let f = || run(t, &s, wt, block, &a, packed, bias, tall_ok);
                                if threads == 1 {
                                    f()
                                } else {
                                    let pool = Pool::new(2).expect("threads");
                                    pool.set_eager(true);
                                    with_pool(Some(&pool), f)
                                }
                            };
                            let (want, got) = (go(false), go(true));
                            assert!(
                                want == got,
                                "{t:?} {wt:?} {s:?} block {block} bias {}: tall blocks differ",
                                bias.is_some()
                            );
                        }
                    }
                }
            }
        }
    }
    assert!(tall_runs >= 8, "tall blocks taken {tall_runs} times");
}

/// Tasks packing A a K block at a time on the stack (`Tall::stack_a`) give the planned
/// blocks' bits: the transformer's second FFN product at its planned 4-row block (K in six
/// blocks, C for all 256 columns on the stack), its first at 16 rows (one K block, C in the
/// region, all 2048 columns per task), and shapes whose C sub-blocks repack A per sub-block;
/// f16/bf16/int8 weights, with a bias, on 1 and 2 threads (there equal row blocks, a multiple
/// of the slots in tasks: 64 + 64 rows for the FFN's second product).
#[test]
fn stack_a_blocks_give_the_planned_blocks_bits() {
    let mr = selected_kernel().mr;
    let (mut stack_c, mut region_c, mut whole, mut subs) = (0, 0, 0, 0);
    for (m, k, n, block) in [
        (128, 2048, 256, 4),
        (128, 256, 2048, 16),
        (100, 900, 200, 4),
        (61, 1200, 600, 2),
    ] {
        for threads in [1, 2] {
            let s = MmStage {
                batch: 1,
                m,
                k,
                n,
                runtime_b: false,
                threads,
            };
            let cols = s.cols_at(block);
            let plan = tall::plan(&s, (cols, slots(&s, block)), block, region(&s, block), mr);
            let plan = plan.expect("tall blocks");
            assert!(plan.stack_a, "{s:?} block {block}: {plan:?}");
            if threads > 1 {
                // Equal row blocks, a multiple of the slots in tasks.
                let tasks = m.div_ceil(plan.rows) * n.div_ceil(plan.cols);
                assert!(
                    tasks.is_multiple_of(slots(&s, block))
                        && plan.rows == m.div_ceil(m.div_ceil(plan.rows)),
                    "{s:?} block {block}: {plan:?}"
                );
                if (m, k, n) == (128, 2048, 256) {
                    assert_eq!(plan.rows, 64, "{plan:?}");
                }
            }
            stack_c += usize::from(plan.stack_c);
            region_c += usize::from(!plan.stack_c);
            whole += usize::from(plan.cols == n && cols < n);
            subs += usize::from(plan.cw < plan.cols && k > crate::gemm::KC);
            for wt in [WeightType::F16, WeightType::Bf16, WeightType::I8] {
                let (packed, po, _) = packed_b(wt, k, n);
                let packed = &packed[po..];
                let t = if wt == WeightType::F16 {
                    N16::F16
                } else {
                    N16::Bf16
                };
                let a = data(t, m * k, 5);
                let bias: Vec<f32> = (0..n).map(|j| j as f32 / 64.0 - 2.0).collect();
                let go = |tall_ok: bool| {
                    let f = || run(t, &s, wt, block, &a, packed, Some(&bias), tall_ok);
                    if threads == 1 {
                        f()
                    } else {
                        let pool = Pool::new(2).expect("threads");
                        pool.set_eager(true);
                        with_pool(Some(&pool), f)
                    }
                };
                assert!(
                    go(false) == go(true),
                    "{t:?} {wt:?} {s:?} block {block} {plan:?}: differs"
                );
            }
        }
    }
    assert!(
        stack_c > 0 && region_c > 0 && whole > 0 && subs > 0,
        "layouts: C on the stack {stack_c}, in the region {region_c}, whole rows {whole}, \
         sub-blocks {subs}"
    );
}

/// The transformer's FFN shape at its planned 16-row block takes tall blocks of several
/// times the rows, within the planned scratch, at 1 and 2 threads.
#[test]
fn ffn_block_grows_within_its_scratch() {
    let mr = selected_kernel().mr;
    for threads in [1, 2] {
        let s = MmStage {
            batch: 1,
            m: 128,
            k: 256,
            n: 2048,
            runtime_b: false,
            threads,
        };
        let block = 16;
        let plan = tall::plan(
            &s,
            (s.cols_at(block), slots(&s, block)),
            block,
            region(&s, block),
            mr,
        );
        let plan = plan.expect("tall blocks");
        assert!(plan.rows >= 2 * block, "{threads} threads: {plan:?}");
    }
}

/// f16 activations and f16 weights of values exact in both: the tall product within f16's
/// rounding of an f64 reference of the same values.
#[test]
fn tall_product_matches_an_f64_reference() {
    let (m, k, n) = (72, 300, 96);
    let s = MmStage {
        batch: 1,
        m,
        k,
        n,
        runtime_b: false,
        threads: 1,
    };
    let block = 12;
    let mr = selected_kernel().mr;
    let cols = s.cols_at(block);
    assert!(tall::plan(&s, (cols, slots(&s, block)), block, region(&s, block), mr).is_some());
    let (packed, po, b32) = packed_b(WeightType::F16, k, n);
    let a = data(N16::F16, m * k, 11);
    let mut a32 = vec![0f32; m * k];
    widen(N16::F16, &a, &mut a32);
    let bias: Vec<f32> = (0..n).map(|j| j as f32 / 16.0).collect();
    let y = run(
        N16::F16,
        &s,
        WeightType::F16,
        block,
        &a,
        &packed[po..],
        Some(&bias),
        true,
    );
    let mut y32 = vec![0f32; m * n];
    widen(N16::F16, &y, &mut y32);
    for i in 0..m {
        for j in 0..n {
            let r: f64 = f64::from(bias[j])
                + (0..k)
                    .map(|l| f64::from(a32[i * k + l]) * f64::from(b32[l * n + j]))
                    .sum::<f64>();
            let got = f64::from(y32[i * n + j]);
            assert!(
                (got - r).abs() <= 1e-3 * r.abs().max(1.0),
                "y[{i}][{j}] = {got}, reference {r}"
            );
        }
    }
}
