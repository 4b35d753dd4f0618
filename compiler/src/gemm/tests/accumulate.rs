//! A fused residual (`ConvParams::accumulate`): `y` holds `r` on entry and every path of
//! `arenac_conv2d` for group-1 2-d convs leaves `act(conv(x) + bias + r)` there. Each case is
//! checked against a plain f64 reference (conv + bias + r, then the activation), every output
//! within [`TOL`] of the sum of the magnitudes of its terms, on the im2col and pointwise GEMM
//! paths (f32 and reduced GEMM-layout weights, a product split over the threads), Winograd
//! (weights transformed per run, precomputed, reduced; one-unit runs shared by the threads),
//! the direct kernels (channels in lanes, rows, flat plane; f32 and reduced) and the
//! small-plane pointwise kernel (f32 and reduced; 1, 2 and 12+ pixels per tile), at 1, 2 and 3
//! threads, with no activation, Relu, Clip and SiLU. The path each case takes is asserted (it
//! depends on the selected kernel: run again with `ARENAC_GEMM_KERNEL=avx2` for the AVX2
//! kernels, where the direct geometries take the GEMM path). A run that ignored the residual
//! errs by `|r|`, thousands of times [`TOL`].

use super::super::conv::{
    Activation, ConvParams, arenac_conv2d, conv2d_scratch_bytes, mark_packed, prepare_weights,
    prepared_len,
};
use super::super::lowp::conv::{self as lconv, Layout, Reduced};
use super::super::lowp::{WeightType, conv_lowp_bytes, mark_conv, pack_conv_lowp};
use super::super::winograd::{self, WINOGRAD_PACKED, WINOGRAD_U_PACKED};
use super::super::{direct, direct_flat, selected_kernel};

/// Largest error of an output relative to `|bias| + Σ |w x| + |r|` (its terms' magnitudes).
const TOL: f64 = 1e-5;

/// The value written after the scratch: a run must leave it (the scratch does not grow).
const GUARD: f32 = 12345.0;

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

/// The kernel `arenac_conv2d` runs a prepared conv on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    Im2col,
    Pointwise,
    Winograd,
    WinogradPre,
    /// The direct kernel with channels in the lanes (`direct/cl.rs`).
    Cl,
    /// The direct kernel over the flattened plane (`direct_flat.rs`).
    Flat,
    /// The direct row kernel (`direct.rs`).
    Row,
    PwSmall,
}

/// The path of `p` as prepared (its `packed_a` and geometry), as `arenac_conv2d` dispatches.
fn path_of(p: &ConvParams) -> Path {
    if p.packed_a == WINOGRAD_U_PACKED {
        Path::WinogradPre
    } else if p.packed_a == WINOGRAD_PACKED {
        Path::Winograd
    } else if p.packed_a == direct::DIRECT_PACKED {
        if direct::block_rows(p) > 12 {
            Path::Cl
        } else if direct_flat::geometry_fits(p) {
            Path::Flat
        } else {
            Path::Row
        }
    } else if p.packed_a == super::super::pw_small::PW_SMALL_PACKED {
        Path::PwSmall
    } else if p.is_pointwise() {
        Path::Pointwise
    } else {
        Path::Im2col
    }
}

/// Whether the direct kernels run here (AVX-512 selected) and the small-plane pointwise one.
fn avx512() -> bool {
    selected_kernel().name.starts_with("avx512")
}

fn pw_small_runs() -> bool {
    #[cfg(target_arch = "x86_64")]
    let f16c = std::arch::is_x86_feature_detected!("f16c");
    #[cfg(not(target_arch = "x86_64"))]
    let f16c = false;
    avx512() || (selected_kernel().name.starts_with("avx2") && f16c)
}

/// A conv geometry: `n` images, `c -> m` channels, `kk x kk` kernel at stride `s`, pads `pad`
/// on every side, one thread, no activation or bias (set per run).
fn geom(n: u64, c: u64, hw: (u64, u64), m: u64, kk: u64, s: u64, pad: u64) -> ConvParams {
    let out = |i: u64| (i + 2 * pad - kk) / s + 1;
    ConvParams {
        n,
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
        threads: 1,
        ..ConvParams::default()
    }
}

