use super::*;

#[test]
fn widen_narrow_round_trip_and_round_to_nearest_even() {
    // 1 + 2^-8 is halfway between two bf16 values: it rounds to the even one (1.0);
    // 1 + 3 * 2^-8 rounds up to 1 + 2^-6.
    let x = [1.0f32, 1.0 + 1.0 / 256.0, 1.0 + 3.0 / 256.0, -2.5, 65504.0];
    let mut b = [0u16; 5];
    narrow(N16::Bf16, &x, &mut b);
    let mut back = [0f32; 5];
    widen(N16::Bf16, &b, &mut back);
    assert_eq!(back, [1.0, 1.0, 1.0 + 1.0 / 64.0, -2.5, 65536.0]);
    narrow(N16::F16, &x, &mut b);
    widen(N16::F16, &b, &mut back);
    assert_eq!(
        back,
        [1.0, 1.0 + 1.0 / 256.0, 1.0 + 3.0 / 256.0, -2.5, 65504.0]
    );
}

#[test]
fn unary_in_place_over_several_chunks() {
    let n = CHUNK * 2 + 7;
    let x: Vec<f32> = (0..n).map(|i| i as f32 - 1000.0).collect();
    let mut v = vec![0u16; n];
    narrow(N16::F16, &x, &mut v);
    let p = v.as_mut_ptr();
    // SAFETY: `p` holds `n` values; in place is allowed.
    unsafe {
        unary(N16::F16, n, p, p, &|s| {
            s.iter_mut().for_each(|e| *e = e.max(0.0))
        })
    };
    let mut back = vec![0f32; n];
    widen(N16::F16, &v, &mut back);
    for (i, (&a, &b)) in x.iter().zip(&back).enumerate() {
        assert_eq!(b, a.max(0.0), "element {i}");
    }
}

#[test]
fn conv_bands_cover_the_input_rows_they_read() {
    let p = crate::gemm::conv::ConvParams {
        n: 1,
        c: 2,
        h: 9,
        w: 5,
        m: 3,
        group: 1,
        kh: 3,
        kw: 3,
        stride_h: 2,
        stride_w: 1,
        pad_t: 1,
        pad_l: 1,
        dil_h: 1,
        dil_w: 1,
        oh: 5,
        ow: 5,
        ..Default::default()
    };
    // Output rows 0..2 read input rows -1..=3 (row -1 staged as zeros): a valid band.
    let (q, lo) = conv::band(&p, 0, 2);
    assert_eq!((lo, q.h, q.pad_t, q.oh), (-1, 5, 0, 2));
    // Rows 2..5 read 3..=9, row 9 past the input (zeros).
    let (q, lo) = conv::band(&p, 2, 5);
    assert_eq!((lo, q.h, q.pad_t, q.oh), (3, 7, 0, 3));
}

#[test]
fn depthwise_bands_fill_the_lanes_within_the_budget() {
    // MobileNetV2's 3x3/s2 depthwise on 96 x 112x112: whole planes of 8 channels (490 KiB)
    // exceed the smallest budget, so 8-channel blocks go in row bands that fit it.
    let p = crate::gemm::conv::ConvParams {
        n: 1,
        c: 96,
        h: 112,
        w: 112,
        m: 96,
        group: 96,
        kh: 3,
        kw: 3,
        stride_h: 2,
        stride_w: 2,
        pad_t: 1,
        pad_l: 1,
        dil_h: 1,
        dil_w: 1,
        oh: 56,
        ow: 56,
        ..Default::default()
    };
    let budget = conv::budgets(&p).last().copied().unwrap();
    let rows = conv::dw_bands(&p, budget).expect("banded");
    assert!((2..56).contains(&rows), "{rows} rows");
    assert!(conv::scratch_bytes(&p) as u64 <= budget);
    // 12 groups are not whole blocks of 8: whole planes, as before.
    let q = crate::gemm::conv::ConvParams {
        c: 12,
        m: 12,
        group: 12,
        ..p
    };
    assert_eq!(conv::dw_bands(&q, budget), None);
    assert!(conv::dw_block(&q, budget).is_some());
}

