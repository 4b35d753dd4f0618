//! The staged kernels spread over a 2-thread pool give the bits of one thread: each path
//! (row bands, pointwise runs, depthwise blocks and bands, Winograd bands — one slot, the
//! inner Winograd run spreading —, MatMul row and column blocks, element-wise, rows)
//! planned for 2 threads and run on an eager 2-thread pool (every job spread) against the
//! same node planned for and run on one thread.

use super::conv::{self, slots};
use super::{N16, narrow};
use crate::gemm::conv::{ConvParams, prepare_weights, prepared_len};
use crate::par::{Pool, with_pool};

/// `f` on an eager pool of 2 threads (every job worth spreading); the jobs it ran.
fn on_two<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let pool = Pool::new(2).expect("threads");
    pool.set_eager(true);
    let before = pool.jobs();
    let r = with_pool(Some(&pool), f);
    (r, pool.jobs() - before)
}

/// f16 data of `len` values.
fn data(len: usize, s: usize) -> Vec<u16> {
    let v: Vec<f32> = (0..len)
        .map(|i| ((i * s % 113) as f32 - 56.0) / 32.0)
        .collect();
    let mut x = vec![0u16; len];
    narrow(N16::F16, &v, &mut x);
    x
}

/// `p` staged ([`conv::staged`]) at `budget` on `x`, its weights `w` as the path reads them
/// (`None`: the OIHW `wt` prepared for [`conv::weights_params`]).
fn staged(p: &ConvParams, budget: u64, x: &[u16], wt: &[f32], w: Option<&[f32]>) -> Vec<u16> {
    let mut q = *p;
    let prepared;
    let w = match w {
        Some(w) => w,
        None => {
            let mut wp = conv::weights_params(p, budget);
            let mut packed = vec![0f32; prepared_len(&wp)];
            prepare_weights(&mut wp, wt, &mut packed);
            q.packed_a = wp.packed_a;
            prepared = packed;
            &prepared
        }
    };
    let bias: Vec<f32> = (0..p.m).map(|j| j as f32 / 8.0 - 2.0).collect();
    let mut scratch = vec![0f32; conv::staged_bytes_at(&q, budget) / 4 + 16];
    let off = scratch.as_ptr().align_offset(64);
    let mut y = vec![0u16; (p.n * p.m * p.oh * p.ow) as usize];
    // SAFETY: operands of the sizes the contract asks, the weights as the path reads them,
    // the scratch as `staged_bytes_at` asks, 64-aligned.
    unsafe {
        conv::staged(
            N16::F16,
            &q,
            budget,
            x.as_ptr(),
            w.as_ptr(),
            bias.as_ptr(),
            y.as_mut_ptr(),
            scratch.as_mut_ptr().add(off),
        )
    };
    y
}

/// A conv geometry: `k x k`, stride `s`, "same"-style pads `k / 2`, `group` groups.
fn geom(n: u64, c: u64, hw: u64, m: u64, k: u64, s: u64, group: u64) -> ConvParams {
    let o = (hw + 2 * (k / 2) - k) / s + 1;
    ConvParams {
        n,
        c,
        h: hw,
        w: hw,
        m,
        group,
        kh: k,
        kw: k,
        stride_h: s,
        stride_w: s,
        pad_t: k / 2,
        pad_l: k / 2,
        dil_h: 1,
        dil_w: 1,
        oh: o,
        ow: o,
        has_bias: 1,
        packed_a: u64::from(group == 1),
        threads: 1,
        ..Default::default()
    }
}

