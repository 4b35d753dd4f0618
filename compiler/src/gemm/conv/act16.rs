//! The GEMM path's pointwise Conv on 16-bit planes (`--activations f16|bf16`), unstaged: the
//! input planes are B as they are (K = C rows of `pixels` 16-bit values) and the output
//! planes are C, as in [`super::arenac_conv2d`]'s pointwise path, without the staged path's
//! f32 copies of the planes or its scratch.
//!
//! A task is one image's tile of at most [`TILE`] pixels over a range of blocks of [`MC`]
//! output channels. For each block and each K block (the core's balanced blocking) the
//! tile's B rows are widened one panel pair (32 columns, the padding zeroed) at a time into
//! a stack buffer laid out as the micro-kernels read a row-major B, and the block's
//! micro-panels (the packed weights, or the reduced ones widened block by block as the core
//! widens them) multiply it into an f32 stack tile of `MC x TILE`, the first K block writing
//! and the later ones adding — the core's accumulation, so every element is the same
//! multiply-add chain as the f32 kernel's on the widened planes (a fused residual,
//! `ConvParams::accumulate`: the tile's outputs widened into the f32 tile first, the first
//! K block adding to it as the core adds to C). After the last K block the
//! tile's rows take the f32 epilogue ([`crate::gemm::act::bias_act`]: bias, fused
//! activation) and are rounded to nearest even into the output rows
//! ([`crate::gemm::stage16::narrow`]). So every output is the f32 kernel's result on the
//! widened input rounded once: the staged path's bits.

use super::ConvParams;
use crate::gemm::lowp::BlockBuf;
use crate::gemm::split::{MIN_TASK_MACS, SyncPtr};
use crate::gemm::stage16::{N16, narrow, widen};
use crate::gemm::{AView, KC, Kernel, MC, NR, selected_kernel};
use std::mem::MaybeUninit;

/// Most pixels of a task's tile (the f32 path's im2col tile, `crate::gemm::IM2COL_TILE`).
const TILE: usize = crate::gemm::IM2COL_TILE;

/// Whether the unstaged path is on (`ARENAC_PWBIG16_DIRECT=0`: the staged path instead, for
/// comparisons). The planner and the lowering ask the same (`stage16::conv::pw_big_direct`).
pub(crate) fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("ARENAC_PWBIG16_DIRECT").map_or(true, |v| v != "0"))
}

/// `y = act(conv(x, w) + bias)` of a pointwise `p` (no groups) on 16-bit planes of type `t`,
/// spread over the current pool; with `p.accumulate` (a fused residual) `y` holds the
/// residual on entry and `y = act(conv(x, w) + y + bias)`, the residual widened into the f32
/// tile before the first K block adds to it, as the core's `accumulate` adds to C.
///
/// # Safety
/// `p` is pointwise with one group, `p.packed_a` 1 (weights packed by
/// [`super::prepare_weights`] in this process) or a reduced GEMM-path marking
/// (`crate::gemm::lowp::mark_conv`, weights packed by `crate::gemm::lowp::pack_conv_lowp`);
/// `x` readable for `n*c*pixels` values, `y` writable for `n*m*pixels`, `bias` readable for
/// `m` floats when `has_bias != 0`; `y` overlaps nothing else.
pub(crate) unsafe fn run16(
    t: N16,
    p: &ConvParams,
    x: *const u16,
    w: *const f32,
    bias: *const f32,
    y: *mut u16,
) {
    let (n, m, k) = (p.n as usize, p.m as usize, p.k());
    let pixels = (p.oh * p.ow) as usize;
    if n == 0 || m == 0 || pixels == 0 {
        return;
    }
    let av = crate::gemm::lowp::conv_a_view(p, w, 0).unwrap_or_else(|| AView::packed(w, m));
    let macs = n.saturating_mul(m).saturating_mul(k).saturating_mul(pixels);
    let width = if macs >= 2 * MIN_TASK_MACS {
        crate::par::width(crate::par::cost::gemm_ns(macs), p.threads.max(1) as usize)
    } else {
        1
    };
    let kernel = selected_kernel();
    let (tiles, mparts) = split(n, m, pixels, width, tile_max(k, m, step(&kernel)));
    let mblocks = m.div_ceil(MC);
    let op = Op {
        t,
        x: SyncPtr(x.cast_mut()),
        bias: SyncPtr(if p.has_bias != 0 {
            bias.cast_mut()
        } else {
            std::ptr::null_mut()
        }),
        y: SyncPtr(y),
        av,
        act: p.activation(),
        dims: (k, m, pixels),
        kernel,
        avx512: is_avx512(),
        acc: p.accumulate != 0,
    };
    let lowp = matches!(av, AView::Lowp(_));
    crate::par::for_each(n * tiles * mparts, width, |i, _| {
        let (img, ti, part) = (i / (tiles * mparts), i / mparts % tiles, i % mparts);
        let px = tile_px(ti, tiles, pixels);
        let rows =
            (mblocks * part / mparts * MC).min(m)..(mblocks * (part + 1) / mparts * MC).min(m);
        // SAFETY: the contract; this task alone writes pixels `px` of output rows `rows` of
        // image `img`.
        unsafe {
            if lowp {
                op.task_lowp(img, px, rows)
            } else {
                op.task(img, px, rows, None)
            }
        };
    });
}

