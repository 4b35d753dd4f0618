//! Weights stored in fewer bits: f16, bf16 or int8 (symmetric, per output channel, f32
//! scales), packed in the GEMM core's panel layouts and widened to f32 inside the product.
//!
//! Contract (the code generator and the conv kernel rely on it):
//! - a packed B of `k x n` in [`WeightType`] `t` ([`pack_b_lowp`], [`lowp_b_bytes`] bytes) is
//!   [`super::pack_b`]'s layout with `t`'s elements (panel `jp` at element `jp * k * NR`), then,
//!   for int8 only, at the next 64-byte boundary, one f32 scale per column (`n` rounded up to
//!   [`NR`], zero past `n`): column j's weights are `q * scale[j]`;
//! - a packed A of `m x k` ([`pack_a_lowp`], [`lowp_a_bytes`]; the conv weights, one piece per
//!   group) is [`super::pack_a_all`]'s layout (the selected kernel's `MR`) with `t`'s elements,
//!   then, for int8, one f32 scale per row (`m` rounded up to `MR`) at the next 64-byte boundary;
//! - widening happens in the GEMM core, never into a whole-matrix f32 copy: for B, the one or
//!   two panels a micro-kernel call reads (`kc x 32` floats at most: 48 KiB, L1/L2-resident)
//!   are widened into a stack buffer once per (K block, M block, panel); for A, each `MC x KC`
//!   block is widened into a stack buffer (144 KiB at most) once per (K block, M block), as a
//!   row-major A is packed. The micro-kernels themselves are the f32 ones.
//! - conversions: f16 by `vcvtph2ps` (AVX-512F, or F16C with AVX2), bf16 as `(u16 as u32) <<
//!   16`, int8 by sign extension and `cvtdq2ps`, times the column's (B) or row's (A) scale;
//!   a portable path elsewhere. Rounding at compile time: f16/bf16 to nearest even (f16
//!   saturates at ±65504 instead of overflowing), int8 `round(x / scale)` with `scale = max |x|
//!   / 127` per output channel.

use std::mem::MaybeUninit;

pub mod conv;
pub(crate) mod gemv;

use super::{KC, MC, NR, packed_b_len, selected_kernel};

/// How the weights of Conv, ConvTranspose-free GEMM paths (Conv, Gemm, MatMul with a constant
/// B) are stored in the weights region.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WeightType {
    /// As given (f32): no conversion.
    #[default]
    F32,
    /// IEEE half precision.
    F16,
    /// bfloat16 (the top half of an f32).
    Bf16,
    /// Symmetric int8, one f32 scale per output channel.
    I8,
}

impl WeightType {
    /// Every type, widest first.
    pub const ALL: [WeightType; 4] = [
        WeightType::F32,
        WeightType::F16,
        WeightType::Bf16,
        WeightType::I8,
    ];

    /// The name on the command line and in reports: `f32`, `f16`, `bf16`, `int8`.
    pub fn name(self) -> &'static str {
        match self {
            WeightType::F32 => "f32",
            WeightType::F16 => "f16",
            WeightType::Bf16 => "bf16",
            WeightType::I8 => "int8",
        }
    }

    /// Parses [`WeightType::name`] (also `i8`).
    pub fn parse(s: &str) -> Option<WeightType> {
        match s {
            "f32" => Some(WeightType::F32),
            "f16" => Some(WeightType::F16),
            "bf16" => Some(WeightType::Bf16),
            "int8" | "i8" => Some(WeightType::I8),
            _ => None,
        }
    }

    /// Bytes per stored element.
    pub fn bytes(self) -> usize {
        match self {
            WeightType::F32 => 4,
            WeightType::F16 | WeightType::Bf16 => 2,
            WeightType::I8 => 1,
        }
    }

    /// Whether this is a reduced type (anything but f32).
    pub fn is_reduced(self) -> bool {
        self != WeightType::F32
    }

    /// The code passed to the kernels (0 = f32).
    pub(crate) fn code(self) -> u64 {
        match self {
            WeightType::F32 => 0,
            WeightType::F16 => 1,
            WeightType::Bf16 => 2,
            WeightType::I8 => 3,
        }
    }

    /// Inverse of [`WeightType::code`].
    pub(crate) fn from_code(c: u64) -> Option<WeightType> {
        WeightType::ALL.get(usize::try_from(c).ok()?).copied()
    }
}

