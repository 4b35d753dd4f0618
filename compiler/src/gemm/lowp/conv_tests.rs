//! Winograd, the direct kernels and the small-plane pointwise kernel on reduced weights
//! against the same f32 kernels on the widened weights: bit for bit (the same f32 values in
//! the same order; the pointwise kernel's int8 within rounding, as it scales the sums), on
//! geometries of every direct kernel (channels in lanes, rows, flat plane), of Winograd with
//! several K blocks and channel runs and of the pointwise kernel (1 to 196 pixels, partial
//! panels, panels widened on the stack or in registers), with bias and a fused activation, one and two scratch slots or threads.

use super::super::super::conv::{
    Activation, ConvParams, arenac_conv2d, conv2d_scratch_bytes, mark_packed, prepare_weights,
    prepared_len,
};
use super::super::super::winograd::{self, WINOGRAD_PACKED};
use super::*;

/// Small deterministic generator (xorshift), values in [-1, 1).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

const REDUCED: [WeightType; 3] = [WeightType::F16, WeightType::Bf16, WeightType::I8];

/// One group, stride `s`, kernel `kk x kk`, "same"-style padding `pad`.
fn geom(c: u64, hw: (u64, u64), m: u64, kk: u64, s: u64, pad: u64, threads: u64) -> ConvParams {
    let out = |i: u64| (i + 2 * pad - kk) / s + 1;
    let [act, act_a, act_b] = Activation::Relu.encode();
    ConvParams {
        n: 1,
        c,
        h: hw.0,
        w: hw.1,
        m,
        group: 1,
        kh: kk,
        kw: kk,
        stride_h: s,
        stride_w: s,
        pad_t: pad,
        pad_l: pad,
        dil_h: 1,
        dil_w: 1,
        oh: out(hw.0),
        ow: out(hw.1),
        has_bias: 1,
        act,
        act_a,
        act_b,
        threads,
        ..ConvParams::default()
    }
}

/// Runs `arenac_conv2d` on `p` with weights `w` (bytes as the kernel reads them).
fn conv(p: &ConvParams, x: &[f32], w: &[u8], bias: &[f32]) -> Vec<f32> {
    let mut y = vec![f32::NAN; (p.n * p.m * p.oh * p.ow) as usize];
    let mut scratch = vec![f32::NAN; conv2d_scratch_bytes(p) / 4 + 16];
    // 64-byte aligned copy of the weights (the region's alignment).
    let mut wa = vec![0u64; w.len().div_ceil(8) + 8];
    let off = wa.as_ptr().align_offset(64);
    let dst = &mut bytemuck_u8(&mut wa)[off * 8..off * 8 + w.len()];
    dst.copy_from_slice(w);
    // SAFETY: the sizes of the entry point's contract (weights as the path reads them).
    unsafe {
        arenac_conv2d(
            p,
            x.as_ptr(),
            dst.as_ptr().cast(),
            bias.as_ptr(),
            y.as_mut_ptr(),
            scratch.as_mut_ptr(),
        )
    };
    y
}

fn bytemuck_u8(v: &mut [u64]) -> &mut [u8] {
    // SAFETY: u64 storage viewed as bytes (any bit pattern is a valid u8).
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), v.len() * 8) }
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

/// The weights `w` (OIHW) stored in `t` and widened back: what an f32 model would hold.
fn widened(p: &ConvParams, t: WeightType, w: &[f32]) -> Vec<f32> {
    let (m, k) = (p.m as usize, p.k());
    let mut packed = vec![0u8; region_bytes(p, t, Layout::Oihw)];
    pack(p, t, Layout::Oihw, |i| w[i], &mut packed, &mut |_| {});
    let q = ConvParams {
        wtype: t.code(),
        ..*p
    };
    let r = Reduced::of(&q, packed.as_ptr().cast(), Layout::Oihw).expect("reduced");
    let mut out = vec![0.0f32; m * k];
    for row in 0..m {
        // SAFETY: row `row`'s k elements and its scale inside `packed`.
        unsafe { r.widen(row * k, k, out.as_mut_ptr().add(row * k), (row, 1)) };
    }
    out
}