/// How [`run16`] cuts the work on `width` threads: tiles per image ([`tile_px`]) and parts
/// of the output channels (whole [`MC`] blocks). Tiles of at most [`TILE`] pixels; more
/// (balanced in 16-pixel panels) while there are fewer than two tasks per thread, then the
/// channels split where the panels are too few; with fewer pixels than channels, the channel
/// blocks split over the threads instead.
fn split(n: usize, m: usize, pixels: usize, width: usize, tmax: usize) -> (usize, usize) {
    let panels = pixels.div_ceil(NR).max(1);
    let mut tiles = panels.div_ceil((tmax / NR).max(1)).max(1);
    let mblocks = m.div_ceil(MC);
    if width > 1 && n * tiles < 2 * width && pixels < m && mblocks >= width {
        // More channels than pixels (the f32 path's rule for splitting the product): the
        // channel blocks go to the threads, so the weights are read once per tile, not once
        // per thread's tile.
        return (tiles, width);
    }
    if width > 1 && n * tiles < 2 * width {
        let units = (n * tiles).next_multiple_of(width);
        tiles = units.div_ceil(n).max(tiles).min(panels);
    }
    let mparts = if n * tiles < width {
        width.div_ceil(n * tiles).min(mblocks)
    } else {
        1
    };
    (tiles, mparts.max(1))
}

/// Columns of B a widened row holds: the micro-kernel's panels (two for a wide kernel).
fn step(kernel: &Kernel) -> usize {
    if kernel.wide.is_some() { 2 * NR } else { NR }
}

/// Most pixels of a tile: with several blocks of `m` channels, a tile whose B rows, all of
/// K, fit the stack buffer ([`BMAX`]) widened once for every block: a multiple of `step` up
/// to [`TILE`]; [`TILE`] where one `step` of K does not fit (then each K block is widened
/// per block of output channels), and for one block (each K block widened per pair as it is
/// used: once).
fn tile_max(k: usize, m: usize, step: usize) -> usize {
    if m <= MC {
        // One block of channels: each K block widened per pair as it is used (once).
        return TILE;
    }
    match BMAX / (k * step).max(1) {
        0 => TILE,
        q => (q * step).min(TILE),
    }
}

/// Floats of the stack buffer of widened B rows (192 KiB): a tile's whole K where it fits,
/// else one K block of a panel pair.
const BMAX: usize = 48 * 1024;

/// Pixels of tile `ti` of `tiles` on a plane of `pixels`: whole 16-pixel panels, as evenly
/// as they divide.
fn tile_px(ti: usize, tiles: usize, pixels: usize) -> std::ops::Range<usize> {
    let panels = pixels.div_ceil(NR);
    let at = |i: usize| (panels * i / tiles.max(1) * NR).min(pixels);
    at(ti)..at(ti + 1)
}

/// The operands of one [`run16`], shared by its tasks.
#[derive(Clone, Copy)]
struct Op {
    t: N16,
    x: SyncPtr<u16>,
    bias: SyncPtr<f32>,
    y: SyncPtr<u16>,
    av: AView,
    act: crate::gemm::act::Activation,
    /// K, M, pixels per plane.
    dims: (usize, usize, usize),
    kernel: Kernel,
    /// Whether the conversions run AVX-512's loop (`crate::gemm::stage16::convert::isa`).
    avx512: bool,
    /// A fused residual (`ConvParams::accumulate`): the output holds it on entry.
    acc: bool,
}

