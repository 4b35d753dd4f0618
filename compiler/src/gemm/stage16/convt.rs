//! ConvTranspose on 16-bit data (`--activations f16|bf16`), 1-d or 2-d, constant f32
//! weights: per (image, group, band of output rows) task, the output band starts as the bias
//! (or 0) in f32 scratch; the input rows that reach the band are taken tile by tile of the
//! f32 kernel's tile grid (`codegen::kernels::convt`: whole input rows,
//! `max(1, IM2COL_TILE / width)` of them, the same tiles cut to the band's rows), each
//! widened straight into the GEMM's packed B panels, one [`arenac_sgemm`] into the column
//! panel and col2im adds it into the band; the band is narrowed once into the output. Every
//! output element is the f32 kernel's sum in its order (bias, then tile by tile, tap by tap),
//! so its f32 bits equal the f32 ConvTranspose's on the widened input. Input rows reaching
//! two bands (kernel > stride, pads) are multiplied again for each.

use super::split::{Shared, slot_count, task_width};
use super::{N16, STAGE_BYTES};
use crate::gemm::{IM2COL_TILE, NR, a_scratch_slot, arenac_sgemm, packed_b_len};

/// The geometry of a 16-bit ConvTranspose, 1-d as 2-d with one row (`h == oh == kh == 1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConvT16 {
    /// Images.
    pub n: usize,
    /// Groups.
    pub groups: usize,
    /// Input channels per group.
    pub cg: usize,
    /// Output channels per group.
    pub mg: usize,
    /// Input rows.
    pub h: usize,
    /// Input columns.
    pub w: usize,
    /// Output rows.
    pub oh: usize,
    /// Output columns.
    pub ow: usize,
    /// Kernel rows.
    pub kh: usize,
    /// Kernel columns.
    pub kw: usize,
    /// Strides (rows, columns).
    pub s: [usize; 2],
    /// Dilations (rows, columns).
    pub d: [usize; 2],
    /// Begin pads (rows, columns).
    pub p: [usize; 2],
    /// Whether a bias (`groups * mg` floats) is read.
    pub has_bias: bool,
    /// Threads the plan is for (scratch slots).
    pub threads: usize,
}

/// Floats a scratch part takes: rounded up to 64 bytes.
fn up(f: usize) -> usize {
    f.saturating_add(15) & !15
}

impl ConvT16 {
    /// The geometry of a ConvTranspose with input shape `x` (`[N, C, (H,) W]`), output `y`,
    /// and the resolved attributes; `None` unless 1-d or 2-d with whole groups.
    #[allow(clippy::too_many_arguments)]
    pub fn from_shapes(
        x: &[usize],
        y: &[usize],
        kernel: &[usize],
        strides: &[usize],
        dilations: &[usize],
        pads: &[usize],
        group: usize,
        has_bias: bool,
        threads: usize,
    ) -> Option<ConvT16> {
        let d = kernel.len();
        if !(1..=2).contains(&d) || x.len() != d + 2 || y.len() != d + 2 || x[0] != y[0] {
            return None;
        }
        let at = |v: &[usize], i: usize, fill: usize| -> Option<usize> {
            // Row dim (i == 0) of a 1-d op is the filler; dims of `v` right-aligned.
            if d == 1 && i == 0 {
                Some(fill)
            } else {
                v.get(i + d - 2).copied()
            }
        };
        let groups = group.max(1);
        let (c, m) = (x[1], y[1]);
        if c % groups != 0 || m % groups != 0 {
            return None;
        }
        let dims = |v: &[usize], fill: usize| -> Option<[usize; 2]> {
            Some([at(v, 0, fill)?, at(v, 1, fill)?])
        };
        let [h, w] = dims(&x[2..], 1)?;
        let [oh, ow] = dims(&y[2..], 1)?;
        let [kh, kw] = dims(kernel, 1)?;
        let s = dims(strides, 1)?;
        let dl = dims(dilations, 1)?;
        let p = dims(pads.get(..d)?, 0)?;
        if s.contains(&0) || dl.contains(&0) || kh == 0 || kw == 0 {
            return None;
        }
        Some(ConvT16 {
            n: x[0],
            groups,
            cg: c / groups,
            mg: m / groups,
            h,
            w,
            oh,
            ow,
            kh,
            kw,
            s,
            d: dl,
            p,
            has_bias,
            threads: threads.max(1),
        })
    }

    fn taps(&self) -> usize {
        self.kh * self.kw
    }

    /// Rows of the GEMM's A: `mg * taps`.
    pub fn mk(&self) -> usize {
        self.mg * self.taps()
    }