/// How a case stores its weights for the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    /// f32, packed by `prepare_weights` for the path the geometry takes.
    F32,
    /// Winograd, OIHW weights transformed per run (f32, or reduced with `Some`).
    Winograd(Option<WeightType>),
    /// Winograd on precomputed transformed weights.
    WinogradPre,
    /// Reduced weights in the layout of the path the geometry takes (direct, small-plane
    /// pointwise, else the GEMM layout).
    Reduced(WeightType),
}

/// `p` prepared as the code generator would for `form`, the weights' bytes as the kernel
/// reads them, and the OIHW weights the kernel computes with (reduced ones widened back).
fn prepare(p: &ConvParams, form: Form, w: &[f32]) -> (ConvParams, Vec<u8>, Vec<f32>) {
    let mut q = *p;
    let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
    match form {
        Form::F32 => {
            mark_packed(&mut q);
            let mut out = vec![0.0f32; prepared_len(&q)];
            prepare_weights(&mut q.clone(), w, &mut out);
            (q, bytes(&out), w.to_vec())
        }
        Form::WinogradPre => {
            q.packed_a = WINOGRAD_U_PACKED;
            let mut u = vec![f32::NAN; winograd::weights_floats(&q)];
            assert!(winograd::transform_weights(&q, w, &mut u), "{q:?}");
            (q, bytes(&u), w.to_vec())
        }
        Form::Winograd(None) => {
            q.packed_a = WINOGRAD_PACKED;
            (q, bytes(w), w.to_vec())
        }
        Form::Winograd(Some(t)) => {
            q.packed_a = WINOGRAD_PACKED;
            q.wtype = t.code();
            (q, reduced_bytes(&q, t, Layout::Oihw, w), widened(p, t, w))
        }
        Form::Reduced(t) => {
            mark_packed(&mut q);
            let wide = widened(p, t, w);
            if q.is_direct() || lconv::is_pw_small(&q) {
                let layout = if q.is_direct() {
                    Layout::Direct
                } else {
                    Layout::PwSmall
                };
                q.wtype = t.code();
                (q, reduced_bytes(&q, t, layout, w), wide)
            } else {
                assert!(mark_conv(&mut q, t), "{q:?}");
                let mut out = vec![0u8; conv_lowp_bytes(&q, t)];
                pack_conv_lowp(&q, t, |i| w[i], &mut out, &mut |_| {});
                (q, out, wide)
            }
        }
    }
}

/// `w` packed in `t` in `layout` ([`lconv::pack`]).
fn reduced_bytes(p: &ConvParams, t: WeightType, layout: Layout, w: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; lconv::region_bytes(p, t, layout)];
    lconv::pack(p, t, layout, |i| w[i], &mut out, &mut |_| {});
    out
}

/// The OIHW weights `w` stored in `t` and widened back: the values every reduced path
/// computes with (the same per-channel int8 scales in every layout).
fn widened(p: &ConvParams, t: WeightType, w: &[f32]) -> Vec<f32> {
    let (m, k) = (p.m as usize, p.k());
    let q = ConvParams {
        wtype: t.code(),
        packed_a: WINOGRAD_PACKED,
        ..*p
    };
    let packed = reduced_bytes(&q, t, Layout::Oihw, w);
    let r = Reduced::of(&q, packed.as_ptr().cast(), Layout::Oihw).expect("reduced");
    let mut out = vec![0.0f32; m * k];
    for row in 0..m {
        // SAFETY: row `row`'s k elements and its scale inside `packed`.
        unsafe { r.widen(row * k, k, out.as_mut_ptr().add(row * k), (row, 1)) };
    }
    out
}

