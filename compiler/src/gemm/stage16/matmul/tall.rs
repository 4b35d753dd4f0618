//! [`super::matmul`] with a constant B stored reduced (`--weights`) in taller row blocks than
//! the planned ones, in the same scratch. The GEMM core widens each reduced B panel pair
//! (`kc x 32`) once per call for all the rows of that call: at the planned block of a few
//! rows (ResNet's or a transformer's FFN at 16 rows) the widening cost ~19% of the product.
//! Here A is not kept widened row-major: each task widens and packs its rows straight into
//! the micro-kernel's panels for all of K ([`crate::gemm::pack_a_all`]'s layout), then runs
//! the product a sub-block of `cw` columns at a time into a `rows x cw` f32 C, bias added and
//! narrowed at once. The packed A of `t` rows takes `t * k` floats where the planned layout
//! took `block * (k + cols)` plus a packing slot, so `t` is several times `block` (a
//! 128x256 by 256x2048 product: 16 -> 48 rows, B widened 3 times instead of 8).
//!
//! Same bits as the planned blocks: every output element is the same micro-kernel sum over
//! the same K blocks in the same order, the bias added and the f32 narrowed once
//! (`tall_tests.rs`).

use super::super::split::{Shared, task_width};
use super::super::{N16, narrow, widen};
use super::MmStage;
use crate::gemm::lowp::WeightType;
use crate::gemm::pack_a::pack_a;
use crate::gemm::{AView, BView, KC, MC, NR, selected_kernel, sgemm_core};

/// Columns of one C sub-block at the least: two packed panels (the wide micro-kernel's tile).
const CW_MIN: usize = 2 * NR;

/// Floats rounded up to whole 64-byte lines (the scratch parts' unit).
fn up(f: usize) -> usize {
    f.next_multiple_of(16)
}

/// The tall blocks of one product: rows of A per task and columns per C sub-block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Tall {
    /// Rows of A per task (a multiple of the kernel's `MR`, or all of `m`).
    pub(super) rows: usize,
    /// Columns of a C sub-block (a multiple of [`CW_MIN`], or all of the column block).
    pub(super) cw: usize,
}

/// Columns of a C sub-block of `rows` rows in `room` floats: a multiple of [`CW_MIN`] up
/// to `cols` (all of `cols` when it is at most [`CW_MIN`]); 0 when not even that fits.
fn cw_for(rows: usize, room: usize, cols: usize) -> usize {
    let cw = if cols <= CW_MIN {
        cols
    } else {
        (room / rows.max(1) / CW_MIN * CW_MIN).min(cols)
    };
    if cw * rows <= room { cw } else { 0 }
}

/// The tall blocks of `s` (column blocks of `cols`) in a slot of `region` floats: the rows
/// per task, `m` cut into equal blocks of at most [`MC`] rows (one M block of the core), each
/// a multiple of `mr` (or all of `m`) whose packed A and a C sub-block of at least
/// [`CW_MIN`] columns (or all of `cols`) fit, then the widest sub-block those rows leave
/// room for; `None` unless the blocks hold more rows than `block`.
pub(super) fn plan(
    s: &MmStage,
    cols: usize,
    block: usize,
    region: usize,
    mr: usize,
) -> Option<Tall> {
    let (m, k) = (s.m.max(1), s.k.max(1));
    let cap = MC.min(m.next_multiple_of(mr));
    let room = |t: usize| region.checked_sub(up(t.next_multiple_of(mr) * k));
    let fits = |t: usize| room(t).is_some_and(|r| cw_for(t, r, cols) > 0);
    let most = (1..=cap / mr).rev().map(|u| u * mr).find(|&t| fits(t))?;
    let blocks = m.div_ceil(most);
    let rows = m.div_ceil(blocks).next_multiple_of(mr).min(most).min(m);
    let cw = cw_for(rows, room(rows)?, cols);
    (rows > block && cw > 0).then_some(Tall { rows, cw })
}

/// Widens rows of the 16-bit `a` (`rows x k`, row-major) and packs them for micro-kernels of
/// `mr` rows into `dst` in [`crate::gemm::pack_a_all`]'s layout (`m_pad = rows` rounded up to
/// `mr`; K blocks as the core cuts them), through one widened micro-panel on the stack.
///
/// # Safety
/// `a` readable for `rows * k` values; `dst` writable for `m_pad * k` floats, overlapping
/// nothing read; `mr <= 12`.
unsafe fn pack_a16(t: N16, rows: usize, k: usize, a: *const u16, mr: usize, dst: *mut f32) {
    #[repr(C, align(64))]
    struct Buf([f32; 12 * KC]);
    let mut buf = Buf([0.0; 12 * KC]);
    let m_pad = rows.div_ceil(mr) * mr;
    let kc_max = k.div_ceil(k.div_ceil(KC).max(1)).max(1);
    let mut pc = 0;
    while pc < k {
        let kc = kc_max.min(k - pc);
        for ip in 0..rows.div_ceil(mr) {
            let h = mr.min(rows - ip * mr);
            for r in 0..h {
                // SAFETY: row ip * mr + r < rows, columns pc..pc + kc <= k of A.
                let src = unsafe { std::slice::from_raw_parts(a.add((ip * mr + r) * k + pc), kc) };
                widen(t, src, &mut buf.0[r * kc..(r + 1) * kc]);
            }
            // SAFETY: `buf` holds h rows of kc floats at stride kc; micro-panel ip of K block
            // pc is `mr * kc` floats at `pc * m_pad + ip * mr * kc`, inside `m_pad * k`.
            unsafe {
                pack_a(
                    mr,
                    h,
                    kc,
                    buf.0.as_ptr(),
                    kc,
                    dst.add(pc * m_pad + ip * mr * kc),
                )
            };
        }
        pc += kc;
    }
}