/// The int8 scale of values whose largest magnitude is `max_abs` (0 for an all-zero channel).
fn i8_scale(max_abs: f32) -> f32 {
    if max_abs.is_finite() && max_abs > 0.0 {
        max_abs / 127.0
    } else {
        0.0
    }
}

/// Stores `x` as element `i` of `out` in type `t` (`scale`: int8's channel scale).
#[inline]
fn store(t: WeightType, out: &mut [u8], i: usize, x: f32, scale: f32) {
    match t {
        WeightType::F32 => out[i * 4..i * 4 + 4].copy_from_slice(&x.to_le_bytes()),
        WeightType::F16 => {
            let h = half::f16::from_f32(if x.is_nan() {
                x
            } else {
                x.clamp(-65504.0, 65504.0)
            });
            out[i * 2..i * 2 + 2].copy_from_slice(&h.to_bits().to_le_bytes());
        }
        WeightType::Bf16 => {
            out[i * 2..i * 2 + 2].copy_from_slice(&half::bf16::from_f32(x).to_bits().to_le_bytes())
        }
        WeightType::I8 => {
            let q = if scale > 0.0 {
                (x / scale).round().clamp(-127.0, 127.0) as i8
            } else {
                0
            };
            out[i] = q as u8;
        }
    }
}

/// Bytes of `k x n` packed in `t` ([`pack_b_lowp`]'s layout, scales included).
pub fn lowp_b_bytes(t: WeightType, k: usize, n: usize) -> usize {
    let elems = packed_b_len(k, n).saturating_mul(t.bytes());
    if t == WeightType::I8 {
        elems
            .next_multiple_of(64)
            .saturating_add(n.div_ceil(NR) * NR * 4)
    } else {
        elems
    }
}