#[test]
fn staged_conv_paths_spread_over_two_threads_bit_for_bit() {
    use crate::gemm::winograd::{WINOGRAD_PACKED, WINOGRAD_U_PACKED, transform_weights};
    let mut seen = [0usize; 5];
    let cases = [
        geom(1, 16, 20, 24, 3, 1, 1),
        geom(2, 8, 17, 12, 3, 2, 1),
        geom(2, 24, 20, 40, 1, 1, 1),
        geom(1, 32, 56, 32, 3, 1, 32),
        geom(2, 48, 15, 48, 3, 2, 48),
        ConvParams {
            packed_a: WINOGRAD_U_PACKED,
            ..geom(1, 8, 40, 12, 3, 1, 1)
        },
        ConvParams {
            packed_a: WINOGRAD_PACKED,
            ..geom(2, 16, 36, 40, 3, 1, 1)
        },
    ];
    for p1 in cases {
        let p2 = ConvParams { threads: 2, ..p1 };
        let kk = (p1.kh * p1.kw) as usize;
        let x = data((p1.n * p1.c * p1.h * p1.w) as usize, 37);
        let wt: Vec<f32> = (0..(p1.m * p1.c / p1.group) as usize * kk)
            .map(|i| ((i * 11 % 29) as f32 - 14.0) / 64.0)
            .collect();
        let mut u = Vec::new();
        if p1.packed_a == WINOGRAD_U_PACKED {
            u = vec![0f32; crate::gemm::winograd::weights_floats(&p1)];
            assert!(transform_weights(&p1, &wt, &mut u));
        }
        let w = match p1.packed_a {
            WINOGRAD_U_PACKED => Some(&u[..]),
            WINOGRAD_PACKED => Some(&wt[..]),
            _ => None,
        };
        for budget in conv::budgets(&p2) {
            // Marked params run Winograd bands or (the lowering unmarks them) none here.
            // Winograd bands keep one slot (the inner Winograd run spreads its tile blocks):
            // compared all the same.
            let wino = conv::wino_bands(&p2, budget).is_some();
            if !wino && (w.is_some() || slots::count(&p2, budget) < 2) {
                continue;
            }
            let path = if wino {
                0
            } else if conv::dw_bands(&p2, budget).is_some() {
                1
            } else if conv::dw_block(&p2, budget).is_some() {
                2
            } else if conv::pw_pixels(&p2, budget).is_some() {
                3
            } else {
                4
            };
            seen[path] += 1;
            let one = staged(&p1, budget, &x, &wt, w);
            let (two, jobs) = on_two(|| staged(&p2, budget, &x, &wt, w));
            assert!(wino || jobs > 0, "{p2:?} at {budget}: no job spread");
            assert!(one == two, "{p2:?} at budget {budget}: 2 threads differ");
        }
    }
    assert!(
        seen.iter().all(|&s| s > 0),
        "paths spread (wino, dw bands, dw blocks, pw, rows): {seen:?}"
    );
}

#[test]
fn staged_matmul_spreads_over_two_threads_bit_for_bit() {
    use super::matmul::{MmStage, matmul};
    use crate::gemm::{arenac_pack_b, packed_b_len};
    for (runtime_b, m, k, n) in [
        (false, 1, 1280, 1000),
        (false, 37, 300, 200),
        (true, 19, 64, 150),
    ] {
        let s1 = MmStage {
            batch: if runtime_b { 3 } else { 1 },
            m,
            k,
            n,
            runtime_b,
            threads: 1,
        };
        let s2 = MmStage { threads: 2, ..s1 };
        let a = data(s1.batch * m * k, 7);
        let b = data(s1.batch * k * n, 13);
        let b32: Vec<f32> = (0..k * n)
            .map(|i| ((i * 13 % 97) as f32 - 48.0) / 64.0)
            .collect();
        let mut packed = vec![0f32; packed_b_len(k, n)];
        // SAFETY: `b32` is `k x n` row-major; `packed` holds its packed size.
        unsafe { arenac_pack_b(k, n, b32.as_ptr(), n, 1, packed.as_mut_ptr()) };
        let bias: Vec<f32> = (0..n).map(|j| j as f32 / 32.0).collect();
        let run = |s: &MmStage, block: usize| {
            let mut y = vec![0u16; s.batch * m * n];
            let mut scratch = vec![0f32; s.scratch_bytes_at(block) / 4 + 16];
            let off = scratch.as_ptr().align_offset(64);
            // SAFETY: operands of the sizes the contract asks; the scratch 64-aligned.
            unsafe {
                matmul(
                    N16::F16,
                    s,
                    0,
                    block,
                    a.as_ptr(),
                    b.as_ptr(),
                    packed.as_ptr(),
                    bias.as_ptr(),
                    y.as_mut_ptr(),
                    scratch.as_mut_ptr().add(off),
                )
            };
            y
        };
        for block in s2.blocks() {
            let one = run(&s1, block);
            let (two, jobs) = on_two(|| run(&s2, block));
            assert!(jobs > 0, "{s2:?} at block {block}: no job spread");
            assert!(one == two, "{s2:?} at block {block}: 2 threads differ");
        }
    }
}

