//! Every variant this CPU runs against a plain loop over random geometry, NaN and -inf
//! included.

use super::*;

/// Every variant this CPU can run.
fn variants() -> Vec<(&'static str, PlaneFn)> {
    let mut v: Vec<(&'static str, PlaneFn)> = vec![("portable", plane_portable)];
    #[cfg(target_arch = "x86_64")]
    {
        // Calling these is sound only with the features detected here.
        if is_x86_feature_detected!("avx2") {
            v.push(("avx2", x86::plane_avx2));
            if is_x86_feature_detected!("avx512f") {
                v.push(("avx512", x86::plane_avx512));
            }
        }
    }
    v
}

/// The reference's rule, window by window in f64 over signed coordinates.
fn plain(p: &PoolParams, x: &[f32]) -> Vec<f32> {
    let i = |v: u64| v as i64;
    let mut out = Vec::new();
    for oy in 0..i(p.oh) {
        for ox in 0..i(p.ow) {
            let (mut max, mut sum, mut inside, mut padded) = (None::<f64>, 0.0f64, 0, 0);
            for ky in 0..i(p.kh) {
                for kx in 0..i(p.kw) {
                    let iy = oy * i(p.sh) + ky * i(p.dh) - i(p.pt);
                    let ix = ox * i(p.sw) + kx * i(p.dw) - i(p.pl);
                    if (0..i(p.h)).contains(&iy) && (0..i(p.w)).contains(&ix) {
                        let v = f64::from(x[(iy * i(p.w) + ix) as usize]);
                        max = Some(max.map_or(v, |m| if v > m || v.is_nan() { v } else { m }));
                        sum += v;
                        inside += 1;
                    }
                    if (-i(p.pt)..i(p.h) + i(p.pb)).contains(&iy)
                        && (-i(p.pl)..i(p.w) + i(p.pr)).contains(&ix)
                    {
                        padded += 1;
                    }
                }
            }
            let count = if p.kind == POOL_AVG_INCLUDE_PAD {
                padded
            } else {
                inside
            };
            out.push(match p.kind {
                POOL_MAX => max.map_or(f32::MIN, |m| m as f32),
                _ if count == 0 => f32::NAN,
                _ => (sum / f64::from(count)) as f32,
            });
        }
    }
    out
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

/// ONNX's output size (with `ceil_mode`'s rule of dropping a window that starts in the end
/// padding), or None when the window does not fit.
fn out_dim(n: u64, k: u64, s: u64, d: u64, pb: u64, pe: u64, ceil: bool) -> Option<u64> {
    let eff = (k - 1) * d + 1;
    let padded = n + pb + pe;
    let span = padded.checked_sub(eff)?;
    if !ceil {
        return Some(span / s + 1);
    }
    let mut out = span.div_ceil(s) + 1;
    if (out - 1) * s >= n + pb {
        out -= 1;
    }
    Some(out)
}

#[test]
fn planes_match_a_plain_loop() {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let mut done = 0;
    while done < 600 {
        let (kh, kw) = (r.pick(1, 4), r.pick(1, 5));
        let (sh, sw) = (r.pick(1, 3), r.pick(1, 3));
        let (dh, dw) = (r.pick(1, 2), r.pick(1, 3));
        let [pt, pl, pb, pr] = [r.pick(0, 3), r.pick(0, 3), r.pick(0, 3), r.pick(0, 3)];
        let (h, w) = (r.pick(1, 12), r.pick(1, 80));
        let ceil = r.next().is_multiple_of(2);
        let (Some(oh), Some(ow)) = (
            out_dim(h, kh, sh, dh, pt, pb, ceil),
            out_dim(w, kw, sw, dw, pl, pr, ceil),
        ) else {
            continue;
        };
        let kind = [POOL_MAX, POOL_MAX, POOL_AVG, POOL_AVG_INCLUDE_PAD][done % 4];
        let p = PoolParams {
            planes: 1,
            h,
            w,
            oh,
            ow,
            kh,
            kw,
            sh,
            sw,
            pt,
            pl,
            dh,
            dw,
            pb,
            pr,
            kind,
        };
        // Some planes get NaN and -inf, others only finite values.
        let special = r.next() % 3;
        let x: Vec<f32> = (0..h * w)
            .map(|_| {
                let v = r.next();
                match (special, v % 17) {
                    (1, 0) => f32::NAN,
                    (1 | 2, 1) => f32::NEG_INFINITY,
                    _ => (v >> 40) as f32 / (1u64 << 24) as f32 - 0.5,
                }
            })
            .collect();
        let want = plain(&p, &x);
        let g = Geom::new(&p);
        let mut t = [0.0f32; CAP];
        let in_place = in_place_ok(&p);
        for (name, f) in variants() {
            let mut got = vec![1.5f32; (oh * ow) as usize];
            // SAFETY: x holds h*w floats, got oh*ow, disjoint; the variant's CPU features
            // were detected in `variants`.
            unsafe { f(&g, x.as_ptr(), got.as_mut_ptr(), &mut t, None) };
            if in_place {
                // The same plane written over its input (the in-place condition holds).
                let mut buf = x.clone();
                let mut row = [0.0f32; CAP];
                let g = Geom {
                    lag: in_place_lag(&p).unwrap_or(0),
                    ..g
                };
                let b = buf.as_mut_ptr();
                // SAFETY: buf holds h*w >= oh*ow floats; `in_place_ok` holds.
                unsafe { f(&g, b.cast_const(), b, &mut t, Some(&mut row)) };
                let n = got.len();
                assert!(
                    buf[..n]
                        .iter()
                        .zip(&got)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{name} case {done} {p:?}: in place differs from out of place"
                );
            }
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                let same =
                    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-5 + 1e-5 * b.abs();
                assert!(
                    same,
                    "{name} case {done} {p:?} element {i}: got {a}, want {b}"
                );
            }
        }
        done += 1;
    }
}

#[test]
fn wide_rows_span_several_blocks() {
    // More output columns than one block of the stack buffer holds, and a plane through the
    // entry point.
    for (sw, kind) in [(1, POOL_MAX), (2, POOL_AVG), (3, POOL_AVG_INCLUDE_PAD)] {
        let (h, w) = (3u64, 9000u64);
        let ow = (w + 2 - 3) / sw + 1;
        let p = PoolParams {
            planes: 2,
            h,
            w,
            oh: 2,
            ow,
            kh: 2,
            kw: 3,
            sh: 1,
            sw,
            pt: 0,
            pl: 1,
            dh: 1,
            dw: 1,
            pb: 0,
            pr: 1,
            kind,
        };
        let x: Vec<f32> = (0..2 * h * w).map(|i| ((i * 7919) % 1013) as f32).collect();
        let mut y = vec![0.0f32; (2 * 2 * ow) as usize];
        // SAFETY: x holds planes*h*w floats, y planes*oh*ow, disjoint.
        unsafe { arenac_pool2d(&p, x.as_ptr(), y.as_mut_ptr()) };
        let plane = (h * w) as usize;
        for i in 0..2 {
            let want = plain(&p, &x[i * plane..(i + 1) * plane]);
            let got = &y[i * want.len()..(i + 1) * want.len()];
            for (j, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-3,
                    "sw {sw} plane {i} col {j}: {a} vs {b}"
                );
            }
        }
    }
}