/// `arenac_conv2d` on `p` (threads `p.threads`, on a pool of that many) with `y` holding
/// `r` on entry; the output. Checks that nothing is written past the planned scratch.
fn run(p: &ConvParams, x: &[f32], w: &[u8], bias: &[f32], r: &[f32]) -> Vec<f32> {
    let mut y = r.to_vec();
    let floats = conv2d_scratch_bytes(p) / 4;
    let mut scratch = vec![f32::NAN; floats + 64];
    scratch[floats..].fill(GUARD);
    // 64-byte aligned weights (the region's alignment).
    let mut wa = vec![0u64; w.len().div_ceil(8) + 8];
    let off = wa.as_ptr().align_offset(64);
    // SAFETY: u64 storage viewed as bytes (any bit pattern is a valid u8).
    let wb = unsafe { std::slice::from_raw_parts_mut(wa.as_mut_ptr().cast::<u8>(), wa.len() * 8) };
    let dst = &mut wb[off * 8..off * 8 + w.len()];
    dst.copy_from_slice(w);
    let mut call = || {
        // SAFETY: the entry point's contract: operands of the geometry's sizes, the weights
        // as `prepare` stored them for `p`, the scratch `conv2d_scratch_bytes` gives.
        unsafe {
            arenac_conv2d(
                p,
                x.as_ptr(),
                dst.as_ptr().cast(),
                bias.as_ptr(),
                y.as_mut_ptr(),
                scratch.as_mut_ptr(),
            )
        }
    };
    if p.threads > 1 {
        let pool = crate::par::Pool::new(p.threads as usize).expect("a pool");
        pool.set_eager(true);
        crate::par::with_pool(Some(&pool), call);
    } else {
        call();
    }
    assert!(
        scratch[floats..].iter().all(|&v| v == GUARD),
        "{p:?}: the run wrote past its scratch"
    );
    y
}