// SAFETY: the pointers are valid for the job by `run16`'s contract; tasks write disjoint
// parts of `y` and only read the rest.
unsafe impl Send for Op {}
// SAFETY: as above.
unsafe impl Sync for Op {}

/// Row stride of the f32 stack tile: [`TILE`] and one panel, so its rows are not 4 KiB
/// apart (stores and loads of rows 4 apart would alias).
const CLD: usize = TILE + NR;

/// A stack tile of [`MC`] rows of [`CLD`] f32 outputs.
#[repr(C, align(64))]
struct CBuf(MaybeUninit<[f32; MC * CLD]>);

/// A stack buffer of one K block of widened B rows, two panels wide.
#[repr(C, align(64))]
struct BBuf(MaybeUninit<[f32; BMAX]>);

const _: () = assert!(KC * 2 * NR <= BMAX && TILE.is_multiple_of(2 * NR));

impl Op {
    /// `kc` rows of `wv` values at `x` (`ld` apart) widened into rows of `width >= wv` floats
    /// at `dst`, zero past `wv`.
    ///
    /// # Safety
    /// `x` readable for the rows, `dst` writable for `kc * width` floats.
    unsafe fn widen_rows(
        &self,
        x: *const u16,
        ld: usize,
        kc: usize,
        wv: usize,
        width: usize,
        dst: *mut f32,
    ) {
        #[cfg(target_arch = "x86_64")]
        if wv == width && self.avx512 {
            // SAFETY: the contract; whole vectors of 16 (width is NR or 2 NR); AVX-512F
            // (the conversions' loop is AVX-512's).
            unsafe { x86::widen_rows(self.t, x, ld, kc, width / NR, dst) };
            return;
        }
        for r in 0..kc {
            // SAFETY: row r of both, by the contract.
            unsafe {
                let src = std::slice::from_raw_parts(x.add(r * ld), wv);
                let d = std::slice::from_raw_parts_mut(dst.add(r * width), width);
                widen(self.t, src, &mut d[..wv]);
                d[wv..].fill(0.0);
            }
        }
    }

    /// [`Op::task`] with the reduced weights' block buffer in this frame (144 KiB, kept out
    /// of the f32 weights' frame).
    ///
    /// # Safety
    /// That of [`Op::task`].
    #[inline(never)]
    unsafe fn task_lowp(
        &self,
        img: usize,
        px: std::ops::Range<usize>,
        rows: std::ops::Range<usize>,
    ) {
        let mut abuf = BlockBuf(MaybeUninit::uninit());
        // SAFETY: the caller's contract.
        unsafe { self.task(img, px, rows, Some(&mut abuf)) };
    }