#[test]
fn element_wise_unary_gap_and_rows_spread_over_two_threads_bit_for_bit() {
    use super::ew::{self, Bcast, Program};
    use crate::ops::{BinaryOp, Op, UnaryOp};
    // Past `split::PAR_MIN_ELEMS` per thread: the element-wise pass spreads.
    let n = 3 * super::split::PAR_MIN_ELEMS + 77;
    let (a, b) = (data(n, 37), data(n / 7 + 1, 11));
    // Element-wise: a full input and one broadcast by runs of 7 (a per-channel shape).
    let prog = Program::of(&Op::Binary(BinaryOp::Mul), 2).expect("a binary program");
    let bc = [
        Bcast { inner: 1, count: n },
        Bcast {
            inner: 7,
            count: n / 7 + 1,
        },
    ];
    let ew_run = || {
        let mut y = vec![0u16; n];
        // SAFETY: the inputs hold `bc[i].count` values, `y` holds `n`, apart.
        unsafe {
            ew::run(
                N16::F16,
                &prog,
                &[a.as_ptr(), b.as_ptr()],
                &bc,
                n,
                y.as_mut_ptr(),
            )
        };
        y
    };
    // Unary in place, GlobalAveragePool, the rows.
    let unary = || {
        let mut y = a.clone();
        let f = |v: &mut [f32]| crate::ops::stage16::unary_f32(UnaryOp::Erf, v);
        let p = y.as_mut_ptr();
        // SAFETY: `n` values in place.
        unsafe { super::unary(N16::F16, n, p, p, &f) };
        y
    };
    let gap = || {
        let mut y = vec![0u16; n / 49];
        super::gap(N16::F16, n / 49, 49, &a, &mut y);
        y
    };
    let (rows, len) = (97, 125);
    let scale: Vec<f32> = (0..len).map(|j| 1.0 + j as f32 / 64.0).collect();
    let rows_run = |threads: usize| {
        let mut scratch = vec![0f32; super::rows::scratch_bytes(rows, len, threads) / 4 + 16];
        let off = scratch.as_ptr().align_offset(64);
        let s = scratch[off..].as_mut_ptr();
        let (mut y1, mut y2) = (vec![0u16; rows * len], vec![0u16; rows * len]);
        // SAFETY: `rows * len` values, apart; the scratch as `scratch_bytes` asks; scale
        // of `len` floats, no bias.
        unsafe {
            super::rows::softmax(
                N16::F16,
                rows,
                len,
                false,
                threads,
                a.as_ptr(),
                y1.as_mut_ptr(),
                s,
            );
            super::rows::layer_norm(
                N16::F16,
                rows,
                len,
                1e-5,
                threads,
                scale.as_ptr(),
                std::ptr::null(),
                a.as_ptr(),
                y2.as_mut_ptr(),
                s,
            );
        }
        (y1, y2)
    };
    let one = (ew_run(), unary(), gap(), rows_run(1));
    let (two, jobs) = on_two(|| (ew_run(), unary(), gap(), rows_run(2)));
    assert!(jobs >= 5, "{jobs} jobs spread");
    assert!(one.0 == two.0, "element-wise differs");
    assert!(one.1 == two.1, "unary differs");
    assert!(one.2 == two.2, "GlobalAveragePool differs");
    assert!(one.3 == two.3, "Softmax/LayerNorm differ");
}