    /// Input rows per tile of the f32 kernel's grid.
    fn tile_rows(&self) -> usize {
        (IM2COL_TILE / self.w.max(1)).clamp(1, self.h.max(1))
    }

    /// Output rows per band: as many as [`band_budget`] f32 bytes hold, in whole units of
    /// `tile rows * stride` (a whole tile per band where the kernel is the stride) or of the
    /// stride (no input row shared by two bands then), at least the stride; at most all.
    fn band_rows(&self) -> usize {
        let row = self.mg.saturating_mul(self.ow).saturating_mul(4).max(1);
        let sh = self.s[0];
        let unit = self.tile_rows().saturating_mul(sh);
        let mut r = (band_budget() / row).max(1);
        r = if r >= unit {
            r / unit * unit
        } else if r >= sh {
            r / sh * sh
        } else {
            sh
        };
        r.clamp(1, self.oh.max(1))
    }

    fn bands(&self) -> usize {
        self.oh.div_ceil(self.band_rows())
    }

    /// Tasks: images x groups x bands.
    pub fn tasks(&self) -> usize {
        self.n * self.groups * self.bands()
    }

    /// Floats of one slot's parts: packed B tile, column panel, A scratch, output band.
    fn parts(&self) -> [usize; 4] {
        let tn = self.tile_rows() * self.w;
        [
            up(packed_b_len(self.cg, tn)),
            up(self.mk().saturating_mul(tn)),
            a_scratch_slot(self.mk(), self.cg),
            up(self.mg * self.band_rows() * self.ow),
        ]
    }

    fn slot_floats(&self) -> usize {
        self.parts().iter().sum()
    }

    fn slots(&self) -> usize {
        slot_count(self.tasks(), self.threads)
    }

    /// Scratch bytes [`convt`] uses: one slot per thread where the tasks fill them, else one.
    pub fn scratch_bytes(&self) -> usize {
        self.slot_floats()
            .saturating_mul(self.slots())
            .saturating_mul(4)
    }

    /// The single-thread multiply-adds of the node (its cost for `par::width`).
    fn macs(&self) -> usize {
        self.n * self.groups * self.h * self.w * self.cg * self.mk()
    }
}

/// f32 bytes of an output band: [`STAGE_BYTES`] x 2 (the column panel of a tile is about as
/// large).
fn band_budget() -> usize {
    2 * STAGE_BYTES
}

/// The weights' arrangement the f32 kernel takes too: per group `g`, `A_g[(m, tap), c] =
/// W[g * cg + c, m, tap]` (`groups` blocks of `mk x cg` row-major) from `w` (`[C, mg, taps]`).
pub fn arrange_weights(groups: usize, cg: usize, mk: usize, w: &[f32], out: &mut [f32]) {
    for g in 0..groups {
        for ci in 0..cg {
            for r in 0..mk {
                if let (Some(o), Some(&v)) = (
                    out.get_mut((g * mk + r) * cg + ci),
                    w.get((g * cg + ci) * mk + r),
                ) {
                    *o = v;
                }
            }
        }
    }
}

/// `y = conv_transpose(x, w) + bias` on 16-bit `x` and `y`, band by band (module doc).
///
/// # Safety
/// `x` readable for `n * groups * cg * h * w` values, `y` writable for
/// `n * groups * mg * oh * ow`, apart from `x`; `a` readable for `groups * mk * cg` floats
/// ([`arrange_weights`]), `bias` for `groups * mg` floats when `has_bias`; `scratch`
/// writable for [`ConvT16::scratch_bytes`] bytes, 4-aligned, overlapping nothing else.
pub unsafe fn convt(
    t: N16,
    q: &ConvT16,
    x: *const u16,
    a: *const f32,
    bias: *const f32,
    y: *mut u16,
    scratch: *mut f32,
) {
    let tasks = q.tasks();
    if tasks == 0 || q.ow == 0 || q.mg == 0 {
        return;
    }
    let slots = q.slots();
    let cost = crate::par::cost::gemm_ns(q.macs());
    let width = task_width(tasks, slots, cost);
    let (xs, as_, bs, ys, ss) = (
        Shared::of(x),
        Shared::of(a),
        Shared::of(bias),
        Shared(y),
        Shared(scratch),
    );
    let slot = q.slot_floats();
    crate::par::for_each(tasks, width, |i, th| {
        // SAFETY: the caller's contract; task `i` writes its own band of `y` and the slot of
        // thread `th` (`th < width <= slots`).
        unsafe {
            task(
                t,
                q,
                i,
                xs.get(),
                as_.get(),
                bs.get(),
                ys.get(),
                ss.get().add(th * slot),
            )
        }
    });
}

