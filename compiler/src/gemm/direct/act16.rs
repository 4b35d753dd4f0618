//! The row kernel of [`super`] straight on 16-bit planes (`--activations f16|bf16`): each
//! tap's input vectors loaded as 16 values and widened in registers (masked as the f32
//! kernel masks its loads), the same broadcast-weight FMAs in the same K order, bias and
//! activation in registers, the f32 result rounded to nearest even once on the masked store
//! (`crate::gemm::stage16::convert`'s `narrow16`). Bit for bit the f32 kernel's output
//! narrowed, so the staged bands (`crate::gemm::stage16::conv`) it replaces: no f32 staging,
//! no halo rows widened twice, and the whole plane's kernel and weights layout (a band's
//! plane of a few rows may take the channels-in-lanes kernel instead, or re-read the
//! weights per band).

use super::{Geom, SyncPtr};
use crate::gemm::conv::ConvParams;
use crate::gemm::stage16::N16;

/// Input channels up to which [`run16`] replaces the staged bands: first layers (a stem's
/// 3 channels), whose few multiply-adds per input value leave the bands' widening and
/// narrowing passes the larger part (SqueezeNet's 3x3/s2 stem at 2 threads: 617 us staged,
/// 430 us here, f32 487). With many channels the conversions in the tap loop cost more than
/// the passes (U-Net's 192- and 384-channel 3x3 on 64x64 / 32x32 planes at 1 thread: 9.6 ms
/// here, 8.2-8.0 ms staged — their bands of a few rows take the channels-in-lanes kernel,
/// faster there than the f32 conv's row kernel on the whole plane, 8.7 / 8.5 ms).
pub(crate) const MAX_C: u64 = 4;

/// Whether [`run16`] computes `p` on this CPU: the row kernel of [`super::run`] is the one
/// the f32 conv runs on the whole plane (not the channels-in-lanes or flat kernels), at most
/// [`MAX_C`] input channels, f32 weights packed in its 12-row panels (`p.packed_a`
/// [`super::DIRECT_PACKED`]), AVX-512BW and VL for the 16-bit masked loads and stores, and
/// `ARENAC_DIR16_DIRECT` not `0` (the staged bands instead, for comparisons).
pub(crate) fn direct16(p: &ConvParams) -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let on = *ON.get_or_init(|| {
        let env = std::env::var("ARENAC_DIR16_DIRECT").map_or(true, |v| v != "0");
        #[cfg(target_arch = "x86_64")]
        let isa = std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vl");
        #[cfg(not(target_arch = "x86_64"))]
        let isa = false;
        env && isa
    });
    on && p.packed_a == super::DIRECT_PACKED
        && p.c <= MAX_C
        && p.wtype == 0
        && super::applies(p)
        && !super::cl::fits(p)
        && !crate::gemm::direct_flat::geometry_fits(p)
}

