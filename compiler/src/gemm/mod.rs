//! The dense-math core: single-precision GEMM on pre-packed B, called from JIT code.
//!
//! Cranelift's x64 backend has 128-bit vectors only, which caps a GEMM it generates at about a
//! third of this CPU's peak (../shared/CRANELIFT.md), so GEMM is precompiled Rust here and the
//! generated program calls [`arenac_sgemm`] once per matrix product.
//!
//! Contract (stable: the code generator and the planner rely on it):
//! - B is packed once by [`pack_b`] (weights: at compile time, into the weights region) or by
//!   [`arenac_pack_b`] at run time into arena scratch, into [`packed_b_len`]`(k, n)` floats;
//! - [`arenac_sgemm`] computes `C = A * B (+ C if accumulate)` for row-major A (`m x k`, row
//!   stride `lda`) and C (`m x n`, row stride `ldc`), using at most [`A_SCRATCH_FLOATS`] floats
//!   of caller-provided scratch (from the arena plan) — it never allocates.
//!
//! Implementation (BLIS-style):
//! - packed B is a sequence of column panels [`NR`] = 16 wide: panel `jp` holds columns
//!   `jp*NR..jp*NR+NR` as `k` rows of `NR` floats (at `jp * k * NR`), zero-padded past `n`. The
//!   layout does not depend on the CPU or on the K blocking, so B packed at compile time is valid
//!   on any machine;
//! - K is cut into blocks of at most [`KC`] = 384 (balanced: 576 becomes 2 x 288), M into blocks
//!   of at most [`MC`] = 96 rows; each `MC x KC` block of A is packed at run time into the
//!   caller's scratch as `MR`-row micro-panels (`kc` groups of `MR` floats, zero-padded rows), so
//!   [`A_SCRATCH_FLOATS`] = `MC * KC` = 36,864 floats (144 KiB, fits L2 next to the B panels);
//! - loops: K block, M block (pack A), B panel or pair of panels (`kc x 16` is 24 KiB at most:
//!   stays in L1), A micro-panel, micro-kernel;
//! - micro-kernels: AVX-512F `12 x 32` over two adjacent panels (24 zmm accumulators; `12 x 16`
//!   for a last odd panel), AVX2+FMA `6 x 16` (12 ymm accumulators) or a portable `4 x 16`; the
//!   best one is chosen once at run time (cached in a `OnceLock`;
//!   `ARENAC_GEMM_KERNEL=scalar|avx2|avx512` overrides it for benchmarks); edge tiles
//!   (`m % MR`, `n % NR`) are computed into a stack tile and the valid part is added to or
//!   copied into C; each call prefetches a share of the next B panel(s);
//! - inside the crate, B may also be row-major and unpacked (`sgemm_rowmajor_b`, for the 1x1
//!   convolution): full panels are read in place at the matrix's row stride, only the last
//!   partial one is copied;
//! - depthwise convolution has its own direct kernels (`depthwise.rs`), chosen the same way, and
//!   so do MaxPool/AveragePool (`pool.rs`, [`pool::arenac_pool2d`]);
//! - single thread, on this machine (examples/gemm_bench.rs): AVX-512 ~195-225 GFLOP/s (this
//!   CPU runs 512-bit FMAs at full rate, so the 256-bit peak of ~117 is not the ceiling), AVX2
//!   ~115-124, portable ~25-32.
//! - `accumulate` applies to the first K block only, later blocks always add.

pub mod act;
pub mod conv;
pub mod conv3d;
mod depthwise;
mod direct;
mod direct_flat;
mod kernels;
pub mod lowp;
mod pack_a;
mod pack_b;
pub mod pool;
pub mod pool3d;
mod pw_small;
pub(crate) mod small;
pub(crate) mod split;
pub mod stage16;
pub mod winograd;

use kernels::KernelFn;
pub use pack_b::{arenac_pack_b, pack_b, pack_b_from, pack_b_le, packed_b_len};
use std::sync::OnceLock;

/// Width of a packed B panel (columns); part of the packed layout.
pub const NR: usize = 16;

/// Conv and ConvTranspose kernels build im2col/col2im panels of at most this many pixels;
/// the scratch planned for them is sized by it (see `crate::ops::Op::scratch_bytes`).
pub const IM2COL_TILE: usize = 256;
/// Largest K block.
pub const KC: usize = 384;
/// Largest M block (a multiple of every kernel's `MR`).
pub const MC: usize = 96;
/// Largest `MR` of any kernel (size of the stack tile for edges).
const MAX_MR: usize = 12;