/// One task of the tall product: rows `at..at + rows` of A and Y by columns `j0..j0 + w`,
/// in the slot `region` (its A packed first, C after it at a 64-byte boundary).
///
/// # Safety
/// `a`, `y` as [`super::matmul`]'s; `packed_b` the whole reduced B (`wtype`) of `s.k x s.n`;
/// `bias` null or `n` floats; `region` writable for the floats [`plan`] planned `tall` in,
/// this task's alone; rows and columns this task's alone in Y.
#[allow(clippy::too_many_arguments)]
unsafe fn task(
    t: N16,
    s: &MmStage,
    tall: &Tall,
    wtype: u64,
    (at, rows): (usize, usize),
    (j0, w): (usize, usize),
    a: *const u16,
    packed_b: *const u8,
    bias: *const f32,
    y: *mut u16,
    region: *mut f32,
) {
    let (k, n) = (s.k, s.n);
    let kernel = selected_kernel();
    let mr = kernel.mr;
    let m_pad = rows.div_ceil(mr) * mr;
    let c = region.wrapping_add(up(m_pad * k));
    // SAFETY: rows `at..at + rows` of A; the packed A fits the region ([`plan`]).
    unsafe { pack_a16(t, rows, k, a.add(at * k), mr, region) };
    let av = AView::Packed {
        base: region.cast_const(),
        m_pad,
        row0: 0,
    };
    let wt = WeightType::from_code(wtype).unwrap_or(WeightType::F32);
    let b = BView::packed_lowp(packed_b, wt, k, n);
    let mut jj = 0;
    while jj < w {
        let cw = tall.cw.min(w - jj);
        // SAFETY: the packed A above (no scratch read for it); columns j0 + jj.. of B
        // (a multiple of NR: j0 and cw are); C holds rows x cw floats after the packed A.
        unsafe {
            sgemm_core(kernel, rows, cw, k, av, b.at_col(j0 + jj), c, cw, false, c);
        }
        // SAFETY: C's rows x cw floats written above; Y's rows at.., columns j0 + jj..
        // + cw this task's.
        unsafe {
            for i in 0..rows {
                let row = std::slice::from_raw_parts_mut(c.add(i * cw), cw);
                if !bias.is_null() {
                    let bias = std::slice::from_raw_parts(bias.add(j0 + jj), cw);
                    row.iter_mut().zip(bias).for_each(|(v, &b)| *v += b);
                }
                let dst = std::slice::from_raw_parts_mut(y.add((at + i) * n + j0 + jj), cw);
                narrow(t, row, dst);
            }
        }
        jj += cw;
    }
}

/// Floats of one slot's region: the product's whole scratch (`floats`) in `slots` equal
/// parts, whole 64-byte lines each.
pub(super) fn region_floats(floats: usize, slots: usize) -> usize {
    floats / slots.max(1) / 16 * 16
}

/// Runs the whole product in tall tasks when they fit (and, on a pool, when more than one
/// runs at once: else the planned path runs each product on every thread), returning whether
/// it did. The scratch planned for `block`-row blocks (`floats` at `scratch`) is cut anew
/// into `slots` equal regions, one per thread running tasks.
///
/// # Safety
/// As [`super::matmul`] with a constant reduced B (`wtype`); `scratch` writable for
/// `floats` floats, 64-aligned, overlapping nothing else; `slots` at most what
/// [`super::MmStage::parts`] planned slots for (1 at one thread).
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn run(
    t: N16,
    s: &MmStage,
    block: usize,
    wtype: u64,
    (scratch, floats, slots): (*mut f32, usize, usize),
    a: *const u16,
    packed_b: *const u8,
    bias: *const f32,
    y: *mut u16,
) -> bool {
    let (m, n) = (s.m, s.n);
    let threads = s.threads.max(1);
    let slots = if threads == 1 { 1 } else { slots.max(1) };
    let mr = selected_kernel().mr;
    let cols = s.cols_at(block);
    let region = region_floats(floats, slots);
    let Some(tall) = plan(s, cols, block, region, mr) else {
        return false;
    };
    let (nrb, ncb) = (m.max(1).div_ceil(tall.rows), n.max(1).div_ceil(cols));
    let tasks = nrb * ncb;
    let width = task_width(
        tasks,
        slots,
        crate::par::cost::gemm_ns(s.batch * m * n * s.k),
    );
    if threads > 1 && width <= 1 {
        return false;
    }
    let (a, y, bias) = (Shared::of(a), Shared(y), Shared::of(bias));
    let (pb, scratch) = (Shared::of(packed_b), Shared(scratch));
    for bi in 0..s.batch {
        crate::par::for_each(tasks, width, |i, th| {
            let (j0, r0) = ((i / nrb) * cols, (i % nrb) * tall.rows);
            let (w, h) = (cols.min(n - j0), tall.rows.min(m - r0));
            let region = scratch.get().wrapping_add(th * region);
            // SAFETY: rows `bi * m + r0..+h`, columns `j0..j0 + w` are this task's; thread
            // `th < width <= slots` uses its own region of the scratch (contract).
            unsafe {
                task(
                    t,
                    s,
                    &tall,
                    wtype,
                    (bi * m + r0, h),
                    (j0, w),
                    a.get(),
                    pb.get(),
                    bias.get(),
                    y.get(),
                    region,
                )
            };
        });
    }
    true
}