    /// Pixels `px` (at most [`TILE`]) of output channels `rows` (from a multiple of [`MC`])
    /// of image `img`; `abuf` given when the weights are reduced.
    ///
    /// # Safety
    /// [`run16`]'s contract; only this task writes these outputs.
    unsafe fn task(
        &self,
        img: usize,
        px: std::ops::Range<usize>,
        rows: std::ops::Range<usize>,
        mut abuf: Option<&mut BlockBuf>,
    ) {
        let (k, m, pixels) = self.dims;
        let kernel = self.kernel;
        let mr = kernel.mr;
        let tw = px.len();
        let mut cbuf = CBuf(MaybeUninit::uninit());
        let mut bbuf = BBuf(MaybeUninit::uninit());
        let cp = cbuf.0.as_mut_ptr().cast::<f32>();
        let bp = bbuf.0.as_mut_ptr().cast::<f32>();
        let step = step(&kernel);
        // All of K widened once for the tile (pair q's k rows of `step` floats at q * k *
        // step), or each K block per block of channels (at the buffer's start).
        let whole = rows.len() > MC && tw.div_ceil(step) * k * step <= BMAX;
        // The planes of image `img` from pixel px.start.
        let x = self
            .x
            .get()
            .cast_const()
            .wrapping_add(img * k * pixels + px.start);
        // Balanced K blocks, as the core cuts them.
        let kblocks = k.div_ceil(KC).max(1);
        let kc_max = k.div_ceil(kblocks);
        if whole {
            let mut j0 = 0;
            while j0 < tw {
                // SAFETY: the k planes' pixels px.start + j0 .. + wv <= px.end (the
                // contract); pair j0 / step's k rows of `step` floats, inside BMAX (whole).
                unsafe {
                    let wv = step.min(tw - j0);
                    self.widen_rows(x.add(j0), pixels, k, wv, step, bp.add(j0 * k))
                };
                j0 += step;
            }
        }
        let mut ic = rows.start;
        while ic < rows.end {
            let mc = MC.min(rows.end - ic);
            let nip = mc.div_ceil(mr);
            if self.acc {
                // The residual the outputs hold, widened into the tile, which the first K
                // block then adds to (the core's `accumulate`); the columns up to the last
                // panel pair zero.
                let cols = tw.next_multiple_of(step).min(CLD);
                for i in 0..mc {
                    // SAFETY: pixels px of output channel ic + i < m of image img (this
                    // task's alone, read before written); row i < MC of the tile.
                    unsafe {
                        let src = std::slice::from_raw_parts(
                            self.y.get().add((img * m + ic + i) * pixels + px.start),
                            tw,
                        );
                        let d = std::slice::from_raw_parts_mut(cp.add(i * CLD), cols);
                        widen(self.t, src, &mut d[..tw]);
                        d[tw..].fill(0.0);
                    }
                }
            }
            let mut pc = 0;
            while pc < k {
                let kc = kc_max.min(k - pc);
                let apanels = match self.av {
                    AView::Packed { base, m_pad, row0 } => {
                        base.wrapping_add(pc * m_pad + (row0 + ic) * kc)
                    }
                    AView::Lowp(l) => match abuf.as_deref_mut() {
                        // SAFETY: block (pc, ic) of the packed reduced weights: inside them
                        // by the contract.
                        Some(buf) => unsafe { l.widen(mr, (pc, kc), (ic, mc), buf) },
                        None => return,
                    },
                    AView::Rows(..) => return,
                };
                let mut j0 = 0;
                while j0 < tw {
                    let wv = step.min(tw - j0);
                    let (run, np) = match kernel.wide {
                        Some(wide) if wv > NR => (wide, 2),
                        _ => (kernel.run, 1),
                    };
                    let b = if whole {
                        // Rows pc.. of pair j0 / step, widened above.
                        bp.wrapping_add(j0 * k + pc * step)
                    } else {
                        // SAFETY: rows pc .. pc + kc <= k of the planes, pixels px.start + j0
                        // .. + wv <= px.end (the contract); kc rows of `step <= 2 NR` floats
                        // of the buffer (kc <= KC).
                        unsafe {
                            self.widen_rows(x.add(pc * pixels + j0), pixels, kc, wv, step, bp)
                        };
                        bp
                    };
                    // The next pair's rows (widened above) prefetched, a share per call, as the
                    // core prefetches the next panels.
                    let (pf, pf_lines) = if whole {
                        (b.wrapping_add(step * k), kc.div_ceil(nip))
                    } else {
                        (b, 0)
                    };
                    for ip in 0..nip {
                        // A last micro-panel of h < mr rows: the core's kernel of h rows.
                        let h = mr.min(mc - ip * mr);
                        let run = match kernel.edge.filter(|_| h < mr) {
                            Some(edge) => edge(h, np).unwrap_or(run),
                            None => run,
                        };
                        // SAFETY: micro-panel ip of the block (kc * mr floats, packed or
                        // widened above); kc widened rows of `step` floats at `b`, panels NR
                        // apart; the C tile rows ip * mr .. + mr <= MC (MC is a multiple of
                        // mr), columns j0 .. j0 + step <= TILE (tw <= TILE, a multiple of
                        // 2 NR), written by the first K block before later ones read them;
                        // the kernel runs on this CPU (selected).
                        unsafe {
                            run(
                                kc,
                                apanels.wrapping_add(ip * kc * mr),
                                b,
                                NR,
                                step,
                                cp.add(ip * mr * CLD + j0),
                                CLD,
                                pc > 0 || self.acc,
                                pf.wrapping_add(ip * pf_lines * step),
                                pf_lines,
                            )
                        };
                    }
                    j0 += step;
                }
                pc += kc;
            }
            for i in 0..mc {
                // SAFETY: row i < mc of the tile, columns 0..tw written by every K block above.
                let row = unsafe { std::slice::from_raw_parts_mut(cp.add(i * CLD), tw) };
                let b = if self.bias.get().is_null() {
                    0.0
                } else {
                    // SAFETY: channel ic + i < m of the bias (m floats by the contract).
                    unsafe { *self.bias.get().add(ic + i) }
                };
                // The f32 epilogue's condition: with a bias (even +0.0, which turns -0.0
                // into +0.0) or an activation.
                if !self.bias.get().is_null() || self.act != crate::gemm::act::Activation::None {
                    crate::gemm::act::bias_act(row, b, self.act);
                }
                // SAFETY: pixels px of output channel ic + i of image img: this task's alone.
                let dst = unsafe {
                    std::slice::from_raw_parts_mut(
                        self.y.get().add((img * m + ic + i) * pixels + px.start),
                        tw,
                    )
                };
                narrow(self.t, row, dst);
            }
            ic += mc;
        }
    }
}