/// Checks the reduced path `layout` of `p` against the f32 path on the widened weights.
fn check(p: ConvParams, layout: Layout, seed: u64) {
    let mut rng = Rng(seed);
    let (c, h, w, m, k) = (
        p.c as usize,
        p.h as usize,
        p.w as usize,
        p.m as usize,
        p.k(),
    );
    let x: Vec<f32> = (0..c * h * w).map(|_| rng.next()).collect();
    let wt: Vec<f32> = (0..m * k).map(|_| rng.next() * 0.3).collect();
    let bias: Vec<f32> = (0..m).map(|_| rng.next()).collect();
    for t in REDUCED {
        let wide = widened(&p, t, &wt);
        // The f32 path on the widened weights.
        let mut pf = p;
        let wf = match layout {
            Layout::Oihw => {
                pf.packed_a = WINOGRAD_PACKED;
                f32_bytes(&wide)
            }
            Layout::Direct | Layout::PwSmall => {
                mark_packed(&mut pf);
                let mut out = vec![0.0f32; prepared_len(&pf)];
                prepare_weights(&mut pf.clone(), &wide, &mut out);
                f32_bytes(&out)
            }
        };
        let want = conv(&pf, &x, &wf, &bias);
        // The reduced path.
        let pr = ConvParams {
            wtype: t.code(),
            ..pf
        };
        let mut wr = vec![0u8; region_bytes(&pr, t, layout)];
        pack(&pr, t, layout, |i| wt[i], &mut wr, &mut |_| {});
        assert!(wr.len() <= super::super::conv_lowp_bytes(&pr, t), "{pr:?}");
        let got = conv(&pr, &x, &wr, &bias);
        assert!(want.iter().all(|v| v.is_finite()), "{t:?} {p:?}");
        // The pointwise kernel scales int8 sums, not weights: a few ulps of the sum's terms.
        let scaled_sums = layout == Layout::PwSmall && t == WeightType::I8;
        let same = want.iter().zip(&got).all(|(a, b)| {
            if scaled_sums {
                (a - b).abs() <= 1e-5 * (1.0 + a.abs()) * (k as f32).sqrt()
            } else {
                a.to_bits() == b.to_bits()
            }
        });
        assert!(
            same,
            "{t:?} {layout:?} {p:?}: reduced path differs from f32 on widened"
        );
    }
}

#[test]
fn winograd_reads_reduced_weights_as_f32_of_the_widened() {
    // C past one channel run (WINO_CI) and past one K block (KC = 384), M past a row
    // block, odd planes and pads.
    for (i, (c, hw, m)) in [(3, (9, 11), 5), (37, (13, 13), 50), (400, (10, 9), 20)]
        .into_iter()
        .enumerate()
    {
        for threads in [1, 2] {
            let p = geom(c, hw, m, 3, 1, 1, threads);
            assert!(winograd::geometry_fits(&p));
            check(p, Layout::Oihw, 11 + i as u64);
        }
    }
}

#[test]
fn direct_kernels_read_reduced_weights_as_f32_of_the_widened() {
    let cases = [
        // Channels in lanes: whole groups of 64 (two groups).
        geom(64, (7, 7), 128, 3, 1, 1, 1),
        geom(24, (15, 15), 128, 3, 2, 1, 2),
        geom(3, (29, 29), 64, 7, 2, 3, 1),
        // Rows (wide output rows, m not a multiple of 16; stride 2 with 3 channels).
        geom(5, (8, 40), 28, 3, 1, 0, 2),
        geom(3, (20, 64), 20, 3, 2, 1, 1),
        // Flat plane ("same", 14 wide).
        geom(9, (14, 14), 30, 3, 1, 1, 2),
    ];
    let mut ran = 0;
    for (i, p) in cases.into_iter().enumerate() {
        let mut q = p;
        mark_packed(&mut q);
        if !q.is_direct() {
            // Not AVX-512 (or the direct path is off): nothing to compare here.
            continue;
        }
        check(p, Layout::Direct, 101 + i as u64);
        ran += 1;
    }
    eprintln!("{ran} direct geometries checked");
}