/// Task `i` of `q` (image and group `i / bands`, band `i % bands`) in slot `s`.
///
/// # Safety
/// As [`convt`]; `s` one slot of [`ConvT16::slot_floats`] floats.
#[allow(clippy::too_many_arguments)]
unsafe fn task(
    t: N16,
    q: &ConvT16,
    i: usize,
    x: *const u16,
    a: *const f32,
    bias: *const f32,
    y: *mut u16,
    s: *mut f32,
) {
    let (bands, br) = (q.bands(), q.band_rows());
    let (ng, band) = (i / bands, i % bands);
    let g = ng % q.groups;
    let (o0, o1) = (band * br, ((band + 1) * br).min(q.oh));
    let rows = o1 - o0;
    let (in_px, out_px, mk) = (q.h * q.w, q.oh * q.ow, q.mk());
    let [pk, cl, sa, _] = q.parts();
    // SAFETY: the caller's contract: image/group `ng`'s planes and group `g`'s weights lie
    // inside `x`, `y` and `a`; the slot holds the four parts.
    let (xg, yg, ag, packed, col, sa, out) = unsafe {
        (
            x.add(ng * q.cg * in_px),
            y.add(ng * q.mg * out_px),
            a.add(g * mk * q.cg),
            s,
            s.add(pk),
            s.add(pk + cl),
            std::slice::from_raw_parts_mut(s.add(pk + cl + sa), q.mg * rows * q.ow),
        )
    };
    for (m, plane) in out.chunks_exact_mut(rows * q.ow).enumerate() {
        let v = if q.has_bias {
            // SAFETY: `groups * mg` bias floats by the contract.
            unsafe { *bias.add(g * q.mg + m) }
        } else {
            0.0
        };
        plane.fill(v);
    }
    // The input rows reaching output rows `o0..o1`: `ih * sh + kh * dh - ph` in the band for
    // some kernel row `kh`.
    let (sh, dh, ph) = (q.s[0], q.d[0], q.p[0]);
    let first = (o0 + ph).saturating_sub((q.kh - 1) * dh).div_ceil(sh);
    let end = ((o1 - 1 + ph) / sh + 1).min(q.h);
    let tr = q.tile_rows();
    let mut tile = first / tr;
    while tile * tr < end {
        let (r0, r1) = ((tile * tr).max(first), ((tile + 1) * tr).min(end));
        let tn = (r1 - r0) * q.w;
        // SAFETY: rows `r0..r1` of each of the group's `cg` planes lie inside `x`; the packed
        // part holds `packed_b_len(cg, tn)` floats (`tn` at most a tile).
        unsafe {
            widen_packed(t, xg.add(r0 * q.w), in_px, q.cg, tn, packed);
            arenac_sgemm(mk, tn, q.cg, ag, q.cg, packed, col, tn, 0, sa, 1);
        }
        // SAFETY: the column part holds `mk * tn` floats, just written.
        let c = unsafe { std::slice::from_raw_parts(col, mk * tn) };
        col2im(q, c, r0, r1 - r0, (o0, rows), out);
        tile += 1;
    }
    for (m, plane) in out.chunks_exact(rows * q.ow).enumerate() {
        // SAFETY: output rows `o0..o1` of plane `m` of this image and group: this task's
        // alone, inside `y`.
        let dst =
            unsafe { std::slice::from_raw_parts_mut(yg.add(m * out_px + o0 * q.ow), rows * q.ow) };
        super::narrow(t, plane, dst);
    }
}

/// Widens `k` rows of `n` 16-bit values (row `i` at `x + i * stride`) straight into the GEMM
/// core's packed B layout at `out` (`packed_b_len(k, n)` floats: panels of [`NR`] columns,
/// zero past `n`), as `arenac_pack_b` packs an f32 matrix.
///
/// # Safety
/// `x` readable for those rows, `out` writable for `packed_b_len(k, n)` floats, apart.
unsafe fn widen_packed(t: N16, x: *const u16, stride: usize, k: usize, n: usize, out: *mut f32) {
    // SAFETY: by the contract.
    let dst = unsafe { std::slice::from_raw_parts_mut(out, packed_b_len(k, n)) };
    // Each row widened a run of whole panels at a time (one conversion call per run, not per
    // panel), then copied into its panels.
    let mut buf = [0f32; 64 * NR];
    for i in 0..k {
        // SAFETY: row `i` by the contract.
        let row = unsafe { std::slice::from_raw_parts(x.add(i * stride), n) };
        for (r, run) in row.chunks(buf.len()).enumerate() {
            let wide = &mut buf[..run.len()];
            super::widen(t, run, wide);
            for (jp, src) in wide.chunks(NR).enumerate() {
                let at = ((r * 64 + jp) * k + i) * NR;
                let panel = &mut dst[at..at + NR];
                panel[..src.len()].copy_from_slice(src);
                panel[src.len()..].fill(0.0);
            }
        }
    }
}