/// `y = act(conv(x, w) + bias)` on 16-bit `x` and `y` by the row kernel, spread over the
/// current pool as [`super::run`] spreads its f32 units (the same units; bit-identical at
/// every thread count).
///
/// # Safety
/// [`direct16`] holds for `p`; `x` readable for `n*c*h*w` values, `y` writable for
/// `n*m*oh*ow`, `w` the weights packed by [`super::pack`] for `p`, `bias` `m` floats when
/// `p.has_bias`.
pub(crate) unsafe fn run16(
    t: N16,
    p: &ConvParams,
    x: *const u16,
    w: *const f32,
    bias: *const f32,
    y: *mut u16,
) {
    #[cfg(target_arch = "x86_64")]
    {
        let g = Geom::new(p);
        let act = p.activation();
        let panels = g.m.div_ceil(12);
        let width = (p.threads.max(1) as usize).min(crate::par::threads());
        let units = p.n as usize * g.oh * panels;
        let unit_macs = 12 * g.ow * g.k;
        let per = (crate::gemm::split::MIN_TASK_MACS / unit_macs.max(1)).max(1);
        let tasks = units.div_ceil(per);
        let bias = (p.has_bias != 0).then_some(SyncPtr(bias.cast_mut()));
        let (x, w, y) = (SyncPtr(x.cast_mut()), SyncPtr(w.cast_mut()), SyncPtr(y));
        crate::par::for_each(tasks, width, |task, _| {
            for u in task * per..((task + 1) * per).min(units) {
                // Panels innermost: consecutive units share their input rows.
                let (img, oy, ip) = (u / (g.oh * panels), (u / panels) % g.oh, u % panels);
                let xi = x.get().cast_const().wrapping_add(img * g.c * g.h * g.w);
                let yi = y.get().wrapping_add(img * g.m * g.oh * g.ow);
                let b = bias.as_ref().map(|b| b.get().cast_const());
                // SAFETY: the contract; unit u writes only output row oy of its panel's
                // channels of image img; the CPU has AVX-512F/BW/VL (`direct16`).
                unsafe { x86::row16(t, &g, xi, w.get().cast_const(), b, act, yi, oy, ip) };
            }
        });
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (t, p, x, w, bias, y);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::super::x86::{Elem, row_of};
    use super::{Geom, N16};
    use crate::gemm::act::Activation;
    use crate::gemm::stage16::convert::x86::{narrow16, narrow16_bf, widen16};
    use core::arch::x86_64::*;

    /// f16 planes.
    struct F16;
    /// bf16 planes.
    struct Bf16;

    macro_rules! elem16 {
        ($ty:ty, $t:expr) => {
            impl Elem for $ty {
                type T = u16;
                #[inline(always)]
                unsafe fn load(m: __mmask16, p: *const u16) -> __m512 {
                    // SAFETY: the caller's contract (AVX-512BW/VL, the lanes of `m`).
                    unsafe { widen16($t, _mm256_maskz_loadu_epi16(m, p.cast())) }
                }
                #[inline(always)]
                unsafe fn store(m: __mmask16, p: *mut u16, v: __m512) {
                    // SAFETY: as above.
                    unsafe { _mm256_mask_storeu_epi16(p.cast(), m, narrow16($t, v)) }
                }
            }
        };
    }
    elem16!(F16, N16::F16);
    elem16!(Bf16, N16::Bf16);

    /// bf16 planes rounded by AVX512_BF16 ([`narrow16_bf`]: the same bits), for
    /// [`row16_ne`].
    struct Bf16Ne;

    impl Elem for Bf16Ne {
        type T = u16;
        #[inline(always)]
        unsafe fn load(m: __mmask16, p: *const u16) -> __m512 {
            // SAFETY: the caller's contract (AVX-512BW/VL, the lanes of `m`).
            unsafe { widen16(N16::Bf16, _mm256_maskz_loadu_epi16(m, p.cast())) }
        }
        #[inline(always)]
        unsafe fn store(m: __mmask16, p: *mut u16, v: __m512) {
            // SAFETY: as above; AVX512_BF16 and DQ (`row16_ne`'s contract).
            unsafe { _mm256_mask_storeu_epi16(p.cast(), m, narrow16_bf(v)) }
        }
    }

    /// [`super::super::x86::row`] on 16-bit planes.
    ///
    /// # Safety
    /// AVX-512F/BW/VL; `x` readable for the image's `c*h*w` values, `w` the packed weights,
    /// `bias` (if any) `m` floats, `y` writable for the image's `m*oh*ow` values.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
    pub(super) unsafe fn row16(
        t: N16,
        g: &Geom,
        x: *const u16,
        w: *const f32,
        bias: Option<*const f32>,
        act: Activation,
        y: *mut u16,
        oy: usize,
        ip: usize,
    ) {
        // SAFETY: the contract, passed on; `row16_ne` where the CPU has its features.
        unsafe {
            if t == N16::Bf16 && crate::gemm::stage16::convert::bf16_ne() {
                return row16_ne(g, x, w, bias, act, y, oy, ip);
            }
            match (t, g.sw == 2) {
                (N16::F16, false) => row_of::<F16, 1>(g, x, w, bias, act, y, oy, ip),
                (N16::F16, true) => row_of::<F16, 2>(g, x, w, bias, act, y, oy, ip),
                (N16::Bf16, false) => row_of::<Bf16, 1>(g, x, w, bias, act, y, oy, ip),
                (N16::Bf16, true) => row_of::<Bf16, 2>(g, x, w, bias, act, y, oy, ip),
            }
        }
    }

    /// [`row16`] on bf16 planes, rounded by AVX512_BF16.
    ///
    /// # Safety
    /// As [`row16`]; the CPU has AVX512_BF16 and DQ too.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,avx512dq,avx512bf16")]
    unsafe fn row16_ne(
        g: &Geom,
        x: *const u16,
        w: *const f32,
        bias: Option<*const f32>,
        act: Activation,
        y: *mut u16,
        oy: usize,
        ip: usize,
    ) {
        // SAFETY: the contract, passed on.
        unsafe {
            if g.sw == 2 {
                row_of::<Bf16Ne, 2>(g, x, w, bias, act, y, oy, ip)
            } else {
                row_of::<Bf16Ne, 1>(g, x, w, bias, act, y, oy, ip)
            }
        }
    }
}