/// Floats of scratch [`arenac_sgemm`] may use for packing A panels: one `MC x KC` block.
pub const A_SCRATCH_FLOATS: usize = MC * KC;

/// Floats of scratch [`arenac_sgemm`] uses for an `m x k` A: the packed block of at most
/// `MC` rows rounded up to the largest micro-kernel height (12, which every kernel's height
/// divides) times at most `KC` columns. Never more than [`A_SCRATCH_FLOATS`].
pub fn a_scratch_floats(m: usize, k: usize) -> usize {
    m.min(MC).div_ceil(12).saturating_mul(12).min(MC) * k.min(KC)
}

/// A micro-kernel and its row count.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Kernel {
    pub(crate) name: &'static str,
    pub(crate) mr: usize,
    pub(crate) run: KernelFn,
    /// An `mr x 2NR` kernel over two adjacent panels, if any.
    pub(crate) wide: Option<KernelFn>,
    /// The kernel for a last micro-panel of `h < mr` rows over `np` panels, if any
    /// ([`kernels::x86_edge`]).
    pub(crate) edge: Option<fn(usize, usize) -> Option<KernelFn>>,
}

const SCALAR: Kernel = Kernel {
    name: "scalar 4x16",
    mr: kernels::SCALAR_MR,
    run: kernels::kernel_scalar,
    wide: None,
    edge: None,
};

#[cfg(target_arch = "x86_64")]
const AVX2: Kernel = Kernel {
    name: "avx2+fma 6x16",
    mr: kernels::x86::AVX2_MR,
    run: kernels::x86::kernel_avx2,
    wide: None,
    edge: Some(kernels::x86_edge::avx2_edge),
};

#[cfg(target_arch = "x86_64")]
const AVX512: Kernel = Kernel {
    name: "avx512f 12x32",
    mr: kernels::x86::AVX512_MR,
    run: kernels::x86::kernel_avx512,
    wide: Some(kernels::x86::kernel_avx512_wide),
    edge: Some(kernels::x86_edge::avx512_edge),
};

const _: () = {
    assert!(MC.is_multiple_of(kernels::SCALAR_MR) && kernels::SCALAR_MR <= MAX_MR);
    #[cfg(target_arch = "x86_64")]
    assert!(MC.is_multiple_of(kernels::x86::AVX2_MR) && kernels::x86::AVX2_MR <= MAX_MR);
    #[cfg(target_arch = "x86_64")]
    assert!(MC.is_multiple_of(kernels::x86::AVX512_MR) && kernels::x86::AVX512_MR <= MAX_MR);
};

/// Every kernel this CPU can run, best last.
pub(crate) fn available_kernels() -> impl Iterator<Item = Kernel> {
    #[cfg(target_arch = "x86_64")]
    let simd = [
        (is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")).then_some(AVX2),
        is_x86_feature_detected!("avx512f").then_some(AVX512),
    ];
    #[cfg(not(target_arch = "x86_64"))]
    let simd: [Option<Kernel>; 0] = [];
    std::iter::once(SCALAR).chain(simd.into_iter().flatten())
}

/// The kernel used by [`arenac_sgemm`], chosen on first use.
pub(crate) fn selected_kernel() -> Kernel {
    static SELECTED: OnceLock<Kernel> = OnceLock::new();
    *SELECTED.get_or_init(|| {
        // ARENAC_GEMM_KERNEL=scalar|avx2|avx512 picks a kernel (for benchmarks and debugging);
        // unknown or unavailable names fall back to the best available.
        let wanted = std::env::var("ARENAC_GEMM_KERNEL").unwrap_or_default();
        let best = available_kernels().last().unwrap_or(SCALAR);
        available_kernels()
            .find(|k| !wanted.is_empty() && k.name.starts_with(wanted.as_str()))
            .unwrap_or(best)
    })
}

/// Name of the micro-kernel selected on this CPU (for logs and benchmarks).
pub fn kernel_name() -> &'static str {
    selected_kernel().name
}