#[test]
fn pointwise_kernel_reads_reduced_weights_as_f32_of_the_widened() {
    let cases = [
        // MobileNetV2's 7x7 stage (5 blocks of 32 channels), at one and two threads.
        geom(96, (7, 7), 160, 1, 1, 0, 1),
        geom(96, (7, 7), 160, 1, 1, 0, 2),
        // A squeeze-excitation conv on a 1x1 plane, fewer channels than a panel.
        geom(40, (1, 1), 10, 1, 1, 0, 1),
        // Two pixels (stored lane by lane), a partial second panel.
        geom(24, (1, 2), 27, 1, 1, 0, 1),
        // 14x14 with K >= 256, a partial last block, two threads.
        geom(256, (14, 14), 40, 1, 1, 0, 2),
        // One tile of 9 pixels (widened in registers, transposed on store).
        geom(64, (3, 3), 48, 1, 1, 0, 1),
        // Two panels of K = 1200, past the stack buffer: several tiles widened in registers.
        geom(1200, (2, 7), 40, 1, 1, 0, 1),
    ];
    let mut ran = 0;
    for (i, p) in cases.into_iter().enumerate() {
        let mut q = p;
        mark_packed(&mut q);
        if !is_pw_small(&q) {
            // Neither AVX-512 nor AVX2 (or the path is off): nothing to compare here.
            continue;
        }
        check(p, Layout::PwSmall, 201 + i as u64);
        ran += 1;
    }
    eprintln!("{ran} pointwise geometries checked");
}

#[test]
fn reduced_layouts_fit_the_gemm_layouts_bytes() {
    // The region and `arenac plan`'s prediction use `conv_lowp_bytes` whatever the path.
    for p in [
        geom(64, (56, 56), 64, 3, 1, 1, 1),
        geom(3, (224, 224), 64, 7, 2, 3, 2),
        geom(5, (8, 40), 28, 3, 1, 0, 1),
        // Pointwise on small planes: output channels no multiple of 16 (the panels need
        // more than the GEMM layout), and a multiple.
        geom(40, (1, 1), 10, 1, 1, 0, 1),
        geom(96, (7, 7), 20, 1, 1, 0, 1),
        geom(96, (7, 7), 160, 1, 1, 0, 1),
    ] {
        // The direct packing's 12-row panels: the GEMM layout's size where MR is 12 (the
        // only kernel the direct path runs with).
        let twelve = super::super::super::selected_kernel().mr == 12;
        let mut q = p;
        mark_packed(&mut q);
        for t in REDUCED {
            for layout in [Layout::Oihw, Layout::Direct, Layout::PwSmall] {
                if layout == Layout::Direct && !twelve
                    || layout == Layout::PwSmall && !is_pw_small(&q)
                {
                    continue;
                }
                assert_eq!(
                    region_bytes(&p, t, layout),
                    super::super::conv_lowp_bytes(&p, t),
                    "{p:?} {t:?} {layout:?}"
                );
            }
        }
    }
}

#[test]
fn int8_widening_scales_each_element_as_the_scalar_product() {
    // Elements q, scales per channel: element i of a run from channel ch0 scaled by channel
    // ch0 + i % period, as `q as f32 * scale` (the one-pass AVX-512 loop and the two-pass one).
    let n = 64 * 37;
    let q: Vec<u8> = (0..n + 64).map(|i| (i * 89 % 251) as u8).collect();
    let scales: Vec<f32> = (0..200).map(|i| (i as f32 + 0.37) / 1013.0).collect();
    let r = Reduced {
        base: q.as_ptr(),
        t: WeightType::I8,
        scales: scales.as_ptr(),
    };
    for (first, len, ch0, period) in [
        (0, n, 0, 64),
        (64, 32 * 9, 17, 32),
        (5, 147, 3, 1),
        (0, 48, 2, 16),
    ] {
        let mut got = vec![0f32; len];
        // SAFETY: `first + len <= q.len()`, channels `ch0 + period <= 200`, `len` floats.
        unsafe { r.widen(first, len, got.as_mut_ptr(), (ch0, period)) };
        for (i, g) in got.iter().enumerate() {
            let want = f32::from(q[first + i] as i8) * scales[ch0 + i % period];
            assert_eq!(
                g.to_bits(),
                want.to_bits(),
                "element {i} of ({first}, {len}, {ch0}, {period})"
            );
        }
    }
}
