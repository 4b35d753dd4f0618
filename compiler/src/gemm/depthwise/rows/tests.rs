//! The row kernel against an f64 loop, and its 16-bit forms against the f32 one narrowed.

use super::*;
use crate::gemm::conv::ConvParams;
use crate::gemm::depthwise::chan8::BF16;
use crate::gemm::stage16::{N16, narrow, widen};

/// A xorshift stream.
fn stream(mut s: u64) -> impl FnMut() -> u64 {
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

/// A depthwise conv of `c` channels (multiplier `mult`) the kernel takes.
#[allow(clippy::too_many_arguments)]
fn params(
    n: u64,
    c: u64,
    mult: u64,
    (h, w): (u64, u64),
    k: u64,
    s: u64,
    pads: [u64; 4],
) -> ConvParams {
    let oh = (h + pads[0] + pads[2] - k) / s + 1;
    let ow = (w + pads[1] + pads[3] - k) / s + 1;
    ConvParams {
        n,
        c,
        h,
        w,
        m: c * mult,
        group: c,
        kh: k,
        kw: k,
        stride_h: s,
        stride_w: s,
        pad_t: pads[0],
        pad_l: pads[1],
        dil_h: 1,
        dil_w: 1,
        oh,
        ow,
        ..ConvParams::default()
    }
}

/// The convolution in f64 from f32 values, activated, rounded to f32.
fn reference(p: &ConvParams, x: &[f32], wt: &[f32], bias: &[f32], act: Activation) -> Vec<f32> {
    let u = |v: u64| v as usize;
    let (c, m, h, w, oh, ow, k) = (u(p.c), u(p.m), u(p.h), u(p.w), u(p.oh), u(p.ow), u(p.kh));
    let mult = m / c;
    let mut y = vec![0f32; u(p.n) * m * oh * ow];
    for img in 0..u(p.n) {
        for o in 0..m {
            let xp = &x[(img * c + o / mult) * h * w..][..h * w];
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = f64::from(bias[o]);
                    for ky in 0..k {
                        for kx in 0..k {
                            let iy = (oy * u(p.stride_h) + ky) as i64 - p.pad_t as i64;
                            let ix = (ox * u(p.stride_w) + kx) as i64 - p.pad_l as i64;
                            if (0..h as i64).contains(&iy) && (0..w as i64).contains(&ix) {
                                acc += f64::from(wt[o * k * k + ky * k + kx])
                                    * f64::from(xp[iy as usize * w + ix as usize]);
                            }
                        }
                    }
                    y[((img * m + o) * oh + oy) * ow + ox] =
                        crate::gemm::act::reference(act, acc) as f32;
                }
            }
        }
    }
    y
}

/// Random geometries the kernels take (3/5/7 filters, strides 1/2, uneven pads, odd and
/// wide rows, "same" planes of narrow rows for the flat kernel, a channel multiplier, two
/// images), every activation: the f32 kernel within
/// rounding of the f64 loop, nothing written past the output; the f16 and bf16 kernels bit
/// for bit the f32 kernel on the widened input, narrowed.
#[test]
fn rows_match_a_plain_loop_and_the_16_bit_forms_match_f32() {
    if !available() {
        return;
    }
    let mut next = stream(0x5eed_1234_abcd_ef01);
    let acts = crate::gemm::depthwise::tests::ACTS;
    let mut taken = 0;
    for case in 0..300u64 {
        let pick = |r: u64, lo: u64, hi: u64| lo + r % (hi - lo + 1);
        // Every fourth case a 3 x 3 "same" stride-1 plane of narrow rows (the flat kernel).
        let same = case % 4 == 3;
        let k = if same {
            3
        } else {
            [3, 5, 7][case as usize % 3]
        };
        let s = if same { 1 } else { pick(next(), 1, 2) };
        let pads: [u64; 4] = if same {
            [(k - 1) / 2; 4]
        } else {
            std::array::from_fn(|_| pick(next(), 0, k - 1))
        };
        let h = pick(next(), 1, 20).max(k.saturating_sub(pads[0] + pads[2]));
        let wide = match case % 5 {
            _ if same => 7,
            0 => 300,
            _ => 40,
        };
        let w = pick(next(), 1, wide).max(k.saturating_sub(pads[1] + pads[3]));
        let (n, c, mult) = (pick(next(), 1, 2), pick(next(), 1, 5), pick(next(), 1, 2));
        let p = params(n, c, mult, (h, w), k, s, pads);
        let g = Geom::new(&p);
        if !applies::<F32>(&g) {
            assert!(p.ow < 8 && !same, "case {case} {p:?} not taken");
            continue;
        }
        taken += 1;
        let rnd = |r: u64| (r >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
        let xs = (n * c * h * w) as usize;
        let ys = (n * p.m * p.oh * p.ow) as usize;
        let x: Vec<f32> = (0..xs).map(|_| rnd(next()) * 4.0).collect();
        let wt: Vec<f32> = (0..p.m * k * k).map(|_| rnd(next())).collect();
        let bias: Vec<f32> = (0..p.m).map(|_| rnd(next())).collect();
        let act = acts[case as usize % acts.len()];
        let dims = (n as usize, c as usize, p.m as usize);
        let mut got = vec![f32::NAN; ys + 40];
        got[ys..].fill(-7.0);
        // SAFETY: the buffers have the sizes `p` gives; the kernel applies.
        let ran = unsafe {
            run::<F32>(
                &g,
                act,
                dims,
                1,
                x.as_ptr(),
                wt.as_ptr(),
                Some(bias.as_ptr()),
                got.as_mut_ptr(),
            )
        };
        assert!(ran);
        assert!(
            got[ys..].iter().all(|&v| v == -7.0),
            "case {case}: past the output"
        );
        let want = reference(&p, &x, &wt, &bias, act);
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 + 1e-5 * b.abs(),
                "case {case} {p:?} {act:?} element {i}: got {a}, want {b}"
            );
        }
        // bf16 also rounded by AVX512_BF16 where the CPU has it (the same bits).
        let ne = crate::gemm::stage16::convert::bf16_ne();
        for (t, ne) in [(N16::F16, false), (N16::Bf16, false), (N16::Bf16, ne)] {
            // The 16-bit input, and the f32 kernel on its widened values, narrowed.
            let mut x16 = vec![0u16; xs];
            narrow(t, &x, &mut x16);
            let mut xw = vec![0f32; xs];
            widen(t, &x16, &mut xw);
            let mut y32 = vec![0f32; ys];
            let mut y16 = vec![0xdeadu16; ys + 40];
            // SAFETY: as above, the 16-bit planes as `E` says.
            unsafe {
                run::<F32>(
                    &g,
                    act,
                    dims,
                    1,
                    xw.as_ptr(),
                    wt.as_ptr(),
                    None,
                    y32.as_mut_ptr(),
                );
                let (xp, yp) = (x16.as_ptr().cast(), y16.as_mut_ptr().cast());
                match t {
                    N16::F16 => run::<F16>(&g, act, dims, 1, xp, wt.as_ptr(), None, yp),
                    N16::Bf16 => run_with::<BF16>(ne, &g, act, dims, 1, xp, wt.as_ptr(), None, yp),
                };
            }
            let mut want16 = vec![0u16; ys];
            narrow(t, &y32, &mut want16);
            assert_eq!(&y16[..ys], &want16[..], "case {case} {t:?} ne {ne} {p:?}");
            assert!(
                y16[ys..].iter().all(|&v| v == 0xdead),
                "case {case}: past the output"
            );
        }
    }
    assert!(taken > 150, "only {taken} cases taken");
}
