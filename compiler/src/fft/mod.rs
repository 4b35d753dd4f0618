//! The spectral core: DFT and STFT (f32) as one precompiled Rust kernel, [`arenac_dft`], that
//! the JIT program calls with a [`DftKernel`] made at compile time.
//!
//! A kernel owns its FFT plan (rustfft for complex transforms, realfft for real-input forward
//! and one-sided inverse ones; any length, primes included: rustfft picks mixed radix, Rader
//! or Bluestein). Plans come from one process-wide planner ([`planners`]), so the scratch size
//! the memory planner asks for ([`scratch_bytes`]) and the kernel the code generator builds
//! use the same plan. A run allocates nothing: the signal buffer and the plan's own scratch
//! live in the node's scratch buffer in the arena ([`DftKernel::scratch_bytes`]).
//!
//! The geometry ([`DftGeometry`]) covers both ops: a DFT is one frame per signal, an STFT
//! `frames` windowed frames `step` samples apart along the signal axis.
//!
//! [`mel`]: MelWeightMatrix's filters and their run-time kernel, [`arenac_mel`].

mod kernel;
pub mod mel;

use std::sync::{Arc, Mutex, OnceLock};

use realfft::{ComplexToReal, RealFftPlanner, RealToComplex};
use rustfft::{Fft, FftPlanner};

pub use kernel::arenac_dft;
pub use mel::arenac_mel;

/// What one DFT or STFT node computes, in elements. The input is `[outer, len_in, inner,
/// in_c]` (row-major; `in_c` 1 for real, 2 for complex values), the output `[outer, frames,
/// out_len, inner, out_c]`. Frame `f` of signal `(o, i)` starts at position `f * step`; its
/// first `min(len_in - f * step, n)` samples (times the window, when there is one) are the
/// transform's input, zero-padded to `n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DftGeometry {
    /// Product of the dims before the signal axis.
    pub outer: usize,
    /// Frames per signal (1 for a DFT).
    pub frames: usize,
    /// Samples between the starts of two frames (0 for a DFT).
    pub step: usize,
    /// Signal length along the axis in the input.
    pub len_in: usize,
    /// Product of the dims after the signal axis, the last (complex) one excluded.
    pub inner: usize,
    /// 1 (real input) or 2 (complex input).
    pub in_c: usize,
    /// Transform length.
    pub n: usize,
    /// Output length along the axis: `n`, or `n / 2 + 1` for a one-sided forward transform.
    pub out_len: usize,
    /// 2 (complex output), or 1 for a one-sided inverse (real output).
    pub out_c: usize,
    /// Inverse transform (scaled by `1 / n`).
    pub inverse: bool,
    /// Each frame is multiplied by a window of `n` real values.
    pub windowed: bool,
}

/// How a geometry is transformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transform {
    /// Complex to complex (complex input, or any inverse with complex output).
    C2c,
    /// Real input, forward: the `n / 2 + 1` bins of realfft, the rest (when asked for) by
    /// conjugate symmetry.
    R2c,
    /// One-sided inverse: `n / 2 + 1` bins to `n` real samples (the imaginary parts of the
    /// zero and Nyquist bins ignored, as numpy's `irfft` does).
    C2r,
}

impl DftGeometry {
    /// The transform this geometry uses.
    pub fn transform(&self) -> Transform {
        match (self.inverse, self.in_c, self.out_c) {
            (true, _, 1) => Transform::C2r,
            (false, 1, _) => Transform::R2c,
            _ => Transform::C2c,
        }
    }

    /// Floats of the input tensor.
    pub fn input_floats(&self) -> Option<usize> {
        [self.outer, self.len_in, self.inner, self.in_c]
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
    }

    /// Floats of the output tensor.
    pub fn output_floats(&self) -> Option<usize> {
        [
            self.outer,
            self.frames,
            self.out_len,
            self.inner,
            self.out_c,
        ]
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
    }

    /// Checks the invariants the kernel relies on; the message says which one failed.
    pub fn check(&self) -> Result<(), String> {
        let ok_len = match self.transform() {
            Transform::C2r => self.out_len == self.n,
            _ => self.out_len == self.n || self.out_len == self.n / 2 + 1,
        };
        let problem = if self.n == 0 {
            "a transform of length 0"
        } else if !matches!(self.in_c, 1 | 2) || !matches!(self.out_c, 1 | 2) {
            "the last dim must be 1 (real) or 2 (complex)"
        } else if !ok_len {
            "the output length does not match the transform length"
        } else if self.out_c == 1 && !self.inverse {
            "a forward transform with real output"
        } else if self.windowed && self.inverse {
            "a window on an inverse transform"
        } else if self.frames > 1 && self.step == 0 {
            "several frames at the same position"
        } else if self.input_floats().is_none() || self.output_floats().is_none() {
            "sizes overflow"
        } else {
            return Ok(());
        };
        Err(format!("invalid DFT geometry ({problem}): {self:?}"))
    }
}