/// A staged depthwise Conv at every budget the planner may choose (8-channel row bands,
/// blocks of whole planes in multiples of 8 channels with a shorter last block, all planes):
/// the f32 depthwise conv of the widened input narrowed, bit for bit (each channel computes
/// alone). 20 and 145 groups: blocks of 8, 8, 4; 145 has no block of 8s whose last block is
/// 2 channels or more, so whole divisors (5, 29).
#[test]
fn depthwise_blocks_against_the_f32_conv() {
    use crate::gemm::conv::{ConvParams, arenac_conv2d};
    let geom = |g: u64, hw: u64, stride: u64| ConvParams {
        n: 2,
        c: g,
        h: hw,
        w: hw + 3,
        m: g,
        group: g,
        kh: 3,
        kw: 3,
        stride_h: stride,
        stride_w: stride,
        pad_t: 1,
        pad_l: 1,
        dil_h: 1,
        dil_w: 1,
        oh: (hw - 1) / stride + 1,
        ow: (hw + 2) / stride + 1,
        has_bias: 1,
        threads: 1,
        ..Default::default()
    };
    let mut partial = 0;
    for p in [geom(20, 21, 1), geom(145, 12, 2), geom(24, 30, 1)] {
        let (n, g, hw, ohw) = (
            p.n as usize,
            p.group as usize,
            (p.h * p.w) as usize,
            (p.oh * p.ow) as usize,
        );
        let x32: Vec<f32> = (0..n * g * hw)
            .map(|i| ((i * 37 % 113) as f32 - 56.0) / 32.0)
            .collect();
        let mut x = vec![0u16; x32.len()];
        narrow(N16::F16, &x32, &mut x);
        let mut xw = vec![0f32; x.len()];
        widen(N16::F16, &x, &mut xw);
        let wt: Vec<f32> = (0..g * 9)
            .map(|i| ((i * 11 % 29) as f32 - 14.0) / 16.0)
            .collect();
        let bias: Vec<f32> = (0..g).map(|j| j as f32 / 8.0 - 2.0).collect();
        let mut y32 = vec![0f32; n * g * ohw];
        // SAFETY: operands of the sizes the contract asks; depthwise needs no scratch.
        unsafe {
            arenac_conv2d(
                &p,
                xw.as_ptr(),
                wt.as_ptr(),
                bias.as_ptr(),
                y32.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        let mut want = vec![0u16; y32.len()];
        narrow(N16::F16, &y32, &mut want);
        for budget in conv::budgets(&p) {
            if let Some(b) = conv::dw_block(&p, budget) {
                partial += usize::from(p.group % b != 0);
                assert!(p.group % b != 1, "{p:?}: blocks of {b}");
            }
            // The staged paths (taken where `conv::dw_direct` does not hold).
            let mut scratch = vec![0f32; conv::staged_bytes_at(&p, budget) / 4 + 16];
            let off = scratch.as_ptr().align_offset(64);
            let mut y = vec![0u16; want.len()];
            // SAFETY: as above; the scratch as `staged_bytes_at` asks, 64-aligned.
            unsafe {
                conv::staged(
                    N16::F16,
                    &p,
                    budget,
                    x.as_ptr(),
                    wt.as_ptr(),
                    bias.as_ptr(),
                    y.as_mut_ptr(),
                    scratch.as_mut_ptr().add(off),
                )
            };
            assert!(y == want, "{p:?} at budget {budget}");
        }
    }
    assert!(partial > 0, "no budget ran a shorter last block");
}

/// A depthwise Conv on its 16-bit planes directly (`conv::dw_direct`: converting loads into
/// the channel-blocked kernel's ring, outputs narrowed in registers or, with an activation
/// the AVX-512 kernel applies in a second pass, through f32 rows): the f32 depthwise conv of
/// the widened input narrowed, bit for bit, for f16 and bf16; small planes (the whole padded
/// plane in the ring, rows shorter than 8) and large ones (a ring of rows), 3x3 and 5x5,
/// strides 1 and 2, odd sizes and pads, channels not a multiple of 8, batch 2, 1 and 2
/// threads, Clip / SiLU / no activation, inputs with infinities, NaN and values that
/// overflow f16; no scratch planned.
#[test]
fn depthwise_direct_against_the_f32_conv() {
    use crate::gemm::act::Activation;
    use crate::gemm::conv::{ConvParams, arenac_conv2d};
    let geom = |g: u64, h: u64, w: u64, k: u64, s: u64, pad: u64| ConvParams {
        n: 2,
        c: g,
        h,
        w,
        m: g,
        group: g,
        kh: k,
        kw: k,
        stride_h: s,
        stride_w: s,
        pad_t: pad,
        pad_l: pad,
        dil_h: 1,
        dil_w: 1,
        oh: (h + 2 * pad - k) / s + 1,
        ow: (w + 2 * pad - k) / s + 1,
        has_bias: 1,
        threads: 1,
        ..Default::default()
    };
    let cases = [
        geom(20, 7, 7, 3, 1, 1),
        geom(16, 9, 5, 5, 2, 2),
        geom(12, 41, 37, 3, 1, 1),
        geom(24, 45, 45, 3, 2, 1),
        geom(9, 30, 33, 5, 2, 2),
    ];
    let mut ran = 0;
    for base in cases {
        if !conv::dw_direct(&base) {
            continue;
        }
        ran += 1;
        assert_eq!(conv::scratch_bytes(&base), 0);
        for (act, threads) in [
            (Activation::Clip(0.0, 6.0), 1),
            (Activation::Silu, 2),
            (Activation::None, 2),
        ] {
            let mut p = ConvParams { threads, ..base };
            [p.act, p.act_a, p.act_b] = act.encode();
            let (n, g, hw, ohw) = (
                p.n as usize,
                p.group as usize,
                (p.h * p.w) as usize,
                (p.oh * p.ow) as usize,
            );
            let mut x32: Vec<f32> = (0..n * g * hw)
                .map(|i| ((i * 37 % 113) as f32 - 56.0) / 16.0)
                .collect();
            for (i, v) in [f32::INFINITY, f32::NAN, -1e6, 7e4, f32::NEG_INFINITY]
                .into_iter()
                .enumerate()
            {
                let at = (i * 997 + 5) % x32.len();
                x32[at] = v;
            }
            let wt: Vec<f32> = (0..g * (p.kh * p.kw) as usize)
                .map(|i| ((i * 11 % 29) as f32 - 14.0) / 16.0)
                .collect();
            let bias: Vec<f32> = (0..g).map(|j| j as f32 / 8.0 - 1.0).collect();
            for t in [N16::F16, N16::Bf16] {
                let mut x = vec![0u16; x32.len()];
                narrow(t, &x32, &mut x);
                let mut xw = vec![0f32; x.len()];
                widen(t, &x, &mut xw);
                let mut y32 = vec![0f32; n * g * ohw];
                // SAFETY: operands of the sizes the contract asks; depthwise needs no
                // scratch.
                unsafe {
                    arenac_conv2d(
                        &p,
                        xw.as_ptr(),
                        wt.as_ptr(),
                        bias.as_ptr(),
                        y32.as_mut_ptr(),
                        std::ptr::null_mut(),
                    )
                };
                let mut want = vec![0u16; y32.len()];
                narrow(t, &y32, &mut want);
                let mut y = vec![0u16; want.len()];
                // SAFETY: as above; no scratch (`scratch_bytes` is 0).
                unsafe {
                    conv::conv(
                        t,
                        &p,
                        0,
                        x.as_ptr(),
                        wt.as_ptr(),
                        bias.as_ptr(),
                        y.as_mut_ptr(),
                        std::ptr::null_mut(),
                    )
                };
                let bad = y.iter().zip(&want).position(|(a, b)| a != b);
                assert!(bad.is_none(), "{t:?} {p:?}: first difference at {bad:?}");
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        assert_eq!(ran, cases.len(), "the direct path did not run");
    }
}

/// The staged product at every block the planner may choose (all rows, halves, the
/// smallest): bit-identical to each other, and within f16 rounding of the f64 product of the
/// 16-bit operands, with a constant B and bias and with a run-time B over 2 batch slices; B
/// in two column blocks (a full one and a partial last panel).
#[test]
fn matmul_blocks_agree_bit_for_bit_and_with_the_reference() {
    use super::matmul::{MmStage, matmul};
    use crate::gemm::{arenac_pack_b, packed_b_len};
    let val = |i: usize, s: usize| ((i * s % 97) as f32 - 48.0) / 64.0;
    for runtime_b in [false, true] {
        let s = MmStage {
            batch: if runtime_b { 2 } else { 1 },
            m: 61,
            k: 2100,
            n: 70,
            runtime_b,
            threads: 1,
        };
        let (bt, m, k, n) = (s.batch, s.m, s.k, s.n);
        let blocks = s.blocks();
        assert_eq!(s.cols(), 48);
        assert!(blocks.len() > 2 && blocks[0] == m && *blocks.last().unwrap() == s.min_block());
        let mut a = vec![0u16; bt * m * k];
        let af: Vec<f32> = (0..a.len()).map(|i| val(i, 7)).collect();
        narrow(N16::F16, &af, &mut a);
        let mut b = vec![0u16; bt * k * n];
        let bf: Vec<f32> = (0..b.len()).map(|i| val(i, 13)).collect();
        narrow(N16::F16, &bf, &mut b);
        let (mut a32, mut b32) = (vec![0f32; a.len()], vec![0f32; b.len()]);
        widen(N16::F16, &a, &mut a32);
        widen(N16::F16, &b, &mut b32);
        let mut packed = vec![0f32; packed_b_len(k, n)];
        // SAFETY: B's first slice is `k x n` row-major; `packed` holds its packed size.
        unsafe { arenac_pack_b(k, n, b32.as_ptr(), n, 1, packed.as_mut_ptr()) };
        let bias: Vec<f32> = (0..n).map(|j| j as f32 / 32.0).collect();
        let bias_ptr = if runtime_b {
            std::ptr::null()
        } else {
            bias.as_ptr()
        };
        let mut first: Option<Vec<u16>> = None;
        for &block in &blocks {
            let mut y = vec![0u16; bt * m * n];
            let mut scratch = vec![0f32; s.scratch_bytes_at(block) / 4 + 16];
            let off = scratch.as_ptr().align_offset(64);
            // SAFETY: operands of the sizes the contract asks; the scratch 64-aligned.
            unsafe {
                matmul(
                    N16::F16,
                    &s,
                    0,
                    block,
                    a.as_ptr(),
                    b.as_ptr(),
                    packed.as_ptr(),
                    bias_ptr,
                    y.as_mut_ptr(),
                    scratch.as_mut_ptr().add(off),
                )
            };
            match &first {
                Some(f) => assert_eq!(f, &y, "block {block} (runtime B {runtime_b})"),
                None => first = Some(y),
            }
        }
        let mut y32 = vec![0f32; bt * m * n];
        widen(N16::F16, first.as_ref().unwrap(), &mut y32);
        for bi in 0..bt {
            for i in 0..m {
                for j in 0..n {
                    let mut want = if runtime_b { 0.0 } else { f64::from(bias[j]) };
                    for l in 0..k {
                        want += f64::from(a32[(bi * m + i) * k + l])
                            * f64::from(b32[(bi * k + l) * n + j]);
                    }
                    let got = f64::from(y32[(bi * m + i) * n + j]);
                    assert!(
                        (got - want).abs() <= 1e-3 * want.abs().max(1.0),
                        "y[{bi}][{i}][{j}] = {got}, reference {want}"
                    );
                }
            }
        }
    }
}

/// A constant B stored reduced (`--weights`): taken by the same column blocks (at the packed
/// view's column `j0`, int8 scales with it) at every row block. f16/bf16 of values exact in
/// both give the f32 product bit for bit; int8 agrees with f64 on the dequantized B.
#[test]
fn matmul_with_a_reduced_constant_b() {
    use super::matmul::{MmStage, matmul};
    use crate::gemm::lowp::{WeightType, lowp_b_bytes, pack_b_lowp};
    use crate::gemm::{arenac_pack_b, packed_b_len};
    // Multiples of 1/64 below 1: exact in f16 and bf16.
    let val = |i: usize, s: usize| ((i * s % 97) as f32 - 48.0) / 64.0;
    let s = MmStage {
        batch: 1,
        m: 29,
        k: 2100,
        n: 70,
        runtime_b: false,
        threads: 1,
    };
    let (m, k, n) = (s.m, s.k, s.n);
    assert!(s.cols() < n, "B must come in several column blocks");
    let af: Vec<f32> = (0..m * k).map(|i| val(i, 7)).collect();
    let mut a = vec![0u16; m * k];
    narrow(N16::F16, &af, &mut a);
    let mut a32 = vec![0f32; a.len()];
    widen(N16::F16, &a, &mut a32);
    let b32: Vec<f32> = (0..k * n).map(|i| val(i, 13)).collect();
    let bias: Vec<f32> = (0..n).map(|j| j as f32 / 32.0).collect();
    let run = |b_type: u64, packed: &[u8], block: usize| {
        let mut y = vec![0u16; m * n];
        let mut scratch = vec![0f32; s.scratch_bytes_at(block) / 4 + 16];
        let off = scratch.as_ptr().align_offset(64);
        // SAFETY: operands of the sizes the contract asks; the scratch 64-aligned.
        unsafe {
            matmul(
                N16::F16,
                &s,
                b_type,
                block,
                a.as_ptr(),
                std::ptr::null(),
                packed.as_ptr().cast(),
                bias.as_ptr(),
                y.as_mut_ptr(),
                scratch.as_mut_ptr().add(off),
            )
        };
        y
    };
    let mut f32_packed = vec![0f32; packed_b_len(k, n) + 16];
    let fo = f32_packed.as_ptr().align_offset(64);
    // SAFETY: B is `k x n` row-major; the buffer holds its packed size past the offset.
    unsafe { arenac_pack_b(k, n, b32.as_ptr(), n, 1, f32_packed.as_mut_ptr().add(fo)) };
    let f32_bytes: Vec<u8> = f32_packed[fo..]
        .iter()
        .flat_map(|x| x.to_ne_bytes())
        .collect();
    let block = s.min_block();
    let want = run(0, &f32_bytes, block);
    for t in [WeightType::F16, WeightType::Bf16, WeightType::I8] {
        let mut packed = vec![0u8; lowp_b_bytes(t, k, n) + 64];
        let po = packed.as_ptr().align_offset(64);
        pack_b_lowp(t, k, n, |i| b32[i], n, 1, &mut packed[po..], &mut |_| {});
        for blk in [block, m] {
            let y = run(t.code(), &packed[po..], blk);
            if t != WeightType::I8 {
                assert_eq!(y, want, "{t:?} block {blk}");
                continue;
            }
            let mut y32 = vec![0f32; m * n];
            widen(N16::F16, &y, &mut y32);
            for j in 0..n {
                let scale = (0..k).map(|l| b32[l * n + j].abs()).fold(0f32, f32::max) / 127.0;
                for i in 0..m {
                    let mut r = f64::from(bias[j]);
                    for l in 0..k {
                        let q = (b32[l * n + j] / scale).round() * scale;
                        r += f64::from(a32[i * k + l]) * f64::from(q);
                    }
                    let got = f64::from(y32[i * n + j]);
                    assert!(
                        (got - r).abs() <= 2e-3 * r.abs().max(1.0),
                        "int8 block {blk}: y[{i}][{j}] = {got}, reference {r}"
                    );
                }
            }
        }
    }
}

/// Softmax, LogSoftmax and LayerNormalization rows (lengths around the 8 lanes, a masked
/// -inf element) against f64 computations on the widened 16-bit input, in place.
#[test]
fn rows_against_the_reference() {
    use super::rows::{layer_norm, scratch_bytes, softmax};
    for len in [1usize, 3, 8, 37, 300] {
        let rows = 3;
        let mut x32: Vec<f32> = (0..rows * len)
            .map(|i| ((i * 29 % 101) as f32 - 50.0) / 8.0)
            .collect();
        x32[len / 2] = f32::NEG_INFINITY;
        let mut x = vec![0u16; x32.len()];
        narrow(N16::F16, &x32, &mut x);
        widen(N16::F16, &x, &mut x32);
        let mut scratch = vec![0f32; scratch_bytes(len) / 4];
        let scale: Vec<f32> = (0..len).map(|j| 1.0 + j as f32 / 64.0).collect();
        let bias: Vec<f32> = (0..len).map(|j| j as f32 / 16.0).collect();
        for which in 0..3 {
            let mut y = x.clone();
            let p = y.as_mut_ptr();
            // SAFETY: `rows * len` values in place; one row of scratch; scale and bias `len`.
            unsafe {
                match which {
                    0 | 1 => softmax(N16::F16, rows, len, which == 1, p, p, scratch.as_mut_ptr()),
                    _ => layer_norm(
                        N16::F16,
                        rows,
                        len,
                        1e-5,
                        scale.as_ptr(),
                        bias.as_ptr(),
                        p,
                        p,
                        scratch.as_mut_ptr(),
                    ),
                }
            }
            let mut got = vec![0f32; y.len()];
            widen(N16::F16, &y, &mut got);
            for r in 0..rows {
                let row: Vec<f64> = x32[r * len..(r + 1) * len]
                    .iter()
                    .map(|&v| f64::from(v))
                    .collect();
                let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = row.iter().map(|v| (v - max).exp()).sum();
                let n = len as f64;
                let finite: Vec<f64> = row
                    .iter()
                    .map(|&v| if v.is_finite() { v } else { 0.0 })
                    .collect();
                let mean = finite.iter().sum::<f64>() / n;
                let var = finite.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
                for j in 0..len {
                    let want = match which {
                        0 => (row[j] - max).exp() / sum,
                        1 => row[j] - max - sum.ln(),
                        _ => {
                            (row[j] - mean) / (var + 1e-5).sqrt() * f64::from(scale[j])
                                + f64::from(bias[j])
                        }
                    };
                    let g = f64::from(got[r * len + j]);
                    if which == 2 && r == 0 {
                        // The -inf row of LayerNormalization is NaN/inf either way.
                        continue;
                    }
                    let ok = g == want
                        || (g.is_nan() && want.is_nan())
                        || (g - want).abs() <= 2e-3 * want.abs().max(1e-2);
                    assert!(
                        ok,
                        "op {which} len {len} row {r} [{j}]: {g}, reference {want}"
                    );
                }
            }
        }
    }
}

/// A staged Conv at every staging budget the planner may choose: within f16 rounding of the
/// f64 convolution of the widened operands, and bit-identical across budgets. Pointwise
/// planes run by pixel runs across row ends (`conv::pw_pixels`: 7x7 on the small-plane
/// kernel's layout, 20x20 on the GEMM's, two images), a 3x3 "same" conv by bands of rows
/// whose padding rows are staged as zeros.
#[test]
fn conv_at_every_budget_against_the_reference() {
    use crate::gemm::conv::ConvParams;
    let geom = |n, c, h, w, m, k: u64| ConvParams {
        n,
        c,
        h,
        w,
        m,
        group: 1,
        kh: k,
        kw: k,
        stride_h: 1,
        stride_w: 1,
        pad_t: k / 2,
        pad_l: k / 2,
        dil_h: 1,
        dil_w: 1,
        oh: h,
        ow: w,
        has_bias: 1,
        threads: 1,
        ..Default::default()
    };
    let mut runs = 0;
    for p in [
        geom(1, 96, 7, 7, 40, 1),
        geom(2, 24, 20, 20, 40, 1),
        geom(1, 5, 9, 11, 7, 3),
        geom(2, 64, 1, 1, 24, 1),
        geom(1, 6, 5, 4, 3, 3),
    ] {
        let (n, c, hw, m) = (
            p.n as usize,
            p.c as usize,
            (p.h * p.w) as usize,
            p.m as usize,
        );
        let kk = (p.kh * p.kw) as usize;
        let x32: Vec<f32> = (0..n * c * hw)
            .map(|i| ((i * 37 % 113) as f32 - 56.0) / 32.0)
            .collect();
        let mut x = vec![0u16; x32.len()];
        narrow(N16::F16, &x32, &mut x);
        let mut xw = vec![0f32; x.len()];
        widen(N16::F16, &x, &mut xw);
        let wt: Vec<f32> = (0..m * c * kk)
            .map(|i| ((i * 11 % 29) as f32 - 14.0) / 64.0)
            .collect();
        let bias: Vec<f32> = (0..m).map(|j| j as f32 / 8.0 - 2.0).collect();
        let mut first: Option<Vec<u16>> = None;
        for budget in conv::budgets(&p) {
            runs += usize::from(conv::pw_pixels(&p, budget).is_some());
            let y = staged_f16(&p, budget, &x, &wt, &bias);
            match &first {
                Some(f) => assert_eq!(f, &y, "{p:?} at budget {budget}"),
                None => first = Some(y),
            }
        }
        let mut got = vec![0f32; n * m * hw];
        widen(N16::F16, first.as_ref().unwrap(), &mut got);
        let (h, w, k) = (p.h as i64, p.w as i64, p.kh as i64);
        for img in 0..n {
            for mo in 0..m {
                for oy in 0..h {
                    for ox in 0..w {
                        let mut want = f64::from(bias[mo]);
                        for ci in 0..c {
                            for ky in 0..k {
                                for kx in 0..k {
                                    let (iy, ix) = (oy + ky - k / 2, ox + kx - k / 2);
                                    if (0..h).contains(&iy) && (0..w).contains(&ix) {
                                        let xi = (img * c + ci) * hw + (iy * w + ix) as usize;
                                        let wi = (mo * c + ci) * kk + (ky * k + kx) as usize;
                                        want += f64::from(xw[xi]) * f64::from(wt[wi]);
                                    }
                                }
                            }
                        }
                        let g = f64::from(got[(img * m + mo) * hw + (oy * w + ox) as usize]);
                        assert!(
                            (g - want).abs() <= 2e-3 * want.abs().max(1.0),
                            "{p:?}: y[{img}][{mo}][{oy}][{ox}] = {g}, reference {want}"
                        );
                    }
                }
            }
        }
    }
    assert!(runs > 0, "no budget ran the pointwise convs by pixel runs");
}

/// A staged Conv whose bands take different direct kernels (a full band's input plane of
/// 16 x 64 = 1024 pixels runs the row/flat kernels on 12-row weight panels, the short last
/// band's 8 x 64 the channels-in-lanes kernel on its own layout) shares one packing of the
/// weights: every band must read the layout they were packed in. Against the f64 reference.
#[test]
fn direct_bands_read_the_layout_their_weights_were_packed_in() {
    use crate::gemm::conv::ConvParams;
    let p = ConvParams {
        n: 1,
        c: 64,
        h: 20,
        w: 64,
        m: 64,
        group: 1,
        kh: 3,
        kw: 3,
        stride_h: 1,
        stride_w: 1,
        pad_t: 1,
        pad_l: 1,
        dil_h: 1,
        dil_w: 1,
        oh: 20,
        ow: 64,
        has_bias: 1,
        threads: 1,
        ..Default::default()
    };
    let (c, h, w, m) = (64usize, 20usize, 64usize, 64usize);
    let x32: Vec<f32> = (0..c * h * w)
        .map(|i| ((i * 37 % 113) as f32 - 56.0) / 32.0)
        .collect();
    let mut x = vec![0u16; x32.len()];
    narrow(N16::F16, &x32, &mut x);
    let mut xw = vec![0f32; x.len()];
    widen(N16::F16, &x, &mut xw);
    let wt: Vec<f32> = (0..m * c * 9)
        .map(|i| ((i * 11 % 29) as f32 - 14.0) / 256.0)
        .collect();
    let bias: Vec<f32> = (0..m).map(|j| j as f32 / 8.0 - 2.0).collect();
    let mut want = vec![0f64; m * h * w];
    for mo in 0..m {
        for oy in 0..h as i64 {
            for ox in 0..w as i64 {
                let mut s = f64::from(bias[mo]);
                for ci in 0..c {
                    for ky in 0..3i64 {
                        for kx in 0..3i64 {
                            let (iy, ix) = (oy + ky - 1, ox + kx - 1);
                            if (0..h as i64).contains(&iy) && (0..w as i64).contains(&ix) {
                                let xi = ci * h * w + (iy as usize) * w + ix as usize;
                                let wi = (mo * c + ci) * 9 + (ky * 3 + kx) as usize;
                                s += f64::from(xw[xi]) * f64::from(wt[wi]);
                            }
                        }
                    }
                }
                want[(mo * h + oy as usize) * w + ox as usize] = s;
            }
        }
    }
    let per_row = (p.m * p.ow + p.c * p.w) * 4;
    for budget in conv::budgets(&p)
        .into_iter()
        .chain([14 * per_row, 6 * per_row])
    {
        let y = staged_f16(&p, budget, &x, &wt, &bias);
        let mut got = vec![0f32; y.len()];
        widen(N16::F16, &y, &mut got);
        for (i, (&g, &r)) in got.iter().zip(&want).enumerate() {
            assert!(
                (f64::from(g) - r).abs() <= 2e-3 * r.abs().max(1.0),
                "budget {budget} ({} rows): y[{i}] = {g}, reference {r}",
                conv::band_rows(&p, budget)
            );
        }
    }
}

/// `p` staged on f16 data `x` at `budget`: the OIHW weights `wt` prepared as the lowering
/// prepares them for that budget, the scratch as `scratch_bytes_at` asks (64-aligned).
fn staged_f16(
    p: &crate::gemm::conv::ConvParams,
    budget: u64,
    x: &[u16],
    wt: &[f32],
    bias: &[f32],
) -> Vec<u16> {
    use crate::gemm::conv::{ConvParams, prepare_weights, prepared_len};
    let mut wp = conv::weights_params(p, budget);
    let mut packed = vec![0f32; prepared_len(&wp)];
    prepare_weights(&mut wp, wt, &mut packed);
    let q = ConvParams {
        packed_a: wp.packed_a,
        ..*p
    };
    let mut scratch = vec![0f32; conv::scratch_bytes_at(&q, budget) / 4 + 16];
    let off = scratch.as_ptr().align_offset(64);
    let mut y = vec![0u16; (p.n * p.m * p.oh * p.ow) as usize];
    // SAFETY: operands of the sizes the contract asks, the weights prepared for this budget,
    // the scratch as `scratch_bytes_at` asks, 64-aligned.
    unsafe {
        conv::conv(
            N16::F16,
            &q,
            budget,
            x.as_ptr(),
            packed.as_ptr(),
            bias.as_ptr(),
            y.as_mut_ptr(),
            scratch.as_mut_ptr().add(off),
        )
    };
    y
}