/// A constant B stored reduced (`--weights`), its column blocks spread: the bits of one
/// thread (each task widens its panels into its own A-packing slot).
#[test]
fn staged_matmul_with_a_reduced_b_spreads_bit_for_bit() {
    use super::matmul::{MmStage, matmul};
    use crate::gemm::lowp::{WeightType, lowp_b_bytes, pack_b_lowp};
    let s1 = MmStage {
        batch: 1,
        m: 29,
        k: 2100,
        n: 70,
        runtime_b: false,
        threads: 1,
    };
    let s2 = MmStage { threads: 2, ..s1 };
    let (m, k, n) = (s1.m, s1.k, s1.n);
    let a = data(m * k, 7);
    let b32: Vec<f32> = (0..k * n)
        .map(|i| ((i * 13 % 97) as f32 - 48.0) / 64.0)
        .collect();
    let bias: Vec<f32> = (0..n).map(|j| j as f32 / 32.0).collect();
    for t in [WeightType::Bf16, WeightType::I8] {
        let mut packed = vec![0u8; lowp_b_bytes(t, k, n) + 64];
        let po = packed.as_ptr().align_offset(64);
        pack_b_lowp(t, k, n, |i| b32[i], n, 1, &mut packed[po..], &mut |_| {});
        let run = |s: &MmStage, block: usize| {
            let mut y = vec![0u16; m * n];
            let mut scratch = vec![0f32; s.scratch_bytes_at(block) / 4 + 16];
            let off = scratch.as_ptr().align_offset(64);
            // SAFETY: operands of the sizes the contract asks; B packed reduced as `t`;
            // the scratch 64-aligned.
            unsafe {
                matmul(
                    N16::F16,
                    s,
                    t.code(),
                    block,
                    a.as_ptr(),
                    std::ptr::null(),
                    packed[po..].as_ptr().cast(),
                    bias.as_ptr(),
                    y.as_mut_ptr(),
                    scratch.as_mut_ptr().add(off),
                )
            };
            y
        };
        for block in [s1.min_block(), m] {
            let one = run(&s1, block);
            let (two, jobs) = on_two(|| run(&s2, block));
            assert!(jobs > 0, "{t:?} block {block}: no job spread");
            assert!(one == two, "{t:?} block {block}: 2 threads differ");
        }
    }
}

/// Blocks of at most `SMALL_ROWS` rows have no A-packing slot (the small kernels read the
/// widened rows in place): at every block, small or packed, the product stays inside the
/// scratch it planned (a canary after it) and gives the same bits, on 1 and 2 threads. The
/// transformer's FFN product (128x2048 by 2048x256) starts from a small block of more than
/// the 2 rows it had with a packing slot, in no more scratch than those 2 rows took.
#[test]
fn staged_matmul_small_blocks_stay_in_their_scratch() {
    use super::matmul::{MmStage, matmul};
    use crate::gemm::{arenac_pack_b, packed_b_len};
    for threads in [1, 2] {
        let ffn = MmStage {
            batch: 1,
            m: 128,
            k: 2048,
            n: 256,
            runtime_b: false,
            threads,
        };
        let b = ffn.min_block();
        assert!((3..=11).contains(&b), "{ffn:?}: min block {b}");
        assert!(
            ffn.scratch_bytes() <= 35_328 * threads,
            "{ffn:?}: {}",
            ffn.scratch_bytes()
        );
    }
    let (m, k, n) = (37, 2100, 100);
    let s1 = MmStage {
        batch: 1,
        m,
        k,
        n,
        runtime_b: false,
        threads: 1,
    };
    assert!(s1.cols() < n, "B must come in several column blocks");
    let s2 = MmStage { threads: 2, ..s1 };
    let a = data(m * k, 7);
    let b32: Vec<f32> = (0..k * n)
        .map(|i| ((i * 13 % 97) as f32 - 48.0) / 64.0)
        .collect();
    let mut packed = vec![0f32; packed_b_len(k, n)];
    // SAFETY: `b32` is `k x n` row-major; `packed` holds its packed size.
    unsafe { arenac_pack_b(k, n, b32.as_ptr(), n, 1, packed.as_mut_ptr()) };
    let bias: Vec<f32> = (0..n).map(|j| j as f32 / 32.0).collect();
    const CANARY: u32 = 0x7fc0_1234;
    let run = |s: &MmStage, block: usize| {
        let mut y = vec![0u16; m * n];
        let floats = s.scratch_bytes_at(block) / 4;
        let mut scratch = vec![f32::from_bits(CANARY); floats + 16 + 64];
        let off = scratch.as_ptr().align_offset(64);
        // SAFETY: operands of the sizes the contract asks; the scratch 64-aligned.
        unsafe {
            matmul(
                N16::F16,
                s,
                0,
                block,
                a.as_ptr(),
                std::ptr::null(),
                packed.as_ptr(),
                bias.as_ptr(),
                y.as_mut_ptr(),
                scratch.as_mut_ptr().add(off),
            )
        };
        let tail = &scratch[off + floats..off + floats + 64];
        assert!(
            tail.iter().all(|v| v.to_bits() == CANARY),
            "{s:?} at block {block}: wrote past its scratch"
        );
        y
    };
    let want = run(&s1, m);
    for block in [1, 2, 4, 5, 6, 7, 11, 12, 13, 24, s1.min_block()] {
        assert!(run(&s1, block) == want, "block {block}: 1 thread differs");
        let (two, _) = on_two(|| run(&s2, block));
        assert!(two == want, "block {block}: 2 threads differ");
    }
}