/// Checks `got` against `act(conv(x, w) + bias + r)` in f64 (`w` OIHW, the values the
/// kernel computes with): the first output past [`TOL`], if any.
fn check_against_reference(
    p: &ConvParams,
    (x, w, bias, r): (&[f32], &[f32], &[f32], &[f32]),
    got: &[f32],
    what: &str,
) -> Result<(), String> {
    let us = |v: u64| v as usize;
    let (n, c, h, wd, m) = (us(p.n), us(p.c), us(p.h), us(p.w), us(p.m));
    let (kh, kw, oh, ow) = (us(p.kh), us(p.kw), us(p.oh), us(p.ow));
    let (sh, sw, pt, pl) = (us(p.stride_h), us(p.stride_w), us(p.pad_t), us(p.pad_l));
    let act = p.activation();
    for img in 0..n {
        for mi in 0..m {
            for oy in 0..oh {
                for ox in 0..ow {
                    let at = ((img * m + mi) * oh + oy) * ow + ox;
                    let b = if p.has_bias != 0 {
                        bias[mi] as f64
                    } else {
                        0.0
                    };
                    let rv = r[at] as f64;
                    let (mut s, mut mag) = (b + rv, b.abs() + rv.abs());
                    for ci in 0..c {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = (oy * sh + ky) as isize - pt as isize;
                                let ix = (ox * sw + kx) as isize - pl as isize;
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= wd as isize {
                                    continue;
                                }
                                let xv = x[((img * c + ci) * h + iy as usize) * wd + ix as usize];
                                let wv = w[((mi * c + ci) * kh + ky) * kw + kx];
                                s += xv as f64 * wv as f64;
                                mag += (xv as f64 * wv as f64).abs();
                            }
                        }
                    }
                    let want = act.apply(s as f32) as f64;
                    let err = (got[at] as f64 - want).abs() / mag.max(1e-30);
                    // A NaN fails too.
                    if err.is_nan() || err > TOL {
                        return Err(format!(
                            "{what} {p:?}: y[{img},{mi},{oy},{ox}] = {}, want {want} (r {rv}, \
                             error {err:.2e} of the scale {mag})",
                            got[at]
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// The activations each case runs with (and whether that run has a bias).
const ACTS: [(Activation, bool); 4] = [
    (Activation::None, false),
    (Activation::Relu, true),
    (Activation::Clip(-0.75, 1.5), true),
    (Activation::Silu, true),
];

/// Runs geometry `p` stored as `form` at 1, 2 and 3 threads with every activation of
/// [`ACTS`], `y` pre-filled with a random residual, and checks each output; asserts the path
/// taken is `want`. The runs whose output is wrong are added to `bad` (one line each).
fn check(p: ConvParams, form: Form, want: Path, seed: u64, bad: &mut Vec<String>) {
    let mut rng = Rng(seed);
    let (n, c, h, w, m, k) = (
        p.n as usize,
        p.c as usize,
        p.h as usize,
        p.w as usize,
        p.m as usize,
        p.k(),
    );
    let x: Vec<f32> = (0..n * c * h * w).map(|_| rng.next()).collect();
    let wt: Vec<f32> = (0..m * k).map(|_| rng.next() * 0.3).collect();
    let bias: Vec<f32> = (0..m).map(|_| rng.next()).collect();
    let outs = n * m * (p.oh * p.ow) as usize;
    let r: Vec<f32> = (0..outs).map(|_| 2.0 * rng.next()).collect();
    for (i, (act, has_bias)) in ACTS.into_iter().enumerate() {
        for threads in 1..=3u64 {
            let [a, a_a, a_b] = act.encode();
            let pa = ConvParams {
                act: a,
                act_a: a_a,
                act_b: a_b,
                has_bias: u64::from(has_bias),
                accumulate: 1,
                threads,
                ..p
            };
            let (q, wb, wk) = prepare(&pa, form, &wt);
            assert_eq!(path_of(&q), want, "{form:?} {q:?}");
            let got = run(&q, &x, &wb, &bias, &r);
            let what = format!("{want:?} {form:?} act {i} threads {threads}:");
            if let Err(e) = check_against_reference(&q, (&x, &wk, &bias, &r), &got, &what) {
                bad.push(e);
            }
        }
    }
}

/// Fails with every wrong run of `bad` listed.
fn none_wrong(bad: &[String]) {
    assert!(
        bad.is_empty(),
        "{} runs wrong:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

#[test]
fn im2col_and_pointwise_gemm_add_the_residual() {
    let cases = [
        // 3x3 stride 2 on 8 channels: no direct kernel takes it (units per thread).
        (geom(2, 8, (15, 13), 20, 3, 2, 1), Path::Im2col),
        // A 4x4 plane of 40 channels: fewer pixels than channels, the product split over the
        // threads.
        (geom(1, 16, (7, 7), 40, 3, 2, 1), Path::Im2col),
        // 1x1 on a 20x20 plane (past the small-plane kernel), a partial last panel.
        (geom(1, 24, (20, 19), 36, 1, 1, 0), Path::Pointwise),
    ];
    let mut bad = Vec::new();
    for (i, (p, want)) in cases.into_iter().enumerate() {
        for form in [
            Form::F32,
            Form::Reduced(WeightType::F16),
            Form::Reduced(WeightType::I8),
        ] {
            check(p, form, want, 10 + i as u64, &mut bad);
        }
    }
    none_wrong(&bad);
}

#[test]
fn winograd_adds_the_residual() {
    let cases = [
        // Pads on both sides, partial tiles at the right and bottom edges, two images.
        geom(2, 5, (11, 9), 7, 3, 1, 1),
        // Two row blocks (M > 48), several tile blocks, no pads.
        geom(1, 20, (30, 26), 60, 3, 1, 0),
    ];
    let mut bad = Vec::new();
    for (i, p) in cases.into_iter().enumerate() {
        assert!(winograd::geometry_fits(&p), "{p:?}");
        check(
            p,
            Form::Winograd(None),
            Path::Winograd,
            20 + i as u64,
            &mut bad,
        );
        check(
            p,
            Form::WinogradPre,
            Path::WinogradPre,
            20 + i as u64,
            &mut bad,
        );
        check(
            p,
            Form::Winograd(Some(WeightType::Bf16)),
            Path::Winograd,
            20 + i as u64,
            &mut bad,
        );
        check(
            p,
            Form::Winograd(Some(WeightType::I8)),
            Path::Winograd,
            20 + i as u64,
            &mut bad,
        );
    }
    none_wrong(&bad);
}

#[test]
fn winograd_one_unit_runs_add_the_residual_on_every_thread() {
    // One tile block of one row block ([`winograd::units`] 1 at 2 and 3 threads): the output
    // transform split by output channels among the threads.
    let cases = [
        geom(1, 40, (12, 30), 45, 3, 1, 1),
        geom(1, 3, (9, 50), 13, 3, 1, 1),
    ];
    let mut bad = Vec::new();
    for (i, p) in cases.into_iter().enumerate() {
        for (form, packed) in [
            (Form::WinogradPre, WINOGRAD_U_PACKED),
            (Form::Winograd(None), WINOGRAD_PACKED),
        ] {
            for threads in [2, 3] {
                let q = ConvParams {
                    packed_a: packed,
                    threads,
                    ..p
                };
                assert_eq!(winograd::units(&q), 1, "{q:?}");
            }
            let want = path_of(&ConvParams {
                packed_a: packed,
                ..p
            });
            check(p, form, want, 30 + i as u64, &mut bad);
        }
    }
    none_wrong(&bad);
}

#[test]
fn direct_kernels_add_the_residual() {
    let direct = avx512();
    let or_gemm = |path: Path| if direct { path } else { Path::Im2col };
    let cases = [
        // Channels in lanes: two groups of 64, a 7x7 plane (regions of every tap range).
        (geom(1, 64, (7, 7), 128, 3, 1, 1), or_gemm(Path::Cl)),
        // Channels in lanes at stride 2, two images, chunks of fewer than 6 pixels.
        (geom(2, 24, (15, 15), 64, 3, 2, 1), or_gemm(Path::Cl)),
        // Rows: wide output rows, m not a multiple of 12 (a partial panel); stride 2 on 3
        // channels.
        (geom(1, 5, (8, 40), 28, 3, 1, 0), or_gemm(Path::Row)),
        (geom(1, 3, (20, 64), 20, 3, 2, 1), or_gemm(Path::Row)),
        // Flat plane: "same" 14x14 and 5x5 kernels on 9x9.
        (geom(1, 9, (14, 14), 30, 3, 1, 1), or_gemm(Path::Flat)),
        (geom(1, 6, (9, 9), 13, 5, 1, 2), or_gemm(Path::Flat)),
    ];
    let mut bad = Vec::new();
    for (i, (p, want)) in cases.into_iter().enumerate() {
        for form in [Form::F32, Form::Reduced(WeightType::F16)] {
            check(p, form, want, 40 + i as u64, &mut bad);
        }
    }
    eprintln!("direct kernels selected: {direct}");
    none_wrong(&bad);
}

#[test]
fn small_plane_pointwise_kernel_adds_the_residual() {
    let small = pw_small_runs();
    let or_gemm = |path: Path| if small { path } else { Path::Pointwise };
    let cases = [
        // MobileNetV2's 7x7 stage: 160 channels (5 blocks of 32), tiles of 12 + partial.
        geom(1, 96, (7, 7), 160, 1, 1, 0),
        // A 1x1 plane (one pixel per tile, stored element by element), a partial panel.
        geom(2, 40, (1, 1), 10, 1, 1, 0),
        // Two pixels, a partial second panel.
        geom(1, 24, (1, 2), 27, 1, 1, 0),
        // 14x14 with K >= 256.
        geom(1, 256, (14, 14), 40, 1, 1, 0),
    ];
    let mut bad = Vec::new();
    for (i, p) in cases.into_iter().enumerate() {
        for form in [
            Form::F32,
            Form::Reduced(WeightType::F16),
            Form::Reduced(WeightType::I8),
        ] {
            check(p, form, or_gemm(Path::PwSmall), 50 + i as u64, &mut bad);
        }
    }
    eprintln!("small-plane pointwise kernel selected: {small}");
    none_wrong(&bad);
}