/// Floats between the per-thread A scratch slots of [`arenac_sgemm`] for an `m x k` A:
/// [`a_scratch_floats`] rounded up to 64 bytes.
pub fn a_scratch_slot(m: usize, k: usize) -> usize {
    a_scratch_floats(m, k).next_multiple_of(16)
}

/// `C = A * B (+ C when accumulate != 0)`, spread over the current pool ([`crate::par`]) on
/// at most `slots` threads; bit-identical results at every thread count.
///
/// # Safety
/// `a` valid for reads of `m` rows of `k` floats at row stride `lda`; `packed_b` for
/// [`packed_b_len`]`(k, n)` floats packed by [`pack_b`]/[`arenac_pack_b`]; `c` valid for reads
/// and writes of `m` rows of `n` floats at row stride `ldc`; `scratch` for `max(slots, 1)`
/// slots of [`a_scratch_slot`]`(m, k)` floats; C must not overlap A, B or scratch.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn arenac_sgemm(
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    lda: usize,
    packed_b: *const f32,
    c: *mut f32,
    ldc: usize,
    accumulate: u32,
    scratch: *mut f32,
    slots: usize,
) {
    let kernel = selected_kernel();
    // SAFETY: the caller's contract: A, B, C as sgemm_split needs them for the whole
    // product, `slots` A scratch slots of a_scratch_slot(m, k) floats.
    unsafe {
        split::sgemm_split(
            kernel,
            (m, n, k),
            AView::Rows(a, lda),
            BView::packed(packed_b, k, n),
            (c, ldc),
            accumulate != 0,
            (scratch, a_scratch_slot(m, k), slots.max(1)),
            &|_, _| {},
        )
    }
}

/// How the GEMM core reads B.
#[derive(Clone, Copy)]
pub(crate) struct BView {
    /// Packed ([`pack_b`] layout) or row-major.
    base: *const f32,
    /// Row stride of a panel (`NR` packed, the matrix's row stride row-major).
    rs: usize,
    /// Distance between adjacent panels (`k * NR` packed, `NR` row-major).
    ps: usize,
    /// Panels read in place (`n.div_ceil(NR)` packed; the full ones row-major).
    full: usize,
    /// The last partial panel copied in packed form (row-major with `n % NR != 0`).
    tail: *const f32,
    /// A packed B stored in a reduced type ([`lowp`]): panels are widened before use.
    lowp: Option<lowp::LowpB>,
}

// SAFETY: as for `AView`: pointers valid by the entry points' contracts, only read.
unsafe impl Send for BView {}
// SAFETY: as above.
unsafe impl Sync for BView {}

impl BView {
    /// A packed B ([`pack_b`] layout) of `k` rows and `n` columns.
    pub(crate) fn packed(base: *const f32, k: usize, n: usize) -> BView {
        BView {
            base,
            rs: NR,
            ps: k * NR,
            full: n.div_ceil(NR),
            tail: std::ptr::null(),
            lowp: None,
        }
    }

    /// A B packed in `t` by [`lowp::pack_b_lowp`] at `base` (`k` rows, `n` columns); f32 is
    /// [`BView::packed`].
    pub(crate) fn packed_lowp(base: *const u8, t: lowp::WeightType, k: usize, n: usize) -> BView {
        let f32_view = BView::packed(base.cast(), k, n);
        if !t.is_reduced() {
            return f32_view;
        }
        let scales = if t == lowp::WeightType::I8 {
            base.wrapping_add(packed_b_len(k, n).next_multiple_of(64))
                .cast::<f32>()
        } else {
            std::ptr::null()
        };
        BView {
            lowp: Some(lowp::LowpB {
                base,
                t,
                scales,
                ps: k * NR,
            }),
            ..f32_view
        }
    }

    /// Panels `jp..jp + np` from row `pc` (`kc` rows) as the micro-kernels read them: start,
    /// row stride and panel distance; a reduced-type B is widened into `buf` first.
    ///
    /// # Safety
    /// The panels exist (the entry point's contract on B).
    pub(crate) unsafe fn panels(
        &self,
        (jp, np): (usize, usize),
        (pc, kc): (usize, usize),
        buf: Option<&mut lowp::PanelBuf>,
    ) -> (*const f32, usize, usize) {
        match (&self.lowp, buf) {
            (Some(l), Some(buf)) => {
                // SAFETY: the caller's contract.
                let (p, ps) = unsafe { l.widen(jp, np, pc, kc, buf) };
                (p, NR, ps)
            }
            _ => {
                let (p, rs) = self.panel(jp, pc);
                (p, rs, self.ps)
            }
        }
    }

