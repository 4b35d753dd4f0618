//! The run of a [`DftKernel`]: gather each frame into the scratch buffer (windowed, zero
//! padded), transform it with the kernel's plan, scatter the bins to the output (scaled by
//! `1 / n` for an inverse). Entry point for the JIT code: [`arenac_dft`].

use rustfft::num_complex::Complex;

use super::{DftKernel, Plan};

/// The scratch buffers of one run, typed.
struct Buffers<'a> {
    /// The transform's input: `n` complex values (C2c), `n` reals (R2c), `n/2+1` complex (C2r).
    complex: &'a mut [Complex<f32>],
    real: &'a mut [f32],
    /// The plan's own scratch.
    plan: &'a mut [Complex<f32>],
}

impl DftKernel {
    /// Transforms every frame of `x` into `y`.
    fn run(&self, x: &[f32], w: Option<&[f32]>, y: &mut [f32], b: Buffers<'_>) {
        let g = &self.geo;
        let (n, inner) = (g.n, g.inner);
        let (sin, sout) = (inner * g.in_c, inner * g.out_c);
        let scale = if g.inverse { 1.0 / n as f32 } else { 1.0 };
        let win = |t: usize| w.and_then(|w| w.get(t).copied()).unwrap_or(1.0);
        let half = n / 2 + 1;
        for o in 0..g.outer {
            for f in 0..g.frames {
                let start = f * g.step;
                let avail = g.len_in.saturating_sub(start).min(n);
                for i in 0..inner {
                    let in_base = ((o * g.len_in + start) * inner + i) * g.in_c;
                    let out_base = ((o * g.frames + f) * g.out_len * inner + i) * g.out_c;
                    // Sample t of the frame as a complex value (imaginary 0 for real input).
                    let at = |t: usize| {
                        let p = in_base + t * sin;
                        let re = x[p];
                        let im = if g.in_c == 2 { x[p + 1] } else { 0.0 };
                        Complex::new(re, im)
                    };
                    match &self.plan {
                        Plan::C2c(fft) => {
                            let buf = &mut b.complex[..n];
                            for (t, v) in buf.iter_mut().enumerate() {
                                *v = if t < avail {
                                    at(t) * win(t)
                                } else {
                                    Complex::default()
                                };
                            }
                            fft.process_with_scratch(buf, b.plan);
                            for (k, v) in buf.iter().take(g.out_len).enumerate() {
                                let q = out_base + k * sout;
                                y[q] = v.re * scale;
                                y[q + 1] = v.im * scale;
                            }
                        }
                        Plan::R2c(fft) => {
                            let rin = &mut b.real[..n];
                            for (t, v) in rin.iter_mut().enumerate() {
                                *v = if t < avail {
                                    x[in_base + t * sin] * win(t)
                                } else {
                                    0.0
                                };
                            }
                            let bins = &mut b.complex[..half];
                            // Cannot fail: the buffers have the plan's lengths (checked when
                            // the kernel was made); the output is then fully written.
                            let _ = fft.process_with_scratch(rin, bins, b.plan);
                            for k in 0..g.out_len {
                                // Bins past n/2 by conjugate symmetry: X[k] = conj(X[n - k]).
                                let v = if k < half {
                                    bins[k]
                                } else {
                                    bins[n - k].conj()
                                };
                                let q = out_base + k * sout;
                                y[q] = v.re;
                                y[q + 1] = v.im;
                            }
                        }
                        Plan::C2r(fft) => {
                            let bins = &mut b.complex[..half];
                            let have = avail.min(half);
                            for (k, v) in bins.iter_mut().enumerate() {
                                *v = if k < have { at(k) } else { Complex::default() };
                            }
                            // numpy's irfft reads only the real parts of these bins.
                            bins[0].im = 0.0;
                            if n.is_multiple_of(2) {
                                bins[half - 1].im = 0.0;
                            }
                            let out = &mut b.real[..n];
                            // Cannot fail: lengths as above, and the imaginary parts realfft
                            // checks are zero.
                            let _ = fft.process_with_scratch(bins, out, b.plan);
                            for (t, v) in out.iter().enumerate() {
                                y[out_base + t * sout] = v * scale;
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Runs the DFT/STFT kernel `k` on `x` (window `w`, or null) into `y`, with `scratch`.
///
/// # Safety
/// `k` points to a live [`DftKernel`]; `x` is readable for its geometry's input floats, `y`
/// writable for its output floats; `w` is null when the geometry has no window, else readable
/// for `n` floats; `scratch` is 8-aligned and writable for [`DftKernel::scratch_bytes`]
/// bytes. `y` and `scratch` overlap nothing else passed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn arenac_dft(
    k: *const DftKernel,
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    scratch: *mut u8,
) {
    // SAFETY: by the contract, `k` is a live kernel, the tensors have the geometry's sizes and
    // the scratch the layout's (its parts are disjoint, 8-aligned, and sized for the plan),
    // and the writable regions overlap nothing else.
    unsafe {
        let k = &*k;
        let g = &k.geo;
        let (Some(nx), Some(ny)) = (g.input_floats(), g.output_floats()) else {
            return;
        };
        let x = std::slice::from_raw_parts(x, nx);
        let y = std::slice::from_raw_parts_mut(y, ny);
        let w = (g.windowed && !w.is_null()).then(|| std::slice::from_raw_parts(w, g.n));
        let l = &k.layout;
        let bufs = Buffers {
            complex: std::slice::from_raw_parts_mut(
                scratch.add(l.complex.0).cast::<Complex<f32>>(),
                l.complex.1,
            ),
            real: std::slice::from_raw_parts_mut(scratch.add(l.real.0).cast::<f32>(), l.real.1),
            plan: std::slice::from_raw_parts_mut(
                scratch.add(l.plan.0).cast::<Complex<f32>>(),
                l.plan.1,
            ),
        };
        k.run(x, w, y, bufs);
    }
}