#[test]
fn one_slot_budgets_at_two_threads_plan_less_and_run_the_same_bits() {
    // Row bands (im2col or direct kernels inside): at 2 threads the budgets with
    // `ONE_SLOT` plan one slot (less than two slots at the smallest budget), run their
    // tasks one after the other with the inner kernel spread, bit for bit one thread.
    let cases = [
        geom(1, 32, 28, 32, 3, 2, 1),
        geom(1, 16, 20, 24, 3, 1, 1),
        geom(2, 8, 17, 12, 5, 2, 1),
    ];
    for p1 in cases {
        let p2 = ConvParams { threads: 2, ..p1 };
        let all = conv::budgets(&p2);
        let one: Vec<u64> = all
            .iter()
            .copied()
            .filter(|b| b & conv::ONE_SLOT != 0)
            .collect();
        assert!(!one.is_empty(), "{p2:?}: no one-slot budget");
        assert!(conv::budgets(&p1).iter().all(|b| b & conv::ONE_SLOT == 0));
        let two_min = all
            .iter()
            .filter(|&&b| b & conv::ONE_SLOT == 0 && slots::count(&p2, b) == 2)
            .map(|&b| conv::staged_bytes_at(&p2, b))
            .min()
            .unwrap_or(0);
        let smallest = conv::scratch_bytes(&p2);
        assert!(smallest < two_min, "{p2:?}: {smallest} not below {two_min}");
        // Read back from the smallest size: a budget within it.
        let back = conv::budget_for_scratch(&p2, smallest);
        assert!(conv::staged_bytes_at(&p2, back) <= smallest);
        let kk = (p1.kh * p1.kw) as usize;
        let x = data((p1.n * p1.c * p1.h * p1.w) as usize, 41);
        let wt: Vec<f32> = (0..(p1.m * p1.c / p1.group) as usize * kk)
            .map(|i| ((i * 13 % 31) as f32 - 15.0) / 64.0)
            .collect();
        for budget in one {
            assert_eq!(slots::count(&p2, budget), 1);
            let one = staged(&p1, budget & !conv::ONE_SLOT, &x, &wt, None);
            let (two, _) = on_two(|| staged(&p2, budget, &x, &wt, None));
            assert!(
                one == two,
                "{p2:?} at one-slot budget {budget}: 2 threads differ"
            );
        }
    }
}