    /// The view from column `j0` on (a multiple of [`NR`]).
    pub(crate) fn at_col(self, j0: usize) -> BView {
        let jp = j0 / NR;
        BView {
            base: self.base.wrapping_add(jp * self.ps),
            full: self.full.saturating_sub(jp),
            lowp: self.lowp.map(|l| l.at_panel(jp)),
            ..self
        }
    }

    /// The view from row `pc` on: the same panels, each `pc` rows further (a product over
    /// K block `pc..` of B as its own product of `k - pc` rows).
    pub(crate) fn at_row(self, pc: usize) -> BView {
        BView {
            base: self.base.wrapping_add(pc * self.rs),
            tail: if self.tail.is_null() {
                self.tail
            } else {
                self.tail.wrapping_add(pc * NR)
            },
            lowp: self.lowp.map(|l| lowp::LowpB {
                base: l.base.wrapping_add(pc * NR * l.t.bytes()),
                ..l
            }),
            ..self
        }
    }

    /// Start of row `pc` of panel `jp`, and its row stride.
    fn panel(&self, jp: usize, pc: usize) -> (*const f32, usize) {
        if jp < self.full {
            (self.base.wrapping_add(jp * self.ps + pc * self.rs), self.rs)
        } else {
            (self.tail.wrapping_add(pc * NR), NR)
        }
    }
}

/// [`arenac_sgemm`] with a given kernel.
///
/// # Safety
/// That of [`arenac_sgemm`], and `kernel` comes from [`available_kernels`].
#[cfg(test)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn sgemm_with(
    kernel: Kernel,
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    lda: usize,
    packed_b: *const f32,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
    scratch: *mut f32,
) {
    let b = BView::packed(packed_b, k, n);
    // SAFETY: the caller's contract; every panel is read in place from the packed B.
    unsafe {
        sgemm_core(
            kernel,
            m,
            n,
            k,
            AView::Rows(a, lda),
            b,
            c,
            ldc,
            accumulate,
            scratch,
        )
    }
}

/// `C = A * B` with B row-major (`b[i * ldb + j]`, not packed) and A row-major or packed: the full 16-column panels are
/// read in place, a last partial one is first copied into `tail`.
///
/// # Safety
/// That of [`arenac_sgemm`] with A as `a` describes, B readable for `k` rows of `n` floats at stride `ldb`
/// (`ldb >= n`), `tail` writable for `k * NR` floats and overlapping nothing else, and
/// `kernel` from [`available_kernels`].
#[cfg(test)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn sgemm_rowmajor_b(
    kernel: Kernel,
    m: usize,
    n: usize,
    k: usize,
    a: AView,
    b: *const f32,
    ldb: usize,
    c: *mut f32,
    ldc: usize,
    tail: *mut f32,
    scratch: *mut f32,
) {
    // SAFETY: the caller's contract.
    let view = unsafe { rowmajor_b(k, n, b, ldb, tail) };
    // SAFETY: the caller's contract; full panels are NR columns of rows at stride ldb.
    unsafe { sgemm_core(kernel, m, n, k, a, view, c, ldc, false, scratch) }
}

/// The view of a row-major B (`k x n` at row stride `ldb`): full 16-column panels read in
/// place, a last partial one copied into `tail` in packed form.
///
/// # Safety
/// B readable for `k` rows of `n` floats at stride `ldb >= n`; `tail` writable for `k * NR`
/// floats (when `n % NR != 0`) and overlapping nothing else in use.
pub(crate) unsafe fn rowmajor_b(
    k: usize,
    n: usize,
    b: *const f32,
    ldb: usize,
    tail: *mut f32,
) -> BView {
    let full = n / NR;
    if !n.is_multiple_of(NR) {
        // SAFETY: columns full*NR..n of the k rows of B, readable by the contract; `tail`
        // holds packed_b_len(k, n % NR) = k * NR floats and overlaps nothing.
        unsafe { arenac_pack_b(k, n - full * NR, b.add(full * NR), ldb, 1, tail) };
    }
    BView {
        base: b,
        rs: ldb,
        ps: NR,
        full,
        tail,
        lowp: None,
    }
}