#[test]
fn in_place_matches_a_plain_loop_over_several_planes() {
    // Through the entry point with y == x, for random geometry where `in_place_ok` holds
    // (stride 1 without top padding among them), and never a case where it fails.
    let mut r = Rng(0x2545_f491_4f6c_dd1d);
    let (mut done, mut stride1, mut refused) = (0, 0, 0);
    while done < 300 {
        let (kh, kw) = (r.pick(1, 4), r.pick(1, 4));
        let (sh, sw) = (r.pick(1, 3), r.pick(1, 3));
        let (dh, dw) = (r.pick(1, 2), r.pick(1, 2));
        let [pt, pl, pb, pr] = [r.pick(0, 2), r.pick(0, 2), r.pick(0, 2), r.pick(0, 2)];
        let (h, w) = (r.pick(1, 10), r.pick(1, 40));
        let ceil = r.next().is_multiple_of(2);
        let (Some(oh), Some(ow)) = (
            out_dim(h, kh, sh, dh, pt, pb, ceil),
            out_dim(w, kw, sw, dw, pl, pr, ceil),
        ) else {
            continue;
        };
        let planes = r.pick(1, 4);
        let kind = [POOL_MAX, POOL_AVG, POOL_AVG_INCLUDE_PAD][done % 3];
        let p = PoolParams {
            planes,
            h,
            w,
            oh,
            ow,
            kh,
            kw,
            sh,
            sw,
            pt,
            pl,
            dh,
            dw,
            pb,
            pr,
            kind,
        };
        if !in_place_ok(&p) {
            refused += 1;
            continue;
        }
        stride1 += usize::from(sh == 1);
        let plane = (h * w) as usize;
        let x: Vec<f32> = (0..planes as usize * plane)
            .map(|_| (r.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
            .collect();
        let mut buf = x.clone();
        let b = buf.as_mut_ptr();
        // SAFETY: buf holds planes*h*w floats (>= planes*oh*ow); `in_place_ok` holds.
        unsafe { arenac_pool2d(&p, b.cast_const(), b) };
        for i in 0..planes as usize {
            let want = plain(&p, &x[i * plane..(i + 1) * plane]);
            let got = &buf[i * want.len()..(i + 1) * want.len()];
            for (j, (a, b)) in got.iter().zip(&want).enumerate() {
                let same = (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-5 + 1e-5 * b.abs();
                assert!(same, "case {done} {p:?} plane {i} element {j}: {a} vs {b}");
            }
        }
        done += 1;
    }
    assert!(
        stride1 > 0 && refused > 0,
        "{stride1} stride-1 cases, {refused} refused"
    );
}

#[test]
fn in_place_condition_refuses_overlapping_rows() {
    // Stride 1 with three rows of top pad (7x7, same size): output row 0 covers input row 0,
    // which output row 3 still reads; a lag of at most two rows is not enough.
    let mut p = PoolParams {
        planes: 1,
        h: 5,
        w: 5,
        oh: 5,
        ow: 5,
        kh: 7,
        kw: 7,
        sh: 1,
        sw: 1,
        pt: 3,
        pl: 3,
        dh: 1,
        dw: 1,
        pb: 3,
        pr: 3,
        kind: POOL_MAX,
    };
    assert!(!in_place_ok(&p));
    // One row of top pad at stride 1 (3x3, same size): a lag of one row.
    (p.kh, p.kw, p.pt, p.pl, p.pb, p.pr) = (3, 3, 1, 1, 1, 1);
    assert_eq!(in_place_lag(&p), Some(1));
    // Without padding (3x3 output) each output row ends before the next window's first row.
    (p.oh, p.ow, p.pt, p.pl, p.pb, p.pr) = (3, 3, 0, 0, 0, 0);
    assert_eq!(in_place_lag(&p), Some(0));
    // A row wider than the row buffer is never in place.
    (p.w, p.ow, p.kw) = (CAP as u64 + 10, CAP as u64 + 8, 3);
    assert!(!in_place_ok(&p));
}

#[test]
fn direct_rows_match_a_plain_loop() {
    // MaxPool rows of the direct path (no dilation, stride 1 or 2) on planes wider than
    // `planes_match_a_plain_loop`'s: several whole vectors plus every tail length, windows of
    // 3 rows (unrolled) and others, all-padding edge windows (pads as wide as the kernel).
    let mut r = Rng(0x2545_f491_4f6c_dd1d);
    let mut done = 0;
    while done < 300 {
        let (kh, kw) = (r.pick(1, 5), r.pick(1, 5));
        let (sh, sw) = (r.pick(1, 3), r.pick(1, 2));
        let [pt, pl, pb, pr] = [r.pick(0, 3), r.pick(0, 3), r.pick(0, 3), r.pick(0, 3)];
        let (h, w) = (r.pick(1, 9), r.pick(1, 300));
        let ceil = r.next().is_multiple_of(2);
        let (Some(oh), Some(ow)) = (
            out_dim(h, kh, sh, 1, pt, pb, ceil),
            out_dim(w, kw, sw, 1, pl, pr, ceil),
        ) else {
            continue;
        };
        let p = PoolParams {
            planes: 2,
            h,
            w,
            oh,
            ow,
            kh,
            kw,
            sh,
            sw,
            pt,
            pl,
            dh: 1,
            dw: 1,
            pb,
            pr,
            kind: POOL_MAX,
        };
        let g = Geom::new(&p);
        let x: Vec<f32> = (0..2 * h * w)
            .map(|_| match r.next() {
                v if v % 29 == 0 => f32::NEG_INFINITY,
                v => (v >> 40) as f32 / (1u64 << 24) as f32 - 0.5,
            })
            .collect();
        let mut y = vec![1.5f32; (2 * oh * ow) as usize];
        // SAFETY: x holds planes*h*w floats, y planes*oh*ow, disjoint.
        unsafe { arenac_pool2d(&p, x.as_ptr(), y.as_mut_ptr()) };
        let plane = (h * w) as usize;
        for i in 0..2 {
            let want = plain(&p, &x[i * plane..(i + 1) * plane]);
            let got = &y[i * want.len()..(i + 1) * want.len()];
            for (j, (a, b)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    a.to_bits(),
                    b.to_bits(),
                    "case {done} {p:?} plane {i} element {j}"
                );
            }
        }
        for (name, f) in variants() {
            let mut t = [0.0f32; CAP];
            let mut got = vec![1.5f32; (oh * ow) as usize];
            // SAFETY: x holds a plane of h*w floats, got oh*ow, disjoint; the variant's CPU
            // features were detected in `variants`.
            unsafe { f(&g, x.as_ptr(), got.as_mut_ptr(), &mut t, None) };
            let want = plain(&p, &x[..plane]);
            assert!(
                got.iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{name} case {done} {p:?}"
            );
        }
        done += 1;
    }
}