/// Packs B (`b(i)` is element `i = row * rs + col * cs` of the `k x n` matrix) in type `t` into
/// `out` ([`lowp_b_bytes`] bytes, zeroed). Reads the source in its storage order (panel by panel
/// when columns are contiguous, row by row otherwise) and calls `done(e)` whenever every source
/// element below `e` has been read for now, so the caller can drop those pages (the
/// compile-time peak holds one panel of the source, not the whole matrix). Only int8 with
/// contiguous rows reads the source twice (the columns' scales first): its second pass starts
/// again from 0, reading dropped pages back from the file.
#[allow(clippy::too_many_arguments)]
pub fn pack_b_lowp(
    t: WeightType,
    k: usize,
    n: usize,
    b: impl Fn(usize) -> f32,
    rs: usize,
    cs: usize,
    out: &mut [u8],
    done: &mut dyn FnMut(usize),
) {
    if k == 0 || n == 0 {
        return;
    }
    let panels = n.div_ceil(NR);
    let scale_at = packed_b_len(k, n)
        .saturating_mul(t.bytes())
        .next_multiple_of(64);
    let mut scales = vec![0.0f32; if t == WeightType::I8 { panels * NR } else { 0 }];
    let elem = |i: usize, j: usize| b(i * rs + j * cs);
    if cs >= rs {
        // Each column (or run of columns) is contiguous in the source: panel by panel.
        for jp in 0..panels {
            let j0 = jp * NR;
            let w = NR.min(n - j0);
            if t == WeightType::I8 {
                for (jj, s) in scales[j0..j0 + w].iter_mut().enumerate() {
                    *s = i8_scale((0..k).fold(0.0f32, |m, i| m.max(elem(i, j0 + jj).abs())));
                }
            }
            for i in 0..k {
                for jj in 0..w {
                    let s = scales.get(j0 + jj).copied().unwrap_or(0.0);
                    store(t, out, (jp * k + i) * NR + jj, elem(i, j0 + jj), s);
                }
            }
            done(((j0 + w - 1) * cs + (k - 1) * rs + 1).min((n - 1) * cs + (k - 1) * rs + 1));
        }
    } else {
        // Rows contiguous: row by row across every panel (int8 first finds each column's
        // largest magnitude in one pass of its own, releasing as it goes).
        const ROWS: usize = 64;
        let end_of = |i: usize| (i * rs + (n - 1) * cs + 1).min((k - 1) * rs + (n - 1) * cs + 1);
        if t == WeightType::I8 {
            let mut max = vec![0.0f32; n];
            for i in 0..k {
                for (j, m) in max.iter_mut().enumerate() {
                    *m = m.max(elem(i, j).abs());
                }
                if (i + 1) % ROWS == 0 {
                    done(end_of(i));
                }
            }
            for (s, m) in scales.iter_mut().zip(max) {
                *s = i8_scale(m);
            }
        }
        for i in 0..k {
            for j in 0..n {
                let s = scales.get(j).copied().unwrap_or(0.0);
                store(t, out, ((j / NR) * k + i) * NR + j % NR, elem(i, j), s);
            }
            if (i + 1) % ROWS == 0 || i + 1 == k {
                done(end_of(i));
            }
        }
    }
    if t == WeightType::I8 {
        for (d, s) in out[scale_at..scale_at + scales.len() * 4]
            .chunks_exact_mut(4)
            .zip(&scales)
        {
            d.copy_from_slice(&s.to_le_bytes());
        }
    }
}

/// Bytes of an `m x k` A packed in `t` for the selected kernel ([`pack_a_lowp`]).
pub fn lowp_a_bytes(t: WeightType, m: usize, k: usize) -> usize {
    let mr = selected_kernel().mr;
    let m_pad = m.div_ceil(mr).saturating_mul(mr);
    let elems = m_pad.saturating_mul(k).saturating_mul(t.bytes());
    if t == WeightType::I8 {
        elems.next_multiple_of(64).saturating_add(m_pad * 4)
    } else {
        elems
    }
}

/// Packs all of A (`m x k`, row-major: `a(i)` is element `i = row * k + col`) in `t` as
/// [`super::pack_a_all`] lays it out for the selected kernel, into `out` ([`lowp_a_bytes`]
/// bytes). Reads the source row by row (each row's int8 scale first) and calls `done(e)` once
/// every source element below `e` has been read, so its pages can go as packing proceeds.
///
/// # Panics
/// If `out` is too short (a caller bug: sizes come from checked types).
pub fn pack_a_lowp(
    t: WeightType,
    m: usize,
    k: usize,
    a: impl Fn(usize) -> f32,
    out: &mut [u8],
    done: &mut dyn FnMut(usize),
) {
    let mr = selected_kernel().mr;
    let m_pad = m.div_ceil(mr) * mr;
    if m == 0 || k == 0 {
        return;
    }
    let kc_max = k.div_ceil(k.div_ceil(KC));
    let scale_at = (m_pad * k * t.bytes()).next_multiple_of(64);
    for r in 0..m {
        let scale = if t == WeightType::I8 {
            i8_scale((0..k).fold(0.0f32, |x, c| x.max(a(r * k + c).abs())))
        } else {
            0.0
        };
        // Row r's elements go to K block pc, micro-panel r / mr, lane r % mr.
        let (ip, ii) = (r / mr, r % mr);
        let mut pc = 0;
        while pc < k {
            let kc = kc_max.min(k - pc);
            let at = pc * m_pad + ip * kc * mr + ii;
            for p in 0..kc {
                store(t, out, at + p * mr, a(r * k + pc + p), scale);
            }
            pc += kc;
        }
        if t == WeightType::I8 {
            out[scale_at + r * 4..scale_at + r * 4 + 4].copy_from_slice(&scale.to_le_bytes());
        }
        if (r + 1) % mr == 0 || r + 1 == m {
            done((r + 1) * k);
        }
    }
}