/// Floats of A once packed by [`pack_a_all`]: `m` rounded up to the selected kernel's `MR`,
/// times `k`.
pub fn packed_a_len(m: usize, k: usize) -> usize {
    m.div_ceil(selected_kernel().mr)
        .saturating_mul(selected_kernel().mr)
        .saturating_mul(k)
}

/// Packs all of A (`m x k`, row-major at stride `lda`) for the selected kernel, as the core
/// would pack it block by block: K block `pc` (the core's balanced blocking) at
/// `pc * m_pad`, inside it `MR`-row micro-panels of `kc` steps (`m_pad = m` rounded up to
/// `MR`). Used for constant A (conv weights) at compile time, in the same process that runs
/// the code (the kernel choice is fixed for the process).
///
/// # Panics
/// If `a` is shorter than `(m - 1) * lda + k` or `out` than [`packed_a_len`] (caller bugs).
pub fn pack_a_all(m: usize, k: usize, a: &[f32], lda: usize, out: &mut [f32]) {
    let mr = selected_kernel().mr;
    let m_pad = m.div_ceil(mr) * mr;
    let out = &mut out[..m_pad * k];
    if m == 0 || k == 0 {
        return;
    }
    assert!(a.len() >= (m - 1) * lda + k, "pack_a_all: A too short");
    let kc_max = k.div_ceil(k.div_ceil(KC));
    let mut pc = 0;
    while pc < k {
        let kc = kc_max.min(k - pc);
        // SAFETY: rows 0..m, columns pc..pc+kc of A lie in `a` (checked above); the block
        // takes m_pad * kc floats of `out` from pc * m_pad, in bounds; the two are disjoint.
        unsafe {
            pack_a(
                mr,
                m,
                kc,
                a.as_ptr().add(pc),
                lda,
                out.as_mut_ptr().add(pc * m_pad),
            )
        };
        pc += kc;
    }
}

/// How the core reads A: row-major (packed block by block into the scratch) or packed once
/// by [`pack_a_all`] for the same kernel.
#[derive(Clone, Copy)]
pub(crate) enum AView {
    /// Row-major at a row stride.
    Rows(*const f32, usize),
    /// Packed by [`pack_a_all`] for a matrix of `m_pad` rows (`m` rounded up to `MR`), of
    /// which this view starts at row `row0` (a multiple of `MR`).
    Packed {
        /// Start of the packed matrix.
        base: *const f32,
        /// Its rows rounded up to the kernel's `MR`.
        m_pad: usize,
        /// First row of the view.
        row0: usize,
    },
    /// Packed in a reduced type by [`lowp::pack_a_lowp`] (widened block by block).
    Lowp(lowp::LowpA),
}

impl AView {
    /// A whole matrix of `m` rows packed by [`pack_a_all`] at `base`.
    pub(crate) fn packed(base: *const f32, m: usize) -> AView {
        let mr = selected_kernel().mr;
        AView::Packed {
            base,
            m_pad: m.div_ceil(mr) * mr,
            row0: 0,
        }
    }

    /// The view from row `r0` on (`r0` a multiple of the kernel's `MR` for a packed view).
    pub(crate) fn at_row(self, r0: usize) -> AView {
        match self {
            AView::Rows(a, lda) => AView::Rows(a.wrapping_add(r0 * lda), lda),
            AView::Packed { base, m_pad, row0 } => AView::Packed {
                base,
                m_pad,
                row0: row0 + r0,
            },
            AView::Lowp(l) => AView::Lowp(lowp::LowpA {
                row0: l.row0 + r0,
                ..l
            }),
        }
    }
}

// SAFETY: a view is a pointer into memory whose validity the unsafe GEMM entry points'
// contracts establish; sharing it between the threads of one product only reads through it.
unsafe impl Send for AView {}
// SAFETY: as above.
unsafe impl Sync for AView {}

/// `C = A * B` for a packed B ([`pack_b`] layout) and A as `a` describes.
///
/// # Safety
/// That of [`arenac_sgemm`] with A as `a` describes (packed for `kernel`), and `kernel` from
/// [`available_kernels`].
#[cfg(test)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn sgemm_packed_b(
    kernel: Kernel,
    m: usize,
    n: usize,
    k: usize,
    a: AView,
    packed_b: *const f32,
    c: *mut f32,
    ldc: usize,
    scratch: *mut f32,
) {
    let b = BView::packed(packed_b, k, n);
    // SAFETY: the caller's contract.
    unsafe { sgemm_core(kernel, m, n, k, a, b, c, ldc, false, scratch) }
}