/// The plan of one kernel.
#[derive(Clone)]
pub(crate) enum Plan {
    C2c(Arc<dyn Fft<f32>>),
    R2c(Arc<dyn RealToComplex<f32>>),
    C2r(Arc<dyn ComplexToReal<f32>>),
}

impl Plan {
    /// Complex values of the plan's own scratch.
    fn scratch_len(&self) -> usize {
        match self {
            Plan::C2c(p) => p.get_inplace_scratch_len(),
            Plan::R2c(p) => p.get_scratch_len(),
            Plan::C2r(p) => p.get_scratch_len(),
        }
    }
}

/// The process-wide planners (plans are cached by length and shared, immutable, between
/// kernels): the memory planner and the code generator see the same plans.
pub(crate) struct Planners {
    complex: FftPlanner<f32>,
    real: RealFftPlanner<f32>,
}

/// The planners, behind a lock (planning is compile-time only).
fn planners() -> &'static Mutex<Planners> {
    static P: OnceLock<Mutex<Planners>> = OnceLock::new();
    P.get_or_init(|| {
        Mutex::new(Planners {
            complex: FftPlanner::new(),
            real: RealFftPlanner::new(),
        })
    })
}

fn plan(g: &DftGeometry) -> Plan {
    // A poisoned lock only means another thread panicked while planning: the caches are
    // still valid maps of finished plans.
    let mut p = planners().lock().unwrap_or_else(|e| e.into_inner());
    match g.transform() {
        Transform::C2c if g.inverse => Plan::C2c(p.complex.plan_fft_inverse(g.n)),
        Transform::C2c => Plan::C2c(p.complex.plan_fft_forward(g.n)),
        Transform::R2c => Plan::R2c(p.real.plan_fft_forward(g.n)),
        Transform::C2r => Plan::C2r(p.real.plan_fft_inverse(g.n)),
    }
}

/// The parts of a kernel's scratch (byte offsets, lengths in elements): the complex buffer
/// (the transform's input for C2c and C2r, its output for R2c), the real one (R2c's input,
/// C2r's output; empty for C2c), the plan's own scratch; and the total bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ScratchLayout {
    pub(crate) complex: (usize, usize),
    pub(crate) real: (usize, usize),
    pub(crate) plan: (usize, usize),
    pub(crate) total: usize,
}

const COMPLEX: usize = 8;

fn layout(g: &DftGeometry, plan_scratch: usize) -> ScratchLayout {
    let real_bytes = (g.n * 4).next_multiple_of(COMPLEX);
    let half = g.n / 2 + 1;
    let (complex, real) = match g.transform() {
        Transform::C2c => ((0, g.n), (0, 0)),
        Transform::R2c => ((real_bytes, half), (0, g.n)),
        Transform::C2r => ((0, half), (half * COMPLEX, g.n)),
    };
    let plan_at = match g.transform() {
        Transform::C2c => g.n * COMPLEX,
        _ => half * COMPLEX + real_bytes,
    };
    ScratchLayout {
        complex,
        real,
        plan: (plan_at, plan_scratch),
        total: plan_at + plan_scratch * COMPLEX,
    }
}

/// Bytes of arena scratch a node with geometry `g` needs (0 for an invalid geometry, which
/// the code generator refuses anyway).
pub fn scratch_bytes(g: &DftGeometry) -> usize {
    if g.check().is_err() {
        return 0;
    }
    layout(g, plan(g).scratch_len()).total
}

/// A DFT/STFT kernel made at compile time: its geometry, its plan and its scratch layout.
/// Owned by the executable (the JIT code holds its address); immutable after construction, so
/// runs on several threads may share it.
pub struct DftKernel {
    pub(crate) geo: DftGeometry,
    pub(crate) plan: Plan,
    pub(crate) layout: ScratchLayout,
}

impl std::fmt::Debug for DftKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DftKernel")
            .field("geo", &self.geo)
            .field("layout", &self.layout)
            .finish()
    }
}

impl DftKernel {
    /// Plans the transform of `g` (an error names the broken invariant).
    pub fn new(g: DftGeometry) -> Result<DftKernel, String> {
        g.check()?;
        let plan = plan(&g);
        let layout = layout(&g, plan.scratch_len());
        Ok(DftKernel {
            geo: g,
            plan,
            layout,
        })
    }

    /// Bytes of scratch a run needs (what [`scratch_bytes`] gives for the same geometry).
    pub fn scratch_bytes(&self) -> usize {
        self.layout.total
    }

    /// The geometry.
    pub fn geometry(&self) -> &DftGeometry {
        &self.geo
    }
}

#[cfg(test)]
mod tests;