/// Whether the 16-bit conversions take AVX-512's loop on this CPU.
fn is_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::gemm::stage16::convert::isa() == crate::gemm::stage16::convert::Isa::Avx512
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use crate::gemm::NR;
    use crate::gemm::stage16::N16;
    use crate::gemm::stage16::convert::x86::widen16;
    use std::arch::x86_64::{_mm256_loadu_si256, _mm512_storeu_ps};

    /// `kc` rows of `np` vectors of [`NR`] values at `x` (`ld` apart) widened into rows of
    /// `np * NR` floats at `dst` (the conversion of `crate::gemm::stage16::widen`).
    ///
    /// # Safety
    /// The CPU has AVX-512F; `x` readable for the rows, `dst` writable for `kc * np * NR`
    /// floats.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn widen_rows(
        t: N16,
        x: *const u16,
        ld: usize,
        kc: usize,
        np: usize,
        dst: *mut f32,
    ) {
        for r in 0..kc {
            for j in 0..np {
                // SAFETY: vector j of row r of both, by the contract.
                unsafe {
                    let h = _mm256_loadu_si256(x.add(r * ld + j * NR).cast());
                    _mm512_storeu_ps(dst.add((r * np + j) * NR), widen16(t, h));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{MC, NR, TILE, split, tile_px};

    #[test]
    fn the_split_covers_every_output_once_in_bounded_tiles() {
        for n in [1usize, 2, 3] {
            for m in [1usize, 13, 96, 97, 300] {
                for pixels in [1usize, 15, 16, 17, 81, 169, 256, 257, 3136] {
                    for width in [1usize, 2, 3, 8] {
                        let tmax = [TILE, 64, 32, 16][(m + pixels) % 4];
                        let (tiles, mparts) = split(n, m, pixels, width, tmax);
                        // The tiles: contiguous, covering the plane, each at most TILE.
                        let mut next = 0;
                        for ti in 0..tiles {
                            let px = tile_px(ti, tiles, pixels);
                            assert_eq!(px.start, next);
                            assert!(px.len() <= tmax && !px.is_empty(), "{n} {pixels} {width}");
                            next = px.end;
                        }
                        assert_eq!(next, pixels);
                        let mblocks = m.div_ceil(MC);
                        assert!(mparts >= 1 && mparts <= mblocks);
                        // The channel parts: whole blocks, contiguous, covering 0..m.
                        let mut next = 0;
                        for part in 0..mparts {
                            let r0 = (mblocks * part / mparts * MC).min(m);
                            let r1 = (mblocks * (part + 1) / mparts * MC).min(m);
                            assert_eq!(r0, next);
                            assert!(r0.is_multiple_of(MC));
                            next = r1;
                        }
                        assert_eq!(next, m);
                        if width > 1 && n * pixels.div_ceil(NR) >= 2 * width {
                            assert!(n * tiles * mparts >= width, "{n} {m} {pixels} {width}");
                        }
                    }
                }
            }
        }
    }
}