/// The blocked product over any [`AView`] and [`BView`].
///
/// # Safety
/// That of [`arenac_sgemm`] with A and B as `av` and `b` describe (a packed A for `kernel`,
/// then the scratch is not used).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn sgemm_core(
    kernel: Kernel,
    m: usize,
    n: usize,
    k: usize,
    av: AView,
    b: BView,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
    scratch: *mut f32,
) {
    if b.lowp.is_some() || matches!(av, AView::Lowp(_)) {
        // SAFETY: the caller's contract.
        unsafe { sgemm_core_lowp(kernel, (m, n, k), av, b, (c, ldc), accumulate, scratch) };
        return;
    }
    // SAFETY: the caller's contract; neither operand needs widening.
    unsafe {
        core_with(
            kernel,
            (m, n, k),
            av,
            b,
            (c, ldc),
            accumulate,
            scratch,
            None,
            None,
        )
    }
}

/// [`sgemm_core`] with reduced-type operands: the widened panels and A block live in stack
/// buffers of this frame (48 + 144 KiB; kept out of the f32 path's frame).
///
/// # Safety
/// That of [`sgemm_core`].
#[inline(never)]
unsafe fn sgemm_core_lowp(
    kernel: Kernel,
    mnk: (usize, usize, usize),
    av: AView,
    b: BView,
    c: (*mut f32, usize),
    accumulate: bool,
    scratch: *mut f32,
) {
    let mut pbuf = lowp::PanelBuf(std::mem::MaybeUninit::uninit());
    let mut abuf = lowp::BlockBuf(std::mem::MaybeUninit::uninit());
    let abuf = matches!(av, AView::Lowp(_)).then_some(&mut abuf);
    let pbuf = b.lowp.is_some().then_some(&mut pbuf);
    // SAFETY: the caller's contract; the buffers are this frame's.
    unsafe { core_with(kernel, mnk, av, b, c, accumulate, scratch, pbuf, abuf) }
}