/// Adds the column panel `c` of input rows `r0..r0 + nr` (`(m, tap)` rows of `nr * w`
/// pixels) into the output band `out` (rows `o0..o0 + rows` of `mg` planes): plane by plane,
/// tap by tap, row by row, as the f32 kernel's col2im.
fn col2im(
    q: &ConvT16,
    c: &[f32],
    r0: usize,
    nr: usize,
    (o0, rows): (usize, usize),
    out: &mut [f32],
) {
    let (tn, taps) = (nr * q.w, q.taps());
    let (sw, dw, pw) = (q.s[1], q.d[1], q.p[1] as i64);
    let (sh, dh, ph) = (q.s[0] as i64, q.d[0] as i64, q.p[0] as i64);
    for m in 0..q.mg {
        let ym = &mut out[m * rows * q.ow..(m + 1) * rows * q.ow];
        let cm = &c[m * taps * tn..(m + 1) * taps * tn];
        for kh in 0..q.kh {
            if q.kw == sw && dw == 1 && pw == 0 {
                interleaved(
                    q,
                    &cm[kh * q.kw * tn..(kh + 1) * q.kw * tn],
                    kh,
                    r0,
                    nr,
                    (o0, rows),
                    ym,
                );
                continue;
            }
            for kw in 0..q.kw {
                let tap = kh * q.kw + kw;
                // Input columns landing inside the output row: ow = iw * sw - shift.
                let shift = pw - (kw * dw) as i64;
                let lo = if shift <= 0 {
                    0
                } else {
                    (shift as usize).div_ceil(sw)
                };
                let top = q.ow as i64 - 1 + shift;
                let hi = if top < 0 {
                    0
                } else {
                    (top as usize / sw + 1).min(q.w)
                };
                if lo >= hi {
                    continue;
                }
                let ow0 = ((lo * sw) as i64 - shift) as usize;
                let len = hi - lo;
                for r in 0..nr {
                    let oh = (r0 + r) as i64 * sh + kh as i64 * dh - ph;
                    if oh < o0 as i64 || oh >= (o0 + rows) as i64 {
                        continue;
                    }
                    let at = (oh as usize - o0) * q.ow + ow0;
                    let src = &cm[tap * tn + r * q.w + lo..][..len];
                    if sw == 1 {
                        for (y, &v) in ym[at..at + len].iter_mut().zip(src) {
                            *y += v;
                        }
                    } else {
                        for (j, &v) in src.iter().enumerate() {
                            ym[at + j * sw] += v;
                        }
                    }
                }
            }
        }
    }
}

/// [`col2im`]'s pass over kernel row `kh` when its taps land on disjoint output columns
/// (`ow = iw * sw + kw`: kernel width = stride, no dilation or pad along the row): each
/// input row's taps added in one interleaved pass. An output column takes one tap, so each
/// output's adds keep their order (kernel row, then input row).
fn interleaved(
    q: &ConvT16,
    c: &[f32],
    kh: usize,
    r0: usize,
    nr: usize,
    (o0, rows): (usize, usize),
    ym: &mut [f32],
) {
    let (sw, tn) = (q.s[1], nr * q.w);
    let (sh, dh, ph) = (q.s[0] as i64, q.d[0] as i64, q.p[0] as i64);
    let cols = q.w.min(q.ow.div_ceil(sw));
    for r in 0..nr {
        let oh = (r0 + r) as i64 * sh + kh as i64 * dh - ph;
        if oh < o0 as i64 || oh >= (o0 + rows) as i64 {
            continue;
        }
        let yrow = &mut ym[(oh as usize - o0) * q.ow..][..q.ow];
        let tap = |kw: usize| &c[kw * tn + r * q.w..][..cols];
        if sw == 2 && 2 * cols <= q.ow {
            let (c0, c1) = (tap(0), tap(1));
            for ((pair, &a), &b) in yrow.chunks_exact_mut(2).zip(c0).zip(c1) {
                pair[0] += a;
                pair[1] += b;
            }
            continue;
        }
        for kw in 0..sw {
            for (iw, &v) in tap(kw).iter().enumerate() {
                if let Some(y) = yrow.get_mut(iw * sw + kw) {
                    *y += v;
                }
            }
        }
    }
}
