use super::*;

/// A plain f64 DFT of the geometry's frames (the definition, O(n^2)), with the output layout
/// of the kernel.
fn naive(g: &DftGeometry, x: &[f32], w: Option<&[f32]>) -> Vec<f64> {
    let n = g.n;
    let mut y = vec![0.0f64; g.output_floats().unwrap()];
    let sign = if g.inverse { 1.0 } else { -1.0 };
    let scale = if g.inverse { 1.0 / n as f64 } else { 1.0 };
    for o in 0..g.outer {
        for f in 0..g.frames {
            let start = f * g.step;
            let avail = g.len_in.saturating_sub(start).min(n);
            for i in 0..g.inner {
                let mut sig = vec![(0.0f64, 0.0f64); n];
                for (t, s) in sig.iter_mut().enumerate().take(avail) {
                    let p = ((o * g.len_in + start + t) * g.inner + i) * g.in_c;
                    let wt = w.map_or(1.0, |w| f64::from(w[t]));
                    let im = if g.in_c == 2 {
                        f64::from(x[p + 1])
                    } else {
                        0.0
                    };
                    *s = (f64::from(x[p]) * wt, im * wt);
                }
                if g.transform() == Transform::C2r {
                    // Hermitian extension of the first n/2+1 bins.
                    let half = n / 2 + 1;
                    for k in 0..n {
                        sig[k] = if k < half {
                            sig[k]
                        } else {
                            let (re, im) = sig[n - k];
                            (re, -im)
                        };
                    }
                    sig[0].1 = 0.0;
                    if n.is_multiple_of(2) {
                        sig[n / 2].1 = 0.0;
                    }
                }
                for k in 0..g.out_len {
                    let (mut re, mut im) = (0.0, 0.0);
                    for (t, &(a, b)) in sig.iter().enumerate() {
                        let ang =
                            sign * 2.0 * std::f64::consts::PI * ((k * t) % n) as f64 / n as f64;
                        re += a * ang.cos() - b * ang.sin();
                        im += a * ang.sin() + b * ang.cos();
                    }
                    let q = (((o * g.frames + f) * g.out_len + k) * g.inner + i) * g.out_c;
                    y[q] = re * scale;
                    if g.out_c == 2 {
                        y[q + 1] = im * scale;
                    }
                }
            }
        }
    }
    y
}

fn run(g: DftGeometry, seed: u64) {
    let k = DftKernel::new(g).unwrap();
    assert_eq!(k.scratch_bytes(), scratch_bytes(&g));
    let mut s = seed;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    };
    let x: Vec<f32> = (0..g.input_floats().unwrap()).map(|_| next()).collect();
    let w: Vec<f32> = (0..g.n).map(|_| next()).collect();
    let w = g.windowed.then_some(w.as_slice());
    let mut y = vec![f32::NAN; g.output_floats().unwrap()];
    let mut scratch = vec![0u64; k.scratch_bytes().div_ceil(8)];
    // SAFETY: every buffer has the geometry's size; the scratch is 8-aligned and as large as
    // the kernel asks.
    unsafe {
        arenac_dft(
            &k,
            x.as_ptr(),
            w.map_or(std::ptr::null(), |w| w.as_ptr()),
            y.as_mut_ptr(),
            scratch.as_mut_ptr().cast(),
        )
    };
    let want = naive(&g, &x, w);
    // f32 FFT error grows like sqrt(n) log(n) times the values (here at most 1).
    let tol = 2e-6 * (g.n as f64).sqrt() * (g.n as f64).log2().max(1.0);
    for (q, (a, b)) in y.iter().zip(&want).enumerate() {
        assert!(
            (f64::from(*a) - b).abs() <= tol,
            "{g:?} element {q}: got {a}, want {b}"
        );
    }
}

fn dft(len_in: usize, n: usize, in_c: usize, inverse: bool, onesided: bool) -> DftGeometry {
    DftGeometry {
        outer: 2,
        frames: 1,
        step: 0,
        len_in,
        inner: 3,
        in_c,
        n,
        out_len: if onesided && !inverse { n / 2 + 1 } else { n },
        out_c: if onesided && inverse { 1 } else { 2 },
        inverse,
        windowed: false,
    }
}

#[test]
fn every_transform_matches_the_definition() {
    let mut seed = 7;
    for n in [1usize, 2, 3, 5, 8, 12, 17, 31, 64, 97] {
        for (in_c, inverse, onesided) in [
            (1, false, false),
            (1, false, true),
            (2, false, false),
            (2, false, true),
            (2, true, false),
            (1, true, false),
            (2, true, true),
        ] {
            // Zero-padded, exact and truncated signals.
            for len_in in [n.saturating_sub(1).max(1), n, n + 2] {
                seed += 1;
                run(dft(len_in, n, in_c, inverse, onesided), seed);
            }
        }
    }
}

#[test]
fn windowed_frames_match_the_definition() {
    for (n, step, len, in_c, onesided) in [
        (16, 4, 64, 1, true),
        (15, 5, 40, 1, false),
        (8, 8, 32, 2, false),
        (7, 3, 7, 1, true),
    ] {
        let g = DftGeometry {
            outer: 2,
            frames: (len - n) / step + 1,
            step,
            len_in: len,
            inner: 1,
            in_c,
            n,
            out_len: if onesided { n / 2 + 1 } else { n },
            out_c: 2,
            inverse: false,
            windowed: true,
        };
        run(g, n as u64);
    }
}

#[test]
fn invalid_geometries_are_refused() {
    let ok = dft(8, 8, 2, false, false);
    assert!(ok.check().is_ok());
    for bad in [
        DftGeometry { n: 0, ..ok },
        DftGeometry { in_c: 3, ..ok },
        DftGeometry { out_len: 3, ..ok },
        DftGeometry { out_c: 1, ..ok },
        DftGeometry {
            windowed: true,
            inverse: true,
            ..ok
        },
        DftGeometry {
            frames: 2,
            step: 0,
            ..ok
        },
        DftGeometry {
            outer: usize::MAX,
            ..ok
        },
    ] {
        assert!(DftKernel::new(bad).is_err(), "{bad:?}");
        assert_eq!(scratch_bytes(&bad), 0);
    }
}