/// The blocked product, with the buffers reduced-type operands are widened into.
///
/// # Safety
/// That of [`sgemm_core`]; `pbuf` given when B is reduced, `abuf` when A is.
#[allow(clippy::too_many_arguments)]
unsafe fn core_with(
    kernel: Kernel,
    (m, n, k): (usize, usize, usize),
    av: AView,
    b: BView,
    (c, ldc): (*mut f32, usize),
    accumulate: bool,
    scratch: *mut f32,
    mut pbuf: Option<&mut lowp::PanelBuf>,
    mut abuf: Option<&mut lowp::BlockBuf>,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            for i in 0..m {
                // SAFETY: row i < m of C, n floats, writable by the contract.
                unsafe { std::slice::from_raw_parts_mut(c.add(i * ldc), n) }.fill(0.0);
            }
        }
        return;
    }
    if let (AView::Rows(a, lda), Some(lb)) = (av, &b.lowp)
        && lowp::gemv::takes(&kernel, m)
    {
        // SAFETY: the caller's contract, A row-major, B reduced: a few rows, widened in
        // registers (the kernel's instruction set, which this CPU runs).
        unsafe { lowp::gemv::run(&kernel, m, n, k, a, lda, lb, c, ldc, accumulate) };
        return;
    }
    if let AView::Rows(a, lda) = av
        && small::takes(&kernel, m)
    {
        // SAFETY: the caller's contract, A row-major; fewer rows than the micro-kernel.
        unsafe { small::sgemm_small(&kernel, m, n, k, a, lda, b, c, ldc, accumulate, pbuf) };
        return;
    }
    let mr = kernel.mr;
    let panels = n.div_ceil(NR);
    // Balanced K blocks: as few as KC allows, of nearly equal size.
    let kblocks = k.div_ceil(KC);
    let kc_max = k.div_ceil(kblocks);
    let mut pc = 0;
    while pc < k {
        let kc = kc_max.min(k - pc);
        let acc = accumulate || pc > 0;
        let mut ic = 0;
        while ic < m {
            let mc = MC.min(m - ic);
            let apanels = match av {
                AView::Rows(a, lda) => {
                    // SAFETY: rows ic..ic+mc, columns pc..pc+kc of A are readable by the
                    // contract; the packed block takes mc.div_ceil(mr) * mr * kc <= MC * KC
                    // floats of scratch (MC is a multiple of mr), which does not overlap A.
                    unsafe { pack_a(mr, mc, kc, a.add(ic * lda + pc), lda, scratch) };
                    scratch.cast_const()
                }
                // Block (pc, row0 + ic) of pack_a_all's layout (MC and row0 are multiples
                // of mr).
                AView::Packed { base, m_pad, row0 } => {
                    base.wrapping_add(pc * m_pad + (row0 + ic) * kc)
                }
                AView::Lowp(l) => match abuf.as_deref_mut() {
                    // SAFETY: block (pc, row0 + ic) of the packed A: inside it by the contract.
                    Some(buf) => unsafe { l.widen(mr, (pc, kc), (ic, mc), buf) },
                    None => return,
                },
            };
            let nip = mc.div_ceil(mr);
            let mut jp = 0;
            while jp < panels {
                // Two panels at once when the kernel has a wide form and two in-place panels
                // (same row stride) remain.
                let (run, np) = match kernel.wide {
                    Some(wide) if jp + 1 < panels && jp + 1 < b.full => (wide, 2),
                    _ => (kernel.run, 1),
                };
                let width = np * NR;
                let j0 = jp * NR;
                let w = width.min(n - j0);
                // Panel jp (and jp + 1 when np = 2) from row pc: kc rows at stride brs.
                // SAFETY: panels jp..jp+np exist (the contract on B).
                let (bp, brs, bstride) =
                    unsafe { b.panels((jp, np), (pc, kc), pbuf.as_deref_mut()) };
                // Prefetch the next B panel(s) (same K rows) while these are in use, a share
                // of their kc lines per micro-kernel call (a hint: past the end it is harmless).
                let pf_lines = kc.div_ceil(nip);
                let pf_base = b.panel(jp + np, pc).0;
                for ip in 0..nip {
                    let pf = pf_base.wrapping_add(ip * pf_lines * brs);
                    let i0 = ic + ip * mr;
                    let h = mr.min(m - i0);
                    // Micro-panel ip of the block (kc * mr floats), packed above or beforehand.
                    let ap = apanels.wrapping_add(ip * kc * mr);
                    // A last micro-panel of h < mr rows: only h rows computed.
                    let (run, rows) = match kernel.edge.filter(|_| h < mr) {
                        Some(edge) => edge(h, np).map_or((run, mr), |f| (f, h)),
                        None => (run, mr),
                    };
                    if h == rows && w == width {
                        // SAFETY: full tile: rows i0..i0+rows <= m (the kernel writes `rows`),
                        // columns j0..j0+width <= n of C, readable and writable by the
                        // contract; the panels hold kc rows at stride brs; the kernel runs on
                        // this CPU (caller's contract).
                        unsafe {
                            run(
                                kc,
                                ap,
                                bp,
                                bstride,
                                brs,
                                c.add(i0 * ldc + j0),
                                ldc,
                                acc,
                                pf,
                                pf_lines,
                            )
                        };
                    } else {
                        let mut tile = [0.0f32; MAX_MR * 2 * NR];
                        // SAFETY: `tile` holds mr <= MAX_MR rows of width <= 2 NR floats at
                        // stride width; the panels hold kc rows; the kernel runs on this CPU.
                        unsafe {
                            run(
                                kc,
                                ap,
                                bp,
                                bstride,
                                brs,
                                tile.as_mut_ptr(),
                                width,
                                false,
                                pf,
                                pf_lines,
                            )
                        };
                        for (r, trow) in tile.chunks_exact(width).take(h).enumerate() {
                            // SAFETY: row i0 + r < m, columns j0..j0+w <= n of C: valid by the
                            // contract, and C overlaps nothing else in use.
                            let dst = unsafe {
                                std::slice::from_raw_parts_mut(c.add((i0 + r) * ldc + j0), w)
                            };
                            if acc {
                                for (d, &x) in dst.iter_mut().zip(trow) {
                                    *d += x;
                                }
                            } else {
                                dst.copy_from_slice(&trow[..w]);
                            }
                        }
                    }
                }
                jp += np;
            }
            ic += mc;
        }
        pc += kc;
    }
}

use pack_a::pack_a;

#[cfg(test)]
mod tests;