#[test]
fn f32_direct_budgets_plan_no_inner_part_and_run_the_same_bits() {
    // Row bands on the direct kernels with f32 weights: at 1 and 2 threads `budgets_for`
    // (weights known f32) marks their budgets `F32_DIRECT`, the slots without the im2col
    // part the direct kernels never touch; the bands give the bits of the unmarked budget
    // at one thread.
    let p1 = geom(1, 16, 20, 24, 3, 1, 1);
    let p2 = ConvParams { threads: 2, ..p1 };
    let mut band = conv::band(&p2, 0, 1).0;
    crate::gemm::conv::mark_packed(&mut band);
    if band.packed_a != crate::gemm::direct::DIRECT_PACKED {
        // No direct kernel on this CPU.
        return;
    }
    let kk = (p1.kh * p1.kw) as usize;
    let x = data((p1.n * p1.c * p1.h * p1.w) as usize, 43);
    let wt: Vec<f32> = (0..(p1.m * p1.c) as usize * kk)
        .map(|i| ((i * 7 % 23) as f32 - 11.0) / 64.0)
        .collect();
    for p in [p1, p2] {
        let marked: Vec<u64> = conv::budgets_for(&p, true)
            .into_iter()
            .filter(|b| b & conv::F32_DIRECT != 0)
            .collect();
        assert!(
            !marked.is_empty(),
            "{} threads: no F32_DIRECT budget",
            p.threads
        );
        assert!(conv::budgets(&p).iter().all(|b| b & conv::F32_DIRECT == 0));
        for budget in marked {
            let base = budget & !(conv::F32_DIRECT | conv::ONE_SLOT);
            let full = conv::staged_bytes_at(&p, base | (budget & conv::ONE_SLOT));
            assert!(
                conv::staged_bytes_at(&p, budget) < full,
                "{} threads, {budget}: no smaller",
                p.threads
            );
            let one = staged(&p1, base, &x, &wt, None);
            let got = if p.threads == 1 {
                staged(&p1, budget, &x, &wt, None)
            } else {
                on_two(|| staged(&p2, budget, &x, &wt, None)).0
            };
            assert!(
                one == got,
                "{} threads at F32_DIRECT budget {budget}: bits differ",
                p.threads
            );
        }
    }
}

/// At two threads a Winograd band of several tile blocks planned with `ONE_SLOT` runs its
/// units one after the other in one Winograd slot shared by the threads
/// (`winograd::SHARED`): less scratch than a slot per thread (DBNet-320's neck Convs kept
/// Winograd at 2 threads so), the same bits as one thread.
#[test]
fn shared_winograd_bands_plan_one_slot_and_run_the_same_bits() {
    use crate::gemm::winograd::{SHARED, WINOGRAD_U_PACKED, transform_weights};
    let p1 = ConvParams {
        packed_a: WINOGRAD_U_PACKED,
        ..geom(1, 32, 72, 20, 3, 1, 1)
    };
    let p2 = ConvParams { threads: 2, ..p1 };
    let x = data((p1.c * p1.h * p1.w) as usize, 37);
    let wt: Vec<f32> = (0..(p1.m * p1.c * 9) as usize)
        .map(|i| ((i * 11 % 29) as f32 - 14.0) / 64.0)
        .collect();
    let mut u = vec![0f32; crate::gemm::winograd::weights_floats(&p1)];
    assert!(transform_weights(&p1, &wt, &mut u));
    let mut shared = 0;
    for budget in conv::budgets(&p2) {
        let Some(b) = conv::wino_bands(&p2, budget) else {
            continue;
        };
        if b.block & SHARED == 0 {
            continue;
        }
        shared += 1;
        let own = budget & !conv::ONE_SLOT;
        assert!(
            conv::scratch_bytes_at(&p2, budget) < conv::scratch_bytes_at(&p2, own),
            "{b:?}"
        );
        let one = staged(&p1, budget, &x, &wt, Some(&u));
        let (two, _) = on_two(|| staged(&p2, budget, &x, &wt, Some(&u)));
        assert!(one == two, "budget {budget} ({b:?}): 2 threads differ");
    }
    assert!(shared > 0, "no shared Winograd bands planned");
}