/// The widening routines of one instruction set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Widener {
    /// Plain Rust (any CPU).
    Portable,
    /// AVX2 + F16C, 8 lanes.
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// AVX-512F, 16 lanes.
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Widener {
    /// Every widener this CPU can run, best last.
    pub(crate) fn available() -> Vec<Widener> {
        #[allow(unused_mut)]
        let mut v = vec![Widener::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("f16c") {
                v.push(Widener::Avx2);
            }
            if is_x86_feature_detected!("avx512f") {
                v.push(Widener::Avx512);
            }
        }
        v
    }

    /// The best one (chosen once).
    pub(crate) fn best() -> Widener {
        static BEST: std::sync::OnceLock<Widener> = std::sync::OnceLock::new();
        *BEST.get_or_init(|| {
            Widener::available()
                .last()
                .copied()
                .unwrap_or(Widener::Portable)
        })
    }

    /// Widens `n` elements of type `t` at `src` into `dst`; with `scales` (int8), element `i`
    /// is multiplied by `scales[i % NR]` (B panels: `n` is a multiple of [`NR`]).
    ///
    /// # Safety
    /// `src` readable for `n * t.bytes()` bytes, `dst` writable for `n` floats, `scales` (if
    /// given) readable for [`NR`] floats; this CPU runs the widener (from [`available`]).
    pub(crate) unsafe fn widen(
        self,
        t: WeightType,
        src: *const u8,
        n: usize,
        dst: *mut f32,
        scales: Option<*const f32>,
    ) {
        match self {
            // SAFETY: the caller's contract.
            Widener::Portable => unsafe { widen_portable(t, src, n, dst, scales) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the caller's contract; AVX2 and F16C available.
            Widener::Avx2 => unsafe { x86::widen_avx2(t, src, n, dst, scales) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the caller's contract; AVX-512F available.
            Widener::Avx512 => unsafe { x86::widen_avx512(t, src, n, dst, scales) },
        }
    }
}

/// Element `i` at `src` of type `t`, widened.
///
/// # Safety
/// `src` readable for `(i + 1) * t.bytes()` bytes.
#[inline]
unsafe fn load1(t: WeightType, src: *const u8, i: usize) -> f32 {
    // SAFETY: the caller's contract (unaligned reads).
    unsafe {
        match t {
            WeightType::F32 => src.cast::<f32>().add(i).read_unaligned(),
            WeightType::F16 => {
                half::f16::from_bits(src.cast::<u16>().add(i).read_unaligned()).to_f32()
            }
            WeightType::Bf16 => {
                f32::from_bits(u32::from(src.cast::<u16>().add(i).read_unaligned()) << 16)
            }
            WeightType::I8 => f32::from(*src.cast::<i8>().add(i)),
        }
    }
}

/// The portable widener.
///
/// # Safety
/// That of [`Widener::widen`].
unsafe fn widen_portable(
    t: WeightType,
    src: *const u8,
    n: usize,
    dst: *mut f32,
    scales: Option<*const f32>,
) {
    for i in 0..n {
        // SAFETY: i < n: in bounds of both by the contract; scales holds NR floats.
        unsafe {
            let x = load1(t, src, i);
            *dst.add(i) = match scales {
                Some(s) => x * *s.add(i % NR),
                None => x,
            };
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86;

/// A packed B in a reduced type, as the core reads it.
#[derive(Clone, Copy)]
pub(crate) struct LowpB {
    /// Start of the packed elements of panel 0.
    pub(crate) base: *const u8,
    /// Element type.
    pub(crate) t: WeightType,
    /// Per-column scales (int8; column 0 of panel 0), else null.
    pub(crate) scales: *const f32,
    /// Elements between adjacent panels (`k * NR`).
    pub(crate) ps: usize,
}

/// A stack buffer for the widened panels of one micro-kernel call (`KC x 2NR` floats).
#[repr(C, align(64))]
pub(crate) struct PanelBuf(pub(crate) MaybeUninit<[f32; KC * 2 * NR]>);

impl LowpB {
    /// The view from panel `jp` on.
    pub(crate) fn at_panel(self, jp: usize) -> LowpB {
        LowpB {
            base: self.base.wrapping_add(jp * self.ps * self.t.bytes()),
            scales: if self.scales.is_null() {
                self.scales
            } else {
                self.scales.wrapping_add(jp * NR)
            },
            ..self
        }
    }

    /// Widens rows `pc..pc + kc` of panels `jp..jp + np` (`np` 1 or 2, `kc <= KC`) into `buf`
    /// as packed f32 panels `kc * NR` floats apart; returns their start and that distance.
    ///
    /// # Safety
    /// The panels exist (by the GEMM entry point's contract on the packed B).
    pub(crate) unsafe fn widen(
        &self,
        jp: usize,
        np: usize,
        pc: usize,
        kc: usize,
        buf: &mut PanelBuf,
    ) -> (*const f32, usize) {
        let dst = buf.0.as_mut_ptr().cast::<f32>();
        let wd = Widener::best();
        for q in 0..np.min(2) {
            let first = (jp + q) * self.ps + pc * NR;
            let scales = (!self.scales.is_null()).then(|| self.scales.wrapping_add((jp + q) * NR));
            // SAFETY: kc rows of NR elements of panel jp + q from row pc, inside the packed B
            // (the caller's contract); q * kc * NR + kc * NR <= KC * 2 * NR floats of `buf`.
            unsafe {
                wd.widen(
                    self.t,
                    self.base.add(first * self.t.bytes()),
                    kc * NR,
                    dst.add(q * kc * NR),
                    scales,
                )
            };
        }
        (dst.cast_const(), kc * NR)
    }
}

/// A packed A in a reduced type ([`pack_a_lowp`]), as the core reads it.
#[derive(Clone, Copy)]
pub(crate) struct LowpA {
    /// Start of the packed elements.
    pub(crate) base: *const u8,
    /// Element type.
    pub(crate) t: WeightType,
    /// Per-row scales (int8), else null.
    pub(crate) scales: *const f32,
    /// Rows rounded up to the kernel's `MR`.
    pub(crate) m_pad: usize,
    /// First row of the view (a multiple of `MR`).
    pub(crate) row0: usize,
}

/// A stack buffer for one widened `MC x KC` block of A.
#[repr(C, align(64))]
pub(crate) struct BlockBuf(pub(crate) MaybeUninit<[f32; MC * KC]>);

impl LowpA {
    /// The view of a whole `m`-row matrix packed by [`pack_a_lowp`] at `base`.
    pub(crate) fn new(base: *const u8, t: WeightType, m: usize, k: usize) -> LowpA {
        let mr = selected_kernel().mr;
        let m_pad = m.div_ceil(mr) * mr;
        let scales = if t == WeightType::I8 {
            base.wrapping_add((m_pad * k).next_multiple_of(64))
                .cast::<f32>()
        } else {
            std::ptr::null()
        };
        LowpA {
            base,
            t,
            scales,
            m_pad,
            row0: 0,
        }
    }

    /// Widens the block of K block `pc` (`kc` columns) and rows `ic..ic + mc` of the view into
    /// `buf`, laid out as the core's packed A block (`mr`-row micro-panels); returns its start.
    ///
    /// # Safety
    /// The block lies inside the packed A (the conv kernel's contract on its weights).
    pub(crate) unsafe fn widen(
        &self,
        mr: usize,
        (pc, kc): (usize, usize),
        (ic, mc): (usize, usize),
        buf: &mut BlockBuf,
    ) -> *const f32 {
        let dst = buf.0.as_mut_ptr().cast::<f32>();
        let rows = mc.div_ceil(mr) * mr;
        let first = pc * self.m_pad + (self.row0 + ic) * kc;
        let n = rows * kc;
        // SAFETY: `rows * kc <= MC * KC` floats of `buf`; the source block is inside the packed
        // A by the contract.
        unsafe {
            Widener::best().widen(self.t, self.base.add(first * self.t.bytes()), n, dst, None)
        };
        if !self.scales.is_null() {
            for ip in 0..rows / mr {
                // SAFETY: rows row0 + ic + ip*mr .. + mr < m_pad: inside the scales.
                let s = unsafe {
                    std::slice::from_raw_parts(self.scales.add(self.row0 + ic + ip * mr), mr)
                };
                // SAFETY: micro-panel ip of the widened block, kc * mr floats written above.
                let panel =
                    unsafe { std::slice::from_raw_parts_mut(dst.add(ip * kc * mr), kc * mr) };
                for col in panel.chunks_exact_mut(mr) {
                    for (x, &sc) in col.iter_mut().zip(s) {
                        *x *= sc;
                    }
                }
            }
        }
        dst.cast_const()
    }
}

/// `C = A * B (+ C)` as [`super::arenac_sgemm`], with B packed in the reduced type `wtype`
/// ([`WeightType::code`]; 0 is plain f32) by [`pack_b_lowp`].
///
/// # Safety
/// That of [`super::arenac_sgemm`], with `packed_b` holding [`lowp_b_bytes`]`(t, k, n)` bytes.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn arenac_sgemm_lowp(
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    lda: usize,
    packed_b: *const u8,
    c: *mut f32,
    ldc: usize,
    accumulate: u32,
    scratch: *mut f32,
    slots: usize,
    wtype: u64,
) {
    let t = WeightType::from_code(wtype).unwrap_or(WeightType::F32);
    let kernel = selected_kernel();
    // SAFETY: the caller's contract, as for arenac_sgemm.
    unsafe {
        super::split::sgemm_split(
            kernel,
            (m, n, k),
            super::AView::Rows(a, lda),
            super::BView::packed_lowp(packed_b, t, k, n),
            (c, ldc),
            accumulate != 0,
            (scratch, super::a_scratch_slot(m, k), slots.max(1)),
            &|_, _| {},
        )
    }
}

/// `ConvParams::packed_a` of weights packed by [`pack_a_lowp`] in type `t` (f16 17, bf16 18,
/// int8 19): the GEMM path reads them widened block by block, whatever path f32 weights of
/// the same geometry would take (direct convolution has no reduced-type form).
pub const CONV_LOWP_BASE: u64 = 16;

/// Marks `p` (already [`super::conv::mark_packed`]) for weights stored in `t`: every packed
/// layout becomes the reduced GEMM layout; depthwise (read as given) stays f32. Returns
/// whether the weights are stored in `t`.
pub fn mark_conv(p: &mut super::conv::ConvParams, t: WeightType) -> bool {
    if !t.is_reduced() || p.packed_a == 0 {
        return false;
    }
    p.packed_a = CONV_LOWP_BASE + t.code();
    true
}

/// The weight type of a conv's packed weights ([`mark_conv`]), if reduced.
pub fn conv_weight_type(p: &super::conv::ConvParams) -> Option<WeightType> {
    p.packed_a
        .checked_sub(CONV_LOWP_BASE)
        .and_then(WeightType::from_code)
        .filter(|t| t.is_reduced())
}

/// Bytes of a conv's reduced weights: one [`lowp_a_bytes`] piece per group, each rounded up
/// to 64 bytes, or [`conv::Layout::PwSmall`]'s bytes if more where that kernel runs.
pub fn conv_lowp_bytes(p: &super::conv::ConvParams, t: WeightType) -> usize {
    let g = p.group.max(1) as usize;
    let gemm = lowp_a_bytes(t, p.m as usize / g, p.k())
        .next_multiple_of(64)
        .saturating_mul(g);
    // The small-plane pointwise kernel's panels (16 channels each) may need more when the
    // output channels are no multiple of 16.
    let mut q = *p;
    super::conv::mark_packed(&mut q);
    if q.packed_a == super::pw_small::PW_SMALL_PACKED {
        gemm.max(conv::layout_bytes(p, t, conv::Layout::PwSmall))
    } else {
        gemm
    }
}

/// Packs a conv's weights (`M x C/group x kh x kw`; `w(i)` is element i) in `t`, group by
/// group, into `out` ([`conv_lowp_bytes`]); `done(e)`: as for [`pack_a_lowp`], over all groups.
pub fn pack_conv_lowp(
    p: &super::conv::ConvParams,
    t: WeightType,
    w: impl Fn(usize) -> f32,
    out: &mut [u8],
    done: &mut dyn FnMut(usize),
) {
    let (g, k) = (p.group.max(1) as usize, p.k());
    let mg = p.m as usize / g;
    let piece = lowp_a_bytes(t, mg, k).next_multiple_of(64);
    for gi in 0..g {
        if let Some(dst) = out.get_mut(gi * piece..(gi + 1) * piece) {
            let first = gi * mg * k;
            pack_a_lowp(t, mg, k, |i| w(first + i), dst, &mut |e| done(first + e));
        }
    }
}

/// The core's view of group `gi`'s reduced weights at `w`, when `p` says they are reduced.
pub(crate) fn conv_a_view(
    p: &super::conv::ConvParams,
    w: *const f32,
    gi: usize,
) -> Option<super::AView> {
    let t = conv_weight_type(p)?;
    let (g, k) = (p.group.max(1) as usize, p.k());
    let mg = p.m as usize / g;
    let piece = lowp_a_bytes(t, mg, k).next_multiple_of(64);
    let base = w.cast::<u8>().wrapping_add(gi * piece);
    Some(super::AView::Lowp(LowpA::new(base, t, mg, k)))
}

/// `C[m x w] = A[m x k] * B[:, j0..j0 + w]` (C row-major, `w` apart) for a B of `n` columns
/// packed in the reduced type `wtype` by [`pack_b_lowp`] at `packed_b`: a column block of
/// it (`j0` a multiple of [`NR`]), as 16-bit staged products take B (`crate::gemm::stage16`).
///
/// # Safety
/// That of [`arenac_sgemm_lowp`] for the whole B (`lowp_b_bytes(t, k, n)` bytes at
/// `packed_b`), with `j0 + w <= n` and C writable for `m * w` floats.
pub(crate) unsafe fn sgemm_lowp_cols(
    (m, w, k): (usize, usize, usize),
    a: *const f32,
    packed_b: *const u8,
    (n, j0): (usize, usize),
    c: *mut f32,
    (scratch, slots): (*mut f32, usize),
    wtype: u64,
) {
    let t = WeightType::from_code(wtype).unwrap_or(WeightType::F32);
    let b = super::BView::packed_lowp(packed_b, t, k, n).at_col(j0);
    // SAFETY: the caller's contract, as for arenac_sgemm.
    unsafe {
        super::split::sgemm_split(
            selected_kernel(),
            (m, w, k),
            super::AView::Rows(a, k),
            b,
            (c, w),
            false,
            (scratch, super::a_scratch_slot(m, k), slots.max(1)),
            &|_, _| {},
        )
    }
}

#[cfg(test)]
#[path = "lowp/tests.rs"]
mod tests;
