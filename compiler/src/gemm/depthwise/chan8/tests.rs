//! The channel-blocked kernel against an f64 loop and across splits.

use super::*;
use crate::gemm::conv::ConvParams;

/// Random geometries (ring and whole-plane layouts, strides, dilations, pads, channel
/// counts that leave partial blocks, two images) against an f64 loop, at widths 1 and 3
/// (row bands): within rounding of the reference and bit-identical to each other.
#[test]
fn blocks_match_a_plain_loop_and_every_split() {
    if !available() {
        return;
    }
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let (mut rings, mut wholes) = (0, 0);
    for case in 0..400 {
        let pick = |r: u64, lo: usize, hi: usize| lo + (r as usize) % (hi - lo + 1);
        let (kh, kw) = (pick(next(), 1, 5), pick(next(), 1, 5));
        let (sh, sw) = (pick(next(), 1, 3), pick(next(), 1, 3));
        let (dh, dw) = (pick(next(), 1, 2), pick(next(), 1, 2));
        let pads: Vec<usize> = (0..4).map(|_| pick(next(), 0, 2)).collect();
        let h = (kh - 1) * dh + 1 + pick(next(), 0, 12);
        // Mostly small planes, some wide rows that take the ring.
        let w = (kw - 1) * dw + 1 + pick(next(), 0, if case % 4 == 0 { 300 } else { 20 });
        let (c, n) = (pick(next(), 1, 19), pick(next(), 1, 2));
        let oh = (h + pads[0] + pads[2] - (kh - 1) * dh - 1) / sh + 1;
        let ow = (w + pads[1] + pads[3] - (kw - 1) * dw - 1) / sw + 1;
        let u = |v: usize| v as u64;
        let p = ConvParams {
            n: u(n),
            c: u(c),
            h: u(h),
            w: u(w),
            m: u(c),
            group: u(c),
            kh: u(kh),
            kw: u(kw),
            stride_h: u(sh),
            stride_w: u(sw),
            pad_t: u(pads[0]),
            pad_l: u(pads[1]),
            dil_h: u(dh),
            dil_w: u(dw),
            oh: u(oh),
            ow: u(ow),
            ..ConvParams::default()
        };
        let g = Geom::new(&p);
        let Some(ring) = Ring::new(&g) else { continue };
        if ring.whole {
            wholes += 1;
        } else {
            rings += 1;
        }
        let rnd = |r: u64| (r >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
        let x: Vec<f32> = (0..n * c * h * w).map(|_| rnd(next())).collect();
        let wt: Vec<f32> = (0..c * kh * kw).map(|_| rnd(next())).collect();
        let bias: Vec<f32> = (0..c).map(|_| rnd(next())).collect();
        let acts = [
            Activation::None,
            Activation::Relu,
            Activation::Clip(0.0, 0.1),
            Activation::Silu,
            Activation::HardSwish,
            Activation::Sigmoid,
        ];
        let act = acts[case % acts.len()];
        let with_bias = case % 3 != 0;
        let mut want = vec![0.0f32; n * c * oh * ow];
        for (i, d) in want.iter_mut().enumerate() {
            let (plane, ox, oy) = (i / (oh * ow), i % ow, i / ow % oh);
            let ch = plane % c;
            let mut acc = if with_bias { f64::from(bias[ch]) } else { 0.0 };
            for ky in 0..kh {
                for kx in 0..kw {
                    let iy = (oy * sh + ky * dh) as i64 - pads[0] as i64;
                    let ix = (ox * sw + kx * dw) as i64 - pads[1] as i64;
                    if (0..h as i64).contains(&iy) && (0..w as i64).contains(&ix) {
                        acc += f64::from(wt[ch * kh * kw + ky * kw + kx])
                            * f64::from(x[plane * h * w + iy as usize * w + ix as usize]);
                    }
                }
            }
            *d = crate::gemm::act::reference(act, acc) as f32;
        }
        let mut outs = Vec::new();
        for width in [1, 3] {
            // Sentinels after the output catch a store past its end.
            let mut got = vec![f32::NAN; want.len() + 64];
            got[want.len()..].fill(-7.0);
            let b = with_bias.then_some(bias.as_ptr());
            // SAFETY: available() checked; buffers of the sizes `p` implies.
            unsafe {
                run::<{ super::F32 }>(
                    &g,
                    &ring,
                    act,
                    n,
                    c,
                    width,
                    x.as_ptr(),
                    wt.as_ptr(),
                    b,
                    got.as_mut_ptr(),
                )
            };
            assert!(
                got[want.len()..].iter().all(|&v| v == -7.0),
                "case {case} {p:?}: wrote past the output"
            );
            got.truncate(want.len());
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-5 + 1e-5 * b.abs(),
                    "case {case} width {width} {p:?} element {i}: got {a}, want {b}"
                );
            }
            outs.push(got);
        }
        assert!(
            outs[0]
                .iter()
                .zip(&outs[1])
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "case {case}: widths 1 and 3 differ"
        );
    }
    assert!(rings > 10 && wholes > 10, "rings {rings} wholes {wholes}");
}
